// expect: wrong_result
// op: vadd
// message: expected nan
// Right everywhere except that NaN inputs give 0: NaN positions must match exactly.
#include <cmath>
#include <cstdint>

extern "C" void kope_kernel(const float* x, const float* y, float* z, int64_t N) {
  for (int64_t i = 0; i < N; ++i) {
    float v = x[i] + y[i];
    z[i] = std::isnan(v) ? 0.0f : v;
  }
}
