// expect: wrong_result
// op: scale_cases
// message: alpha=-0.5
// Assumes the attrs of the one case it was tuned for (alpha = 2, k = 0): wrong on the cases that
// set other values, which the mismatch names by their label.
#include <cstdint>

extern "C" void kope_kernel(const float* x, float* y, int64_t N, float alpha, int16_t k) {
  (void)alpha;
  (void)k;
  for (int64_t i = 0; i < N; ++i) y[i] = 2.0f * x[i];
}
