// kope-library: cuda-naive
// Layer normalisation on the GPU by kope's own straightforward CUDA kernel (cuDNN 9's legacy API
// has no layer norm; its graph API's is not a plain call): one 256-thread block per row, FP32
// two-pass mean and biased variance with warp-shuffle block sums, no fast math.
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

__global__ void layernorm_rows(const float* x, const float* gamma, const float* beta, float* y, int64_t D, float eps) {
  const float* row = x + blockIdx.x * D;
  float* out = y + blockIdx.x * D;
  float s = 0.0f;
  for (int64_t d = threadIdx.x; d < D; d += blockDim.x) s += row[d];
  float mean = block_sum(s) / static_cast<float>(D);
  float q = 0.0f;
  for (int64_t d = threadIdx.x; d < D; d += blockDim.x) q += (row[d] - mean) * (row[d] - mean);
  float inv = 1.0f / sqrtf(block_sum(q) / static_cast<float>(D) + eps);
  for (int64_t d = threadIdx.x; d < D; d += blockDim.x) out[d] = (row[d] - mean) * inv * gamma[d] + beta[d];
}

extern "C" void kope_host_describe(char* out, size_t size) { kope_baseline::describe_naive(out, size, "block_per_row,two_pass,fp32"); }

extern "C" void kope_kernel(const float* x, const float* gamma, const float* beta, float* y, int64_t N, int64_t D, float eps) {
  if (N > 0) layernorm_rows<<<static_cast<unsigned>(N), 256>>>(x, gamma, beta, y, D, eps);
}
