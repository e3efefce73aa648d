// Refinement: the same with a guided schedule.
#include <algorithm>
#include <cmath>
#include <cstdint>
extern "C" void kope_kernel(const float* x, float* y, int64_t N, int64_t D) {
#pragma omp parallel for schedule(guided)
  for (int64_t n = 0; n < N; ++n) {
    const float* r = x + n * D;
    float* o = y + n * D;
    float m = r[0];
    for (int64_t d = 1; d < D; ++d) m = std::max(m, r[d]);
    float s = 0;
    for (int64_t d = 0; d < D; ++d) {
      o[d] = std::exp(r[d] - m);
      s += o[d];
    }
    float inv = 1.0f / s;
    for (int64_t d = 0; d < D; ++d) o[d] *= inv;
  }
}
