// expect: runtime_error
// op: vadd
// message: past the end of output z
// Writes one element past the end: caught by the canary in the slack before the guard page.
#include <cstdint>

extern "C" void kope_kernel(const float* x, const float* y, float* z, int64_t N) {
  for (int64_t i = 0; i < N; ++i) z[i] = x[i] + y[i];
  z[N] = 0;
}
