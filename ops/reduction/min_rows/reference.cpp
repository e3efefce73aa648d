// Reference row minimum.
#include <cstdint>

extern "C" void kope_kernel(const float* x, float* y, int64_t N, int64_t D) {
  for (int64_t n = 0; n < N; ++n) {
    float m = x[n * D];
    for (int64_t d = 1; d < D; ++d) m = x[n * D + d] < m ? x[n * D + d] : m;
    y[n] = m;
  }
}
