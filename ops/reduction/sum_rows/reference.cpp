// Reference row sum, accumulated in double.
#include <cstdint>

extern "C" void kope_kernel(const float* x, float* y, int64_t N, int64_t D) {
  for (int64_t n = 0; n < N; ++n) {
    double s = 0;
    for (int64_t d = 0; d < D; ++d) s += x[n * D + d];
    y[n] = static_cast<float>(s);
  }
}
