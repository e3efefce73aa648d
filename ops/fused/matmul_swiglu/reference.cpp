// Reference SwiGLU projection: y = silu(x·wg) * (x·wu). Both rows of products are accumulated in
// double (i-k-j order) and combined in double before the one rounding to float.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

extern "C" void kope_kernel(const float* x, const float* wg, const float* wu, float* y, int64_t M,
                            int64_t N, int64_t K) {
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < M; ++i) {
    std::vector<double> g(static_cast<std::size_t>(N), 0.0), u(static_cast<std::size_t>(N), 0.0);
    for (int64_t k = 0; k < K; ++k) {
      const double a = x[i * K + k];
      for (int64_t j = 0; j < N; ++j) {
        g[j] += a * wg[k * N + j];
        u[j] += a * wu[k * N + j];
      }
    }
    for (int64_t j = 0; j < N; ++j) {
      const double silu = g[j] / (1.0 + std::exp(-g[j]));
      y[i * N + j] = static_cast<float>(silu * u[j]);
    }
  }
}
