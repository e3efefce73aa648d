// Reference tile: y[i, j] = x[i % N, j % D] for i < TR*N, j < TC*D.
#include <cstdint>

extern "C" void kope_kernel(const float* x, float* y, int64_t N, int64_t D, int64_t TR, int64_t TC) {
  for (int64_t i = 0; i < TR * N; ++i) {
    for (int64_t j = 0; j < TC * D; ++j) y[i * TC * D + j] = x[(i % N) * D + j % D];
  }
}
