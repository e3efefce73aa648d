// build: compile_error
// expect: compile_error
// op: vadd
// message: does not compile
// Does not compile: undeclared identifier.
__global__ void vadd(const float* x, const float* y, float* z, int64_t n) {
  int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i < n) z[i] = x[i] + yy[i];
}
extern "C" void kope_kernel(const float* x, const float* y, float* z, int64_t N) {
  vadd<<<static_cast<unsigned>((N + 255) / 256), 256>>>(x, y, z, N);
}
