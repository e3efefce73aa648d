// build: rejected
// expect: rejected
// op: vadd
// message: interposition
// Cheat: defines cudaEventElapsedTime so the harness reads a tiny device time.
#include <cuda_runtime.h>
extern "C" cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t, cudaEvent_t) {
  *ms = 1e-6f;
  return cudaSuccess;
}
__global__ void vadd(const float* x, const float* y, float* z, int64_t n) {
  int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i < n) z[i] = x[i] + y[i];
}
extern "C" void kope_kernel(const float* x, const float* y, float* z, int64_t N) {
  if (N) vadd<<<static_cast<unsigned>((N + 255) / 256), 256>>>(x, y, z, N);
}
