// kope-library: cublas
// SGEMM on the GPU through cuBLAS cublasSgemm in FP32 (CUBLAS_DEFAULT_MATH, TF32 off): the
// row-major product C = A·B is the column-major C^T = B^T·A^T, so B goes first.
#include "kope_gpu_baseline.h"

extern "C" void kope_host_describe(char* out, size_t size) { kope_baseline::describe_cublas(out, size, "sgemm,fp32,tf32=off"); }

extern "C" void kope_kernel(const float* A, const float* B, float* C, int64_t M, int64_t N, int64_t K) {
  const float one = 1.0f, zero = 0.0f;
  kope_baseline::check_cublas(cublasSgemm(kope_baseline::cublas(), CUBLAS_OP_N, CUBLAS_OP_N, static_cast<int>(N), static_cast<int>(M),
                                          static_cast<int>(K), &one, B, static_cast<int>(N), A, static_cast<int>(K), &zero, C,
                                          static_cast<int>(N)),
                              "cublasSgemm");
}
