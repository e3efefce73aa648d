// kope-library: cublas
// DGEMM on the GPU through cuBLAS cublasDgemm (FP64): the row-major C = A·B is the column-major
// C^T = B^T·A^T, so B goes first.
#include "kope_gpu_baseline.h"

extern "C" void kope_host_describe(char* out, size_t size) { kope_baseline::describe_cublas(out, size, "dgemm,fp64"); }

extern "C" void kope_kernel(const double* A, const double* B, double* C, int64_t M, int64_t N, int64_t K) {
  const double one = 1.0, zero = 0.0;
  kope_baseline::check_cublas(cublasDgemm(kope_baseline::cublas(), CUBLAS_OP_N, CUBLAS_OP_N, static_cast<int>(N), static_cast<int>(M),
                                          static_cast<int>(K), &one, B, static_cast<int>(N), A, static_cast<int>(K), &zero, C,
                                          static_cast<int>(N)),
                              "cublasDgemm");
}
