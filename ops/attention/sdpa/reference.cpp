// Reference scaled dot-product attention, one head, no mask. For each query row: scores in
// double, softmax with the row maximum subtracted, then the probability-weighted sum of v, all
// in double. k is first transposed (kt[b][d][j] = k[b][j][d]) so that a row of scores is
// accumulated over d in i-k-j order.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

extern "C" void kope_kernel(const float* q, const float* k, const float* v, float* o, int64_t B,
                            int64_t S, int64_t D) {
  const double scale = 1.0 / std::sqrt(static_cast<double>(D));
  std::vector<float> kt(static_cast<std::size_t>(B * D * S));
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t j = 0; j < S; ++j) {
      for (int64_t d = 0; d < D; ++d) kt[(b * D + d) * S + j] = k[(b * S + j) * D + d];
    }
  }
#pragma omp parallel for schedule(static)
  for (int64_t row = 0; row < B * S; ++row) {  // row = b * S + i
    const int64_t b = row / S;
    const float* qi = q + row * D;
    const float* ktb = kt.data() + b * D * S;
    const float* vb = v + b * S * D;
    std::vector<double> p(static_cast<std::size_t>(S), 0.0);
    for (int64_t d = 0; d < D; ++d) {
      const double qd = qi[d];
      for (int64_t j = 0; j < S; ++j) p[j] += qd * ktb[d * S + j];
    }
    double m = -INFINITY;
    for (int64_t j = 0; j < S; ++j) {
      p[j] *= scale;
      m = std::fmax(m, p[j]);
    }
    double sum = 0;
    for (int64_t j = 0; j < S; ++j) {
      p[j] = std::exp(p[j] - m);
      sum += p[j];
    }
    std::vector<double> acc(static_cast<std::size_t>(D), 0.0);
    for (int64_t j = 0; j < S; ++j) {
      for (int64_t d = 0; d < D; ++d) acc[d] += p[j] * vb[j * D + d];
    }
    for (int64_t d = 0; d < D; ++d) o[row * D + d] = static_cast<float>(acc[d] / sum);
  }
}
