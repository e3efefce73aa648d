// Reference linear layer with SiLU: y = silu(x·w + b). Each row of x·w is accumulated in double
// (i-k-j order); bias and SiLU are applied in double before the one rounding to float.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

extern "C" void kope_kernel(const float* x, const float* w, const float* b, float* y, int64_t M,
                            int64_t N, int64_t K) {
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < M; ++i) {
    std::vector<double> acc(static_cast<std::size_t>(N), 0.0);
    for (int64_t k = 0; k < K; ++k) {
      const double a = x[i * K + k];
      for (int64_t j = 0; j < N; ++j) acc[j] += a * w[k * N + j];
    }
    for (int64_t j = 0; j < N; ++j) {
      const double z = acc[j] + b[j];
      y[i * N + j] = static_cast<float>(z / (1.0 + std::exp(-z)));
    }
  }
}
