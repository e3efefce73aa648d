// Reference inclusive prefix product along rows, accumulated in double.
#include <cstdint>

extern "C" void kope_kernel(const float* x, float* y, int64_t N, int64_t D) {
  for (int64_t n = 0; n < N; ++n) {
    double p = 1;
    for (int64_t d = 0; d < D; ++d) {
      p *= x[n * D + d];
      y[n * D + d] = static_cast<float>(p);
    }
  }
}
