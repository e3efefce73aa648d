// Reference causal attention with rotary position embedding. q and k are first rotated (in
// double, cos and sin of each angle in double) into copies; then for each (batch, head, query
// row) the scores against keys 0..i in double, softmax with the row maximum subtracted, and the
// probability-weighted sum of v, all in double.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace {

// out = rot(t) for B·H heads of S rows of DH = 2·HD2 values (the rotate-half form).
void rotate(const float* t, const float* angle, std::vector<double>& out, int64_t heads, int64_t S,
            int64_t HD2) {
  const int64_t DH = 2 * HD2;
#pragma omp parallel for schedule(static)
  for (int64_t row = 0; row < heads * S; ++row) {
    const int64_t s = row % S;
    const float* in = t + row * DH;
    double* o = out.data() + row * DH;
    for (int64_t p = 0; p < HD2; ++p) {
      const double a = angle[s * HD2 + p], c = std::cos(a), sn = std::sin(a);
      const double x0 = in[p], x1 = in[p + HD2];
      o[p] = x0 * c - x1 * sn;
      o[p + HD2] = x1 * c + x0 * sn;
    }
  }
}

}  // namespace

extern "C" void kope_kernel(const float* q, const float* k, const float* v, const float* angle,
                            float* o, int64_t B, int64_t H, int64_t S, int64_t HD2) {
  const int64_t DH = 2 * HD2;
  const auto n = static_cast<std::size_t>(B * H * S * DH);
  std::vector<double> qr(n), kr(n);
  rotate(q, angle, qr, B * H, S, HD2);
  rotate(k, angle, kr, B * H, S, HD2);
  const double scale = 1.0 / std::sqrt(static_cast<double>(DH));
#pragma omp parallel for schedule(dynamic, 8)
  for (int64_t row = 0; row < B * H * S; ++row) {  // row = (b * H + h) * S + i
    const int64_t bh = row / S, i = row % S;
    const double* qi = qr.data() + row * DH;
    const double* kb = kr.data() + bh * S * DH;
    const float* vb = v + bh * S * DH;
    std::vector<double> p(static_cast<std::size_t>(i + 1));
    double m = -INFINITY;
    for (int64_t j = 0; j <= i; ++j) {
      double dot = 0;
      for (int64_t d = 0; d < DH; ++d) dot += qi[d] * kb[j * DH + d];
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
