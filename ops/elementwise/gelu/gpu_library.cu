// kope-library: cuda-naive
// The exact (erf) GELU on the GPU by kope's own straightforward CUDA kernel (no vendor library has this
// op as a call of its own): one thread per element in a grid-stride loop, FP32, no fast math.
#include "kope_gpu_baseline.h"

__global__ void gelu_kernel(const float* x, float* y, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    float v = x[i];
    y[i] = 0.5f * v * (1.0f + erff(v * 0.70710678118654752f));
  }
}

extern "C" void kope_host_describe(char* out, size_t size) { kope_baseline::describe_naive(out, size, "elementwise,grid_stride,fp32"); }

extern "C" void kope_kernel(const float* x, float* y, int64_t N, int64_t D) {
  gelu_kernel<<<kope_baseline::blocks_for(N * D), 256>>>(x, y, N * D);
}
