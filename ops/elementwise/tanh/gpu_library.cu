// kope-library: cuda-naive
// tanh on the GPU by kope's own straightforward CUDA kernel (no vendor library has this
// op as a call of its own): one thread per element in a grid-stride loop, FP32, no fast math.
#include "kope_gpu_baseline.h"

__global__ void tanh_kernel(const float* x, float* y, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    y[i] = tanhf(x[i]);
  }
}

extern "C" void kope_host_describe(char* out, size_t size) { kope_baseline::describe_naive(out, size, "elementwise,grid_stride,fp32"); }

extern "C" void kope_kernel(const float* x, float* y, int64_t N, int64_t D) {
  tanh_kernel<<<kope_baseline::blocks_for(N * D), 256>>>(x, y, N * D);
}
