// Reference 2-D transpose: y[n, m] = x[m, n].
#include <cstdint>

extern "C" void kope_kernel(const float* x, float* y, int64_t M, int64_t N) {
  for (int64_t m = 0; m < M; ++m) {
    for (int64_t n = 0; n < N; ++n) y[n * M + m] = x[m * N + n];
  }
}
