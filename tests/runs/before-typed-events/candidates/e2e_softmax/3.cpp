// OPTIMISATION: same algorithm, loops reordered
#include <cmath>
#include <cstdint>

extern "C" void kope_kernel(const float* x, float* y, int64_t N, int64_t D) {
#pragma omp parallel for schedule(static) if (N * D > 65536)
  for (int64_t n = 0; n < N; ++n) {
    const float* row = x + n * D;
    float* out = y + n * D;
    float m = row[0];
    for (int64_t d = 1; d < D; ++d) m = std::fmax(m, row[d]);
    double sum = 0;
    for (int64_t d = 0; d < D; ++d) {
      out[d] = std::exp(row[d] - m);
      sum += out[d];
    }
    float inv = static_cast<float>(1.0 / sum);
    for (int64_t d = 0; d < D; ++d) out[d] *= inv;
  }
}
