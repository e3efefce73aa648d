// Reference linear layer + row softmax: y[i, :] = softmax(x[i, :]·w). Each row of logits is
// accumulated in double (i-k-j order); the softmax subtracts the row maximum and is computed in
// double before the one rounding to float.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

extern "C" void kope_kernel(const float* x, const float* w, float* y, int64_t M, int64_t N,
                            int64_t K) {
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < M; ++i) {
    std::vector<double> z(static_cast<std::size_t>(N), 0.0);
    for (int64_t k = 0; k < K; ++k) {
      const double a = x[i * K + k];
      for (int64_t j = 0; j < N; ++j) z[j] += a * w[k * N + j];
    }
    const double m = *std::max_element(z.begin(), z.end());
    double sum = 0;
    for (double& v : z) {
      v = std::exp(v - m);
      sum += v;
    }
    for (int64_t j = 0; j < N; ++j) y[i * N + j] = static_cast<float>(z[j] / sum);
  }
}
