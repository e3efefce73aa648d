// Reference tanh-approximated GELU, in double (rows in parallel):
// y = 0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3))).
#include <cmath>
#include <cstdint>

extern "C" void kope_kernel(const float* x, float* y, int64_t N, int64_t D) {
  const double k = std::sqrt(2.0 / M_PI);
#pragma omp parallel for
  for (int64_t n = 0; n < N; ++n) {
    for (int64_t i = n * D; i < (n + 1) * D; ++i) {
      double v = x[i];
      y[i] = static_cast<float>(0.5 * v * (1.0 + std::tanh(k * (v + 0.044715 * v * v * v))));
    }
  }
}
