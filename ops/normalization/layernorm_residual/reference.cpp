// Reference residual add + layer normalisation ("add & norm"), in double: h = x + r (stored as
// fp32), then the row mean and biased variance of h (two passes) and
// y = (h - mean) / sqrt(var + eps) * gamma + beta.
#include <cmath>
#include <cstdint>

extern "C" void kope_kernel(const float* x, const float* r, const float* gamma, const float* beta, float* h,
                            float* y, int64_t N, int64_t D, float eps) {
  for (int64_t n = 0; n < N; ++n) {
    float* hr = h + n * D;
    for (int64_t d = 0; d < D; ++d) hr[d] = x[n * D + d] + r[n * D + d];
    double mean = 0;
    for (int64_t d = 0; d < D; ++d) mean += hr[d];
    mean /= static_cast<double>(D);
    double var = 0;
    for (int64_t d = 0; d < D; ++d) var += (hr[d] - mean) * (hr[d] - mean);
    var /= static_cast<double>(D);
    double inv = 1.0 / std::sqrt(var + static_cast<double>(eps));
    for (int64_t d = 0; d < D; ++d) y[n * D + d] = static_cast<float>((hr[d] - mean) * inv * gamma[d] + beta[d]);
  }
}
