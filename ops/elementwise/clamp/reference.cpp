// Reference clamp: y = min(max(x, lo), hi).
#include <cstdint>

extern "C" void kope_kernel(const float* x, float* y, int64_t N, int64_t D, float lo, float hi) {
  for (int64_t i = 0; i < N * D; ++i) {
    float v = x[i] < lo ? lo : x[i];
    y[i] = v > hi ? hi : v;
  }
}
