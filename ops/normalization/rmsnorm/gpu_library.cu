// kope-library: cuda-naive
// RMS normalisation on the GPU by kope's own straightforward CUDA kernel (no vendor library has
// it as a plain call): one 256-thread block per row, FP32 sum of squares with warp-shuffle block
// sums, no fast math.
#include "kope_gpu_baseline.h"

// The sum of every thread's `v` in a block of 256 threads, returned to all of them.
__device__ float block_sum(float v) {
  __shared__ float partial[8];
  __shared__ float total;
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  if ((threadIdx.x & 31) == 0) partial[threadIdx.x >> 5] = v;
  __syncthreads();
  if (threadIdx.x == 0) {
    float s = 0.0f;
    for (int i = 0; i < 8; ++i) s += partial[i];
    total = s;
  }
  __syncthreads();
  float r = total;
  __syncthreads();  // partial and total are reused by the next call
  return r;
}

__global__ void rmsnorm_rows(const float* x, const float* weight, float* y, int64_t D, float eps) {
  const float* row = x + blockIdx.x * D;
  float* out = y + blockIdx.x * D;
  float q = 0.0f;
  for (int64_t d = threadIdx.x; d < D; d += blockDim.x) q += row[d] * row[d];
  float inv = 1.0f / sqrtf(block_sum(q) / static_cast<float>(D) + eps);
  for (int64_t d = threadIdx.x; d < D; d += blockDim.x) out[d] = row[d] * inv * weight[d];
}

extern "C" void kope_host_describe(char* out, size_t size) { kope_baseline::describe_naive(out, size, "block_per_row,fp32"); }

extern "C" void kope_kernel(const float* x, const float* weight, float* y, int64_t N, int64_t D, float eps) {
  if (N > 0) rmsnorm_rows<<<static_cast<unsigned>(N), 256>>>(x, weight, y, D, eps);
}
