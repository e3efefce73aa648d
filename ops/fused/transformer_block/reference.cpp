// Reference pre-LN GPT-style decoder block (causal multi-head self-attention and a GELU MLP,
// each with a residual connection). Every intermediate is kept in double; products are
// accumulated in double (i-k-j order), softmax subtracts the row maximum.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace {

using Vec = std::vector<double>;

// y[r, :] = (x[r, :] - mean) / sqrt(var + eps) * g + b for each of `rows` rows of length D.
void layernorm(const double* x, const float* g, const float* b, double* y, int64_t rows, int64_t D,
               double eps) {
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    const double* xr = x + r * D;
    double mean = 0, var = 0;
    for (int64_t d = 0; d < D; ++d) mean += xr[d];
    mean /= static_cast<double>(D);
    for (int64_t d = 0; d < D; ++d) var += (xr[d] - mean) * (xr[d] - mean);
    var /= static_cast<double>(D);
    const double inv = 1.0 / std::sqrt(var + eps);
    for (int64_t d = 0; d < D; ++d) y[r * D + d] = (xr[d] - mean) * inv * g[d] + b[d];
  }
}

// y = x·w + bias: x is rows x K, w is K x N (row-major), bias has N entries.
void linear(const double* x, const float* w, const float* bias, double* y, int64_t rows, int64_t K,
            int64_t N) {
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    double* yr = y + r * N;
    for (int64_t n = 0; n < N; ++n) yr[n] = bias[n];
    for (int64_t k = 0; k < K; ++k) {
      const double a = x[r * K + k];
      for (int64_t n = 0; n < N; ++n) yr[n] += a * w[k * N + n];
    }
  }
}

}  // namespace

extern "C" void kope_kernel(const float* x, const float* ln1_g, const float* ln1_b, const float* wq,
                            const float* bq, const float* wk, const float* bk, const float* wv,
                            const float* bv, const float* wo, const float* bo, const float* ln2_g,
                            const float* ln2_b, const float* w1, const float* b1, const float* w2,
                            const float* b2, float* y, int64_t B, int64_t S, int64_t H, int64_t DH,
                            int64_t F, float eps) {
  const int64_t D = H * DH, T = B * S;  // model width, tokens
  const auto n = [](int64_t count) { return static_cast<std::size_t>(count); };
  Vec xd(n(T * D)), a(n(T * D)), q(n(T * D)), k(n(T * D)), v(n(T * D)), att(n(T * D)), x2(n(T * D));
  for (int64_t i = 0; i < T * D; ++i) xd[i] = x[i];

  // Attention sub-block: x2 = x + causal_mha(LN1(x)) * wo + bo.
  layernorm(xd.data(), ln1_g, ln1_b, a.data(), T, D, eps);
  linear(a.data(), wq, bq, q.data(), T, D, D);
  linear(a.data(), wk, bk, k.data(), T, D, D);
  linear(a.data(), wv, bv, v.data(), T, D, D);
  const double scale = 1.0 / std::sqrt(static_cast<double>(DH));
#pragma omp parallel for schedule(dynamic, 8)
  for (int64_t row = 0; row < B * H * S; ++row) {  // row = (b * H + h) * S + i
    const int64_t b = row / (H * S), h = (row / S) % H, i = row % S;
    const double* qi = q.data() + (b * S + i) * D + h * DH;
    Vec p(n(i + 1));
    double m = -INFINITY;
    for (int64_t j = 0; j <= i; ++j) {  // causal: keys 0..i
      const double* kj = k.data() + (b * S + j) * D + h * DH;
      double dot = 0;
      for (int64_t d = 0; d < DH; ++d) dot += qi[d] * kj[d];
      p[j] = dot * scale;
      m = std::fmax(m, p[j]);
    }
    double sum = 0;
    for (int64_t j = 0; j <= i; ++j) {
      p[j] = std::exp(p[j] - m);
      sum += p[j];
    }
    double* out = att.data() + (b * S + i) * D + h * DH;
    for (int64_t d = 0; d < DH; ++d) out[d] = 0;
    for (int64_t j = 0; j <= i; ++j) {
      const double* vj = v.data() + (b * S + j) * D + h * DH;
      for (int64_t d = 0; d < DH; ++d) out[d] += p[j] / sum * vj[d];
    }
  }
  linear(att.data(), wo, bo, x2.data(), T, D, D);
  for (int64_t i = 0; i < T * D; ++i) x2[i] += xd[i];

  // MLP sub-block: y = x2 + gelu(LN2(x2) * w1 + b1) * w2 + b2.
  Vec hid(n(T * F)), mlp(n(T * D));
  layernorm(x2.data(), ln2_g, ln2_b, a.data(), T, D, eps);
  linear(a.data(), w1, b1, hid.data(), T, D, F);
  for (int64_t i = 0; i < T * F; ++i)
    hid[i] = 0.5 * hid[i] * (1.0 + std::erf(hid[i] / std::sqrt(2.0)));
  linear(hid.data(), w2, b2, mlp.data(), T, F, D);
  for (int64_t i = 0; i < T * D; ++i) y[i] = static_cast<float>(x2[i] + mlp[i]);
}
