// Reference three-layer MLP classifier with log-softmax. Each row is computed independently,
// everything in double (i-k-j order for the three products); the hidden activations are never
// rounded to float; the log-softmax subtracts the row maximum.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace {

// out = in·w + b (in has K entries, w is K x N row-major), then ReLU when `relu`.
void layer(const std::vector<double>& in, const float* w, const float* b, std::vector<double>& out,
           bool relu) {
  const auto K = static_cast<int64_t>(in.size()), N = static_cast<int64_t>(out.size());
  for (int64_t n = 0; n < N; ++n) out[n] = b[n];
  for (int64_t k = 0; k < K; ++k) {
    for (int64_t n = 0; n < N; ++n) out[n] += in[k] * w[k * N + n];
  }
  if (relu) {
    for (double& v : out) v = std::max(v, 0.0);
  }
}

}  // namespace

extern "C" void kope_kernel(const float* x, const float* w1, const float* b1, const float* w2,
                            const float* b2, const float* w3, const float* b3, float* y, int64_t M,
                            int64_t D, int64_t F, int64_t C) {
  const auto n = [](int64_t count) { return static_cast<std::size_t>(count); };
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < M; ++i) {
    std::vector<double> in(x + i * D, x + (i + 1) * D), h1(n(F)), h2(n(F)), z(n(C));
    layer(in, w1, b1, h1, true);
    layer(h1, w2, b2, h2, true);
    layer(h2, w3, b3, z, false);
    const double m = *std::max_element(z.begin(), z.end());
    double sum = 0;
    for (double v : z) sum += std::exp(v - m);
    const double log_sum = std::log(sum);
    for (int64_t c = 0; c < C; ++c) y[i * C + c] = static_cast<float>(z[c] - m - log_sum);
  }
}
