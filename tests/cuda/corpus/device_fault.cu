// build: ok
// expect: runtime_error
// op: vadd
// message: illegal memory access
// A device fault: writes far outside its buffer. The worker dies; the evaluator does not.
__global__ void bad(const float* x, const float* y, float* z, int64_t n) {
  int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i < n) z[i + (int64_t{1} << 36)] = x[i] + y[i];
}
extern "C" void kope_kernel(const float* x, const float* y, float* z, int64_t N) {
  if (N) bad<<<static_cast<unsigned>((N + 255) / 256), 256>>>(x, y, z, N);
}
