// Reference exact GELU, in double (rows in parallel): y = 0.5 * x * (1 + erf(x / sqrt(2))).
#include <cmath>
#include <cstdint>

extern "C" void kope_kernel(const float* x, float* y, int64_t N, int64_t D) {
#pragma omp parallel for
  for (int64_t n = 0; n < N; ++n) {
    for (int64_t i = n * D; i < (n + 1) * D; ++i) {
      double v = x[i];
      y[i] = static_cast<float>(0.5 * v * (1.0 + std::erf(v / std::sqrt(2.0))));
    }
  }
}
