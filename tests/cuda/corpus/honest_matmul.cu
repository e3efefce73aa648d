// build: ok
// expect: correct
// op: matmul_small
// Honest CUDA matmul (tests/ops/matmul/matmul_small): 16x16 shared-memory tiles.
#define T 16
__global__ void mm(const float* A, const float* B, float* C, int64_t M, int64_t N, int64_t K) {
  __shared__ float As[T][T], Bs[T][T];
  int64_t row = blockIdx.y * T + threadIdx.y, col = blockIdx.x * T + threadIdx.x;
  float acc = 0.f;
  for (int64_t k0 = 0; k0 < K; k0 += T) {
    As[threadIdx.y][threadIdx.x] = (row < M && k0 + threadIdx.x < K) ? A[row * K + k0 + threadIdx.x] : 0.f;
    Bs[threadIdx.y][threadIdx.x] = (col < N && k0 + threadIdx.y < K) ? B[(k0 + threadIdx.y) * N + col] : 0.f;
    __syncthreads();
    for (int k = 0; k < T; ++k) acc += As[threadIdx.y][k] * Bs[k][threadIdx.x];
    __syncthreads();
  }
  if (row < M && col < N) C[row * N + col] = acc;
}

extern "C" void kope_kernel(const float* A, const float* B, float* C, int64_t M, int64_t N, int64_t K) {
  if (M == 0 || N == 0) return;
  dim3 block(T, T), grid(static_cast<unsigned>((N + T - 1) / T), static_cast<unsigned>((M + T - 1) / T));
  mm<<<grid, block>>>(A, B, C, M, N, K);
}
