// expect: wrong_result
// op: vadd
// message: N=1048576
// Right on the small cases, skips the work on the timed case's shape. Every case is checked,
// the timed ones included, with fresh data.
#include <cstdint>

extern "C" void kope_kernel(const float* x, const float* y, float* z, int64_t N) {
  if (N == 1048576) {
    for (int64_t i = 0; i < 1024; ++i) z[i] = x[i] + y[i];
    return;
  }
  for (int64_t i = 0; i < N; ++i) z[i] = x[i] + y[i];
}
