// Reference MLP block: y = gelu(x·w1 + b1)·w2 + b2 with exact (erf) GELU. Each row is computed
// independently, everything in double (i-k-j order for both products); the hidden activations
// are never rounded to float.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

extern "C" void kope_kernel(const float* x, const float* w1, const float* b1, const float* w2,
                            const float* b2, float* y, int64_t M, int64_t D, int64_t F) {
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < M; ++i) {
    std::vector<double> h(static_cast<std::size_t>(F), 0.0);
    for (int64_t d = 0; d < D; ++d) {
      const double a = x[i * D + d];
      for (int64_t f = 0; f < F; ++f) h[f] += a * w1[d * F + f];
    }
    for (int64_t f = 0; f < F; ++f) {
      const double z = h[f] + b1[f];
      h[f] = 0.5 * z * (1.0 + std::erf(z / std::sqrt(2.0)));
    }
    std::vector<double> out(static_cast<std::size_t>(D), 0.0);
    for (int64_t f = 0; f < F; ++f) {
      for (int64_t d = 0; d < D; ++d) out[d] += h[f] * w2[f * D + d];
    }
    for (int64_t d = 0; d < D; ++d) y[i * D + d] = static_cast<float>(out[d] + b2[d]);
  }
}
