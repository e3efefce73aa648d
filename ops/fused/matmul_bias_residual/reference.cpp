// Reference linear layer with residual add: y = x·w + b + r. Each row of x·w is accumulated in
// double (i-k-j order); bias and residual are added in double before the one rounding to float.
#include <cstddef>
#include <cstdint>
#include <vector>

extern "C" void kope_kernel(const float* x, const float* w, const float* b, const float* r,
                            float* y, int64_t M, int64_t N, int64_t K) {
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < M; ++i) {
    std::vector<double> acc(static_cast<std::size_t>(N), 0.0);
    for (int64_t k = 0; k < K; ++k) {
      const double a = x[i * K + k];
      for (int64_t j = 0; j < N; ++j) acc[j] += a * w[k * N + j];
    }
    for (int64_t j = 0; j < N; ++j) {
      y[i * N + j] = static_cast<float>(acc[j] + b[j] + static_cast<double>(r[i * N + j]));
    }
  }
}
