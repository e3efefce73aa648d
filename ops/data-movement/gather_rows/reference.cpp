// Reference row gather (embedding lookup): y[n, :] = table[idx[n], :].
#include <cstdint>

extern "C" void kope_kernel(const float* table, const int64_t* idx, float* y, int64_t V, int64_t D, int64_t N) {
  (void)V;
  for (int64_t n = 0; n < N; ++n) {
    for (int64_t d = 0; d < D; ++d) y[n * D + d] = table[idx[n] * D + d];
  }
}
