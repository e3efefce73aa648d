// expect: runtime_error
// op: vadd
// message: past the end of output z
// Writes a page past the end: the guard page faults and the runner names the buffer.
#include <cstdint>

extern "C" void kope_kernel(const float* x, const float* y, float* z, int64_t N) {
  for (int64_t i = 0; i < N; ++i) z[i] = x[i] + y[i];
  volatile float* far = z + N + 1024;
  *far = 1;
}
