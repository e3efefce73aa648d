// Reference causal sliding-window attention. For each (batch, head, query row i): scores
// against the keys max(0, i - L + 1)..i in double, softmax with the row maximum subtracted, then
// the probability-weighted sum of v, all in double.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

extern "C" void kope_kernel(const float* q, const float* k, const float* v, float* o, int64_t B,
                            int64_t H, int64_t S, int64_t DH, int64_t L) {
  const double scale = 1.0 / std::sqrt(static_cast<double>(DH));
#pragma omp parallel for schedule(dynamic, 8)
  for (int64_t row = 0; row < B * H * S; ++row) {  // row = (b * H + h) * S + i
    const int64_t bh = row / S, i = row % S;
    const int64_t first = std::max<int64_t>(0, i - L + 1);  // the window's first key
    const float* qi = q + row * DH;
    const float* kb = k + bh * S * DH;
    const float* vb = v + bh * S * DH;
    std::vector<double> p(static_cast<std::size_t>(i + 1 - first));
    double m = -INFINITY;
    for (int64_t j = first; j <= i; ++j) {
      double dot = 0;
      for (int64_t d = 0; d < DH; ++d) dot += static_cast<double>(qi[d]) * kb[j * DH + d];
      p[j - first] = dot * scale;
      m = std::fmax(m, p[j - first]);
    }
    double sum = 0;
    for (double& x : p) {
      x = std::exp(x - m);
      sum += x;
    }
    std::vector<double> acc(static_cast<std::size_t>(DH), 0.0);
    for (int64_t j = first; j <= i; ++j) {
      for (int64_t d = 0; d < DH; ++d) acc[d] += p[j - first] * vb[j * DH + d];
    }
    for (int64_t d = 0; d < DH; ++d) o[row * DH + d] = static_cast<float>(acc[d] / sum);
  }
}
