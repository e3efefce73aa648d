// Reference inclusive running maximum along rows.
#include <cstdint>

extern "C" void kope_kernel(const float* x, float* y, int64_t N, int64_t D) {
  for (int64_t n = 0; n < N; ++n) {
    float m = x[n * D];
    for (int64_t d = 0; d < D; ++d) {
      if (x[n * D + d] > m) m = x[n * D + d];
      y[n * D + d] = m;
    }
  }
}
