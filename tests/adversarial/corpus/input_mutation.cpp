// expect: rejected
// op: vadd
// message: input x
// Uses an input as scratch space. Inputs are mapped read-only in the runner.
#include <cstdint>

extern "C" void kope_kernel(const float* x, const float* y, float* z, int64_t N) {
  float* scratch = const_cast<float*>(x);
  for (int64_t i = 0; i < N; ++i) scratch[i] += y[i];
  for (int64_t i = 0; i < N; ++i) z[i] = scratch[i];
}
