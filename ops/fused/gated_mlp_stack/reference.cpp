// Reference stack of pre-LN gated feed-forward residual blocks. Each row is independent, so
// each is carried through all L layers in double: two-pass layer-norm statistics, the three
// products in i-k-j order, SiLU, and the residual add; only y is rounded to float.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace {

// row += ffn(LN(row)) for one layer's parameters; row has D entries.
void block(std::vector<double>& row, const float* g, const float* b, const float* wg,
           const float* wu, const float* wd, int64_t F, double eps) {
  const auto D = static_cast<int64_t>(row.size());
  double mean = 0, var = 0;
  for (double v : row) mean += v;
  mean /= static_cast<double>(D);
  for (double v : row) var += (v - mean) * (v - mean);
  var /= static_cast<double>(D);
  const double inv = 1.0 / std::sqrt(var + eps);
  std::vector<double> gate(static_cast<std::size_t>(F), 0.0), up(static_cast<std::size_t>(F), 0.0);
  for (int64_t d = 0; d < D; ++d) {
    const double a = (row[d] - mean) * inv * g[d] + b[d];
    for (int64_t f = 0; f < F; ++f) {
      gate[f] += a * wg[d * F + f];
      up[f] += a * wu[d * F + f];
    }
  }
  for (int64_t f = 0; f < F; ++f) {
    const double h = gate[f] / (1.0 + std::exp(-gate[f])) * up[f];
    for (int64_t d = 0; d < D; ++d) row[d] += h * wd[f * D + d];
  }
}

}  // namespace

extern "C" void kope_kernel(const float* x, const float* g, const float* b, const float* wg,
                            const float* wu, const float* wd, float* y, int64_t M, int64_t D,
                            int64_t F, int64_t L, float eps) {
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < M; ++i) {
    std::vector<double> row(x + i * D, x + (i + 1) * D);
    for (int64_t l = 0; l < L; ++l) {
      block(row, g + l * D, b + l * D, wg + l * D * F, wu + l * D * F, wd + l * F * D, F, eps);
    }
    for (int64_t d = 0; d < D; ++d) y[i * D + d] = static_cast<float>(row[d]);
  }
}
