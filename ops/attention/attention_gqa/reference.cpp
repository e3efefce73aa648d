// Reference grouped-query causal attention. For each (batch, query head, query row): scores
// against the keys 0..i of its kv head (h / G) in double, softmax with the row maximum
// subtracted, then the probability-weighted sum of v, all in double.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

extern "C" void kope_kernel(const float* q, const float* k, const float* v, float* o, int64_t B,
                            int64_t HKV, int64_t G, int64_t S, int64_t DH) {
  const int64_t H = HKV * G;
  const double scale = 1.0 / std::sqrt(static_cast<double>(DH));
#pragma omp parallel for schedule(dynamic, 8)
  for (int64_t row = 0; row < B * H * S; ++row) {  // row = (b * H + h) * S + i
    const int64_t b = row / (H * S), h = (row / S) % H, i = row % S;
    const int64_t kv = b * HKV + h / G;  // the kv head this query head reads
    const float* qi = q + row * DH;
    const float* kb = k + kv * S * DH;
    const float* vb = v + kv * S * DH;
    std::vector<double> p(static_cast<std::size_t>(i + 1));
    double m = -INFINITY;
    for (int64_t j = 0; j <= i; ++j) {
      double dot = 0;
      for (int64_t d = 0; d < DH; ++d) dot += static_cast<double>(qi[d]) * kb[j * DH + d];
      p[j] = dot * scale;
      m = std::fmax(m, p[j]);
    }
    double sum = 0;
    for (int64_t j = 0; j <= i; ++j) {
      p[j] = std::exp(p[j] - m);
      sum += p[j];
    }
    std::vector<double> acc(static_cast<std::size_t>(DH), 0.0);
    for (int64_t j = 0; j <= i; ++j) {
      for (int64_t d = 0; d < DH; ++d) acc[d] += p[j] * vb[j * DH + d];
    }
    for (int64_t d = 0; d < DH; ++d) o[row * DH + d] = static_cast<float>(acc[d] / sum);
  }
}
