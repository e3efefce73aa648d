// Reference layer normalisation over the last axis, in double: mean and biased variance of each
// row (two passes), then y = (x - mean) / sqrt(var + eps) * gamma + beta.
#include <cmath>
#include <cstdint>

extern "C" void kope_kernel(const float* x, const float* gamma, const float* beta, float* y, int64_t N, int64_t D,
                            float eps) {
  for (int64_t n = 0; n < N; ++n) {
    const float* row = x + n * D;
    double mean = 0;
    for (int64_t d = 0; d < D; ++d) mean += row[d];
    mean /= static_cast<double>(D);
    double var = 0;
    for (int64_t d = 0; d < D; ++d) var += (row[d] - mean) * (row[d] - mean);
    var /= static_cast<double>(D);
    double inv = 1.0 / std::sqrt(var + static_cast<double>(eps));
    for (int64_t d = 0; d < D; ++d) y[n * D + d] = static_cast<float>((row[d] - mean) * inv * gamma[d] + beta[d]);
  }
}
