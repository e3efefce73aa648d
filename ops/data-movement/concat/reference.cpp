// Reference concatenation along axis 1: y[n, :A] = a[n, :], y[n, A:] = b[n, :].
#include <cstdint>

extern "C" void kope_kernel(const float* a, const float* b, float* y, int64_t N, int64_t A, int64_t B) {
  for (int64_t n = 0; n < N; ++n) {
    for (int64_t i = 0; i < A; ++i) y[n * (A + B) + i] = a[n * A + i];
    for (int64_t i = 0; i < B; ++i) y[n * (A + B) + A + i] = b[n * B + i];
  }
}
