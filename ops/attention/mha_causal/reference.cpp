// Reference multi-head causal attention. For each (batch, head, query i): scores against keys
// 0..i in double, softmax with the row maximum subtracted, then the probability-weighted sum of
// v, all in double. Keys after i are skipped, which is exactly a -inf mask. k is first
// transposed per (batch, head) so that a row of scores is accumulated over d in i-k-j order.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

extern "C" void kope_kernel(const float* q, const float* k, const float* v, float* o, int64_t B,
                            int64_t H, int64_t S, int64_t DH) {
  const double scale = 1.0 / std::sqrt(static_cast<double>(DH));
  std::vector<float> kt(static_cast<std::size_t>(B * H * DH * S));  // kt[bh][d][j] = k[bh][j][d]
  for (int64_t bh = 0; bh < B * H; ++bh) {
    for (int64_t j = 0; j < S; ++j) {
      for (int64_t d = 0; d < DH; ++d) kt[(bh * DH + d) * S + j] = k[(bh * S + j) * DH + d];
    }
  }
#pragma omp parallel for schedule(dynamic, 16)
  for (int64_t row = 0; row < B * H * S; ++row) {        // row = (b * H + h) * S + i
    const int64_t bh = row / S, i = row % S, n = i + 1;  // n keys are visible
    const float* qi = q + row * DH;
    const float* ktb = kt.data() + bh * DH * S;
    const float* vb = v + bh * S * DH;
    std::vector<double> p(static_cast<std::size_t>(n), 0.0);
    for (int64_t d = 0; d < DH; ++d) {
      const double qd = qi[d];
      for (int64_t j = 0; j < n; ++j) p[j] += qd * ktb[d * S + j];
    }
    double m = -INFINITY;
    for (int64_t j = 0; j < n; ++j) {
      p[j] *= scale;
      m = std::fmax(m, p[j]);
    }
    double sum = 0;
    for (int64_t j = 0; j < n; ++j) {
      p[j] = std::exp(p[j] - m);
      sum += p[j];
    }
    std::vector<double> acc(static_cast<std::size_t>(DH), 0.0);
    for (int64_t j = 0; j < n; ++j) {
      for (int64_t d = 0; d < DH; ++d) acc[d] += p[j] * vb[j * DH + d];
    }
    for (int64_t d = 0; d < DH; ++d) o[row * DH + d] = static_cast<float>(acc[d] / sum);
  }
}
