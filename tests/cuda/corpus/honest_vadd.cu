// build: ok
// expect: correct
// op: vadd
// Honest CUDA vadd (tests/ops/elementwise/vadd): z = x + y, one thread per element.
__global__ void vadd(const float* x, const float* y, float* z, int64_t n) {
  int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i < n) z[i] = x[i] + y[i];
}

extern "C" void kope_kernel(const float* x, const float* y, float* z, int64_t N) {
  if (N == 0) return;
  vadd<<<static_cast<unsigned>((N + 255) / 256), 256>>>(x, y, z, N);
}
