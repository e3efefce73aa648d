// expect: rejected
// op: vadd
// message: defines clock_gettime
// Replaces the clock an in-process harness would read.
#include <time.h>

#include <cstdint>

extern "C" int clock_gettime(clockid_t, struct timespec* ts) {
  ts->tv_sec = 0;
  ts->tv_nsec = 1;
  return 0;
}

extern "C" void kope_kernel(const float* x, const float* y, float* z, int64_t N) {
  for (int64_t i = 0; i < N; ++i) z[i] = x[i] + y[i];
}
