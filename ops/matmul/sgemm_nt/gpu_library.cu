// kope-library: cublas
// C = A·B^T on the GPU through cuBLAS cublasSgemm in FP32 (CUBLAS_DEFAULT_MATH, TF32 off): in
// column-major terms C^T = B·A^T, with row-major B (N×K) read transposed.
#include "kope_gpu_baseline.h"

extern "C" void kope_host_describe(char* out, size_t size) { kope_baseline::describe_cublas(out, size, "sgemm_tn,fp32,tf32=off"); }

extern "C" void kope_kernel(const float* A, const float* B, float* C, int64_t M, int64_t N, int64_t K) {
  const float one = 1.0f, zero = 0.0f;
  kope_baseline::check_cublas(cublasSgemm(kope_baseline::cublas(), CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(N), static_cast<int>(M),
                                          static_cast<int>(K), &one, B, static_cast<int>(K), A, static_cast<int>(K), &zero, C,
                                          static_cast<int>(N)),
                              "cublasSgemm");
}
