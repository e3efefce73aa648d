// expect: rejected
// op: vadd
// expect-uninspected: rejected
// Tries to kill whatever is around it.
#include <signal.h>
#include <unistd.h>

#include <cstdint>

extern "C" void kope_kernel(const float* x, const float* y, float* z, int64_t N) {
  kill(getppid(), SIGKILL);
  kill(-1, SIGKILL);
  for (int64_t i = 0; i < N; ++i) z[i] = x[i] + y[i];
}
