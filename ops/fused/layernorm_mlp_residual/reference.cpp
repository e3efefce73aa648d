// Reference pre-LN MLP sub-block: y = x + gelu(LN(x)·w1 + b1)·w2 + b2. Each row is computed
// independently, everything in double: two-pass layer-norm statistics, both products in i-k-j
// order, exact GELU; the intermediates are never rounded to float.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

extern "C" void kope_kernel(const float* x, const float* g, const float* b, const float* w1,
                            const float* b1, const float* w2, const float* b2, float* y, int64_t M,
                            int64_t D, int64_t F, float eps) {
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < M; ++i) {
    const float* xr = x + i * D;
    double mean = 0, var = 0;
    for (int64_t d = 0; d < D; ++d) mean += xr[d];
    mean /= static_cast<double>(D);
    for (int64_t d = 0; d < D; ++d) var += (xr[d] - mean) * (xr[d] - mean);
    var /= static_cast<double>(D);
    const double inv = 1.0 / std::sqrt(var + static_cast<double>(eps));
    std::vector<double> h(static_cast<std::size_t>(F));
    for (int64_t f = 0; f < F; ++f) h[f] = b1[f];
    for (int64_t d = 0; d < D; ++d) {
      const double a = (xr[d] - mean) * inv * g[d] + b[d];
      for (int64_t f = 0; f < F; ++f) h[f] += a * w1[d * F + f];
    }
    std::vector<double> out(static_cast<std::size_t>(D));
    for (int64_t d = 0; d < D; ++d) out[d] = static_cast<double>(xr[d]) + b2[d];
    for (int64_t f = 0; f < F; ++f) {
      const double act = 0.5 * h[f] * (1.0 + std::erf(h[f] / std::sqrt(2.0)));
      for (int64_t d = 0; d < D; ++d) out[d] += act * w2[f * D + d];
    }
    for (int64_t d = 0; d < D; ++d) y[i * D + d] = static_cast<float>(out[d]);
  }
}
