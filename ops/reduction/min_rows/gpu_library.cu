// kope-library: cuda-naive
// The row minimum on the GPU by kope's own straightforward CUDA kernel (no vendor library has it as one
// call): one 256-thread block per row, FP32, warp-shuffle block reduction, no fast math.
#include "kope_gpu_baseline.h"

__device__ float block_reduce(float v) {
  __shared__ float partial[8];
  __shared__ float total;
  for (int o = 16; o > 0; o >>= 1) v = fminf(v, __shfl_xor_sync(0xffffffffu, v, o));
  if ((threadIdx.x & 31) == 0) partial[threadIdx.x >> 5] = v;
  __syncthreads();
  if (threadIdx.x == 0) {
    float s = partial[0];
    for (int i = 1; i < 8; ++i) s = fminf(s, partial[i]);
    total = s;
  }
  __syncthreads();
  return total;
}

__global__ void reduce_rows(const float* x, float* y, int64_t D) {
  const float* row = x + blockIdx.x * D;
  float acc = INFINITY;
  for (int64_t d = threadIdx.x; d < D; d += blockDim.x) {
    float v = row[d];
    acc = fminf(acc, v);
  }
  float r = block_reduce(acc);
  if (threadIdx.x == 0) y[blockIdx.x] = r;
}

extern "C" void kope_host_describe(char* out, size_t size) { kope_baseline::describe_naive(out, size, "block_per_row,min,fp32"); }

extern "C" void kope_kernel(const float* x, float* y, int64_t N, int64_t D) {
  if (N > 0) reduce_rows<<<static_cast<unsigned>(N), 256>>>(x, y, D);
}
