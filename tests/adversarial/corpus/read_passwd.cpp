// expect: rejected
// op: vadd
// expect-uninspected: rejected
// message-uninspected: forbidden system call
// Reads a file outside the sandbox's scratch directory.
#include <cstdint>
#include <cstdio>

extern "C" void kope_kernel(const float* x, const float* y, float* z, int64_t N) {
  FILE* f = std::fopen("/etc/passwd", "r");
  char line[256] = {};
  if (f != nullptr && std::fgets(line, sizeof line, f) != nullptr) std::printf("%s", line);
  for (int64_t i = 0; i < N; ++i) z[i] = x[i] + y[i];
}
