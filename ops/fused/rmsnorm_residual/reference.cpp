// Reference residual add + RMS normalisation. h = x + r is rounded to float first (it is an
// output, and the normalisation reads the stored stream, as the next block would); the mean of
// squares and the normalised value are computed from it in double before the one rounding.
#include <cmath>
#include <cstdint>

extern "C" void kope_kernel(const float* x, const float* r, const float* weight, float* y,
                            float* h, int64_t N, int64_t D, float eps) {
#pragma omp parallel for schedule(static)
  for (int64_t row = 0; row < N; ++row) {
    const int64_t base = row * D;
    double sum_sq = 0;
    for (int64_t d = 0; d < D; ++d) {
      const float v = x[base + d] + r[base + d];
      h[base + d] = v;
      sum_sq += static_cast<double>(v) * v;
    }
    const double inv = 1.0 / std::sqrt(sum_sq / static_cast<double>(D) + static_cast<double>(eps));
    for (int64_t d = 0; d < D; ++d) {
      y[base + d] = static_cast<float>(static_cast<double>(h[base + d]) * inv * weight[d]);
    }
  }
}
