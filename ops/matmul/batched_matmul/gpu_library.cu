// kope-library: cublas
// Batched matmul on the GPU through cuBLAS cublasSgemmStridedBatched in FP32
// (CUBLAS_DEFAULT_MATH, TF32 off): each row-major c[b] = a[b]·b[b] is the column-major
// c[b]^T = b[b]^T·a[b]^T.
#include "kope_gpu_baseline.h"

extern "C" void kope_host_describe(char* out, size_t size) {
  kope_baseline::describe_cublas(out, size, "sgemm_strided_batched,fp32,tf32=off");
}

extern "C" void kope_kernel(const float* a, const float* b, float* c, int64_t BATCH, int64_t M, int64_t N, int64_t K) {
  const float one = 1.0f, zero = 0.0f;
  kope_baseline::check_cublas(cublasSgemmStridedBatched(kope_baseline::cublas(), CUBLAS_OP_N, CUBLAS_OP_N, static_cast<int>(N),
                                                        static_cast<int>(M), static_cast<int>(K), &one, b, static_cast<int>(N), K * N, a,
                                                        static_cast<int>(K), M * K, &zero, c, static_cast<int>(N), M * N,
                                                        static_cast<int>(BATCH)),
                              "cublasSgemmStridedBatched");
}
