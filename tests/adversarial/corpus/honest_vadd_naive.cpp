// expect: correct
// op: vadd
// time: yes
// The plain loop.
#include <cstdint>

extern "C" void kope_kernel(const float* x, const float* y, float* z, int64_t N) {
  for (int64_t i = 0; i < N; ++i) z[i] = x[i] + y[i];
}
