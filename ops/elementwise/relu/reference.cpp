// Reference ReLU: y = x > 0 ? x : 0.
#include <cstdint>

extern "C" void kope_kernel(const float* x, float* y, int64_t N, int64_t D) {
  for (int64_t i = 0; i < N * D; ++i) y[i] = x[i] > 0.0f ? x[i] : 0.0f;
}
