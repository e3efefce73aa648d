// Reference multi-head attention with an additive mask. For each (batch, head, query i): scores
// plus mask in double, softmax with the row maximum subtracted, then the probability-weighted
// sum of v, all in double. k is first transposed per (batch, head) so that a row of scores is
// accumulated over d in i-k-j order.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

extern "C" void kope_kernel(const float* q, const float* k, const float* v, const float* mask,
                            float* o, int64_t B, int64_t H, int64_t SQ, int64_t SK, int64_t DH) {
  const double scale = 1.0 / std::sqrt(static_cast<double>(DH));
  std::vector<float> kt(static_cast<std::size_t>(B * H * DH * SK));  // kt[bh][d][j] = k[bh][j][d]
  for (int64_t bh = 0; bh < B * H; ++bh) {
    for (int64_t j = 0; j < SK; ++j) {
      for (int64_t d = 0; d < DH; ++d) kt[(bh * DH + d) * SK + j] = k[(bh * SK + j) * DH + d];
    }
  }
#pragma omp parallel for schedule(static)
  for (int64_t row = 0; row < B * H * SQ; ++row) {  // row = (b * H + h) * SQ + i
    const int64_t bh = row / SQ, i = row % SQ, b = bh / H;
    const float* qi = q + row * DH;
    const float* ktb = kt.data() + bh * DH * SK;
    const float* vb = v + bh * SK * DH;
    const float* mi = mask + (b * SQ + i) * SK;
    std::vector<double> p(static_cast<std::size_t>(SK), 0.0);
    for (int64_t d = 0; d < DH; ++d) {
      const double qd = qi[d];
      for (int64_t j = 0; j < SK; ++j) p[j] += qd * ktb[d * SK + j];
    }
    double m = -INFINITY;
    for (int64_t j = 0; j < SK; ++j) {
      p[j] = p[j] * scale + mi[j];
      m = std::fmax(m, p[j]);
    }
    double sum = 0;
    for (int64_t j = 0; j < SK; ++j) {
      p[j] = std::exp(p[j] - m);
      sum += p[j];
    }
    std::vector<double> acc(static_cast<std::size_t>(DH), 0.0);
    for (int64_t j = 0; j < SK; ++j) {
      for (int64_t d = 0; d < DH; ++d) acc[d] += p[j] * vb[j * DH + d];
    }
    for (int64_t d = 0; d < DH; ++d) o[row * DH + d] = static_cast<float>(acc[d] / sum);
  }
}
