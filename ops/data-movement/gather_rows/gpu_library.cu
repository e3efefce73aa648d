// kope-library: cuda-naive
// Row gather (embedding lookup) on the GPU by kope's own straightforward CUDA kernel: one
// 256-thread block per output row copies table[idx[n], :].
#include "kope_gpu_baseline.h"

__global__ void gather(const float* table, const int64_t* idx, float* y, int64_t D) {
  const float* src = table + idx[blockIdx.x] * D;
  float* dst = y + blockIdx.x * D;
  for (int64_t d = threadIdx.x; d < D; d += blockDim.x) dst[d] = src[d];
}

extern "C" void kope_host_describe(char* out, size_t size) { kope_baseline::describe_naive(out, size, "block_per_row,copy"); }

extern "C" void kope_kernel(const float* table, const int64_t* idx, float* y, int64_t V, int64_t D, int64_t N) {
  (void)V;
  if (N > 0) gather<<<static_cast<unsigned>(N), 256>>>(table, idx, y, D);
}
