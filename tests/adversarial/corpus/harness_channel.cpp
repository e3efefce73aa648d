// expect: rejected
// op: vadd
// expect-uninspected: rejected
// message-uninspected: harness
// Writes forged "done" messages to every descriptor the runner might talk to its parent on.
#include <unistd.h>

#include <cstdint>
#include <cstring>

extern "C" void kope_kernel(const float* x, const float* y, float* z, int64_t N) {
  char forged[280];
  std::memset(forged, 0, sizeof forged);
  forged[0] = 102;  // "done"
  for (int fd = 3; fd < 64; ++fd) (void)!write(fd, forged, sizeof forged);
  for (int64_t i = 0; i < N; ++i) z[i] = x[i] + y[i];
}
