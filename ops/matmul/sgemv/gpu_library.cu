// kope-library: cublas
// y = A·x on the GPU through cuBLAS cublasSgemv in FP32: row-major A (M×K) is the column-major
// K×M matrix A^T, so the product is op = transpose.
#include "kope_gpu_baseline.h"

extern "C" void kope_host_describe(char* out, size_t size) { kope_baseline::describe_cublas(out, size, "sgemv_t,fp32"); }

extern "C" void kope_kernel(const float* A, const float* x, float* y, int64_t M, int64_t K) {
  const float one = 1.0f, zero = 0.0f;
  kope_baseline::check_cublas(cublasSgemv(kope_baseline::cublas(), CUBLAS_OP_T, static_cast<int>(K), static_cast<int>(M), &one, A,
                                          static_cast<int>(K), x, 1, &zero, y, 1),
                              "cublasSgemv");
}
