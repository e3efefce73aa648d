// build: compile_error
// expect: compile_error
// op: vadd
// Breaks the ABI: the dim is an int (the force-included declaration says int64_t).
__global__ void vadd(const float* x, const float* y, float* z, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) z[i] = x[i] + y[i];
}
extern "C" void kope_kernel(const float* x, const float* y, float* z, int N) {
  vadd<<<(N + 255) / 256, 256>>>(x, y, z, N);
}
