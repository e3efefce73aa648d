// build: rejected
// expect: rejected
// op: vadd
// message: launches no __global__ kernel
// Cheat: no device code at all; the host function touches the (device) pointers directly.
extern "C" void kope_kernel(const float* x, const float* y, float* z, int64_t N) {
  for (int64_t i = 0; i < N; ++i) z[i] = x[i] + y[i];
}
