// Reference row argmax: the first index of the row maximum.
#include <cstdint>

extern "C" void kope_kernel(const float* x, int64_t* y, int64_t N, int64_t D) {
  for (int64_t n = 0; n < N; ++n) {
    int64_t best = 0;
    for (int64_t d = 1; d < D; ++d) {
      if (x[n * D + d] > x[n * D + best]) best = d;
    }
    y[n] = best;
  }
}
