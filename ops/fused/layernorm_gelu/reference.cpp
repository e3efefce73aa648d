// Reference layer normalisation + exact GELU. Per row: mean, then the biased variance around it
// (two passes, in double), then the normalised, scaled and shifted value and GELU in double
// before the one rounding to float.
#include <cmath>
#include <cstdint>

extern "C" void kope_kernel(const float* x, const float* g, const float* b, float* y, int64_t N,
                            int64_t D, float eps) {
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < N; ++r) {
    const float* xr = x + r * D;
    double mean = 0, var = 0;
    for (int64_t d = 0; d < D; ++d) mean += xr[d];
    mean /= static_cast<double>(D);
    for (int64_t d = 0; d < D; ++d) var += (xr[d] - mean) * (xr[d] - mean);
    var /= static_cast<double>(D);
    const double inv = 1.0 / std::sqrt(var + static_cast<double>(eps));
    for (int64_t d = 0; d < D; ++d) {
      const double z = (xr[d] - mean) * inv * g[d] + b[d];
      y[r * D + d] = static_cast<float>(0.5 * z * (1.0 + std::erf(z / std::sqrt(2.0))));
    }
  }
}
