// Reference gated (SwiGLU) feed-forward block: y = (silu(x·wg) ⊙ (x·wu))·wd. Each row is
// computed independently, everything in double (i-k-j order for all three products); the hidden
// activations are never rounded to float.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

extern "C" void kope_kernel(const float* x, const float* wg, const float* wu, const float* wd,
                            float* y, int64_t M, int64_t D, int64_t F) {
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < M; ++i) {
    std::vector<double> gate(static_cast<std::size_t>(F), 0.0), up(static_cast<std::size_t>(F), 0.0);
    for (int64_t d = 0; d < D; ++d) {
      const double a = x[i * D + d];
      for (int64_t f = 0; f < F; ++f) {
        gate[f] += a * wg[d * F + f];
        up[f] += a * wu[d * F + f];
      }
    }
    std::vector<double> out(static_cast<std::size_t>(D), 0.0);
    for (int64_t f = 0; f < F; ++f) {
      const double h = gate[f] / (1.0 + std::exp(-gate[f])) * up[f];
      for (int64_t d = 0; d < D; ++d) out[d] += h * wd[f * D + d];
    }
    for (int64_t d = 0; d < D; ++d) y[i * D + d] = static_cast<float>(out[d]);
  }
}
