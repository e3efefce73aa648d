// Reference group normalisation + SiLU. Per (n, group): mean, then the biased variance around
// it (two passes in double), then the normalised, scaled and shifted value and SiLU in double
// before the one rounding to float.
#include <cmath>
#include <cstdint>

extern "C" void kope_kernel(const float* x, const float* gamma, const float* beta, float* y,
                            int64_t N, int64_t G, int64_t CG, int64_t H, int64_t W, float eps) {
  const int64_t HW = H * W, group = CG * HW;
#pragma omp parallel for schedule(dynamic)
  for (int64_t ng = 0; ng < N * G; ++ng) {
    const float* xg = x + ng * group;
    double mean = 0, var = 0;
    for (int64_t i = 0; i < group; ++i) mean += xg[i];
    mean /= static_cast<double>(group);
    for (int64_t i = 0; i < group; ++i) var += (xg[i] - mean) * (xg[i] - mean);
    var /= static_cast<double>(group);
    const double inv = 1.0 / std::sqrt(var + static_cast<double>(eps));
    for (int64_t cg = 0; cg < CG; ++cg) {
      const int64_t c = (ng % G) * CG + cg;
      for (int64_t i = cg * HW; i < (cg + 1) * HW; ++i) {
        const double z = (xg[i] - mean) * inv * gamma[c] + beta[c];
        y[ng * group + i] = static_cast<float>(z / (1.0 + std::exp(-z)));
      }
    }
  }
}
