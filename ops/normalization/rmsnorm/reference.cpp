// Reference RMS normalisation over the last axis, in double:
// y = x / sqrt(mean(x^2) + eps) * weight.
#include <cmath>
#include <cstdint>

extern "C" void kope_kernel(const float* x, const float* weight, float* y, int64_t N, int64_t D, float eps) {
  for (int64_t n = 0; n < N; ++n) {
    const float* row = x + n * D;
    double ss = 0;
    for (int64_t d = 0; d < D; ++d) ss += static_cast<double>(row[d]) * row[d];
    double inv = 1.0 / std::sqrt(ss / static_cast<double>(D) + static_cast<double>(eps));
    for (int64_t d = 0; d < D; ++d) y[n * D + d] = static_cast<float>(row[d] * inv * weight[d]);
  }
}
