// kope-library: cublas
// The transpose of a row-major M×N matrix on the GPU through cuBLAS cublasSgeam (y = 1·x^T +
// 0·y): row-major x is the column-major N×M matrix, and y, row-major N×M, is the column-major
// M×N matrix x^T. With beta = 0 cuBLAS does not read y.
#include "kope_gpu_baseline.h"

extern "C" void kope_host_describe(char* out, size_t size) { kope_baseline::describe_cublas(out, size, "sgeam_t,fp32"); }

extern "C" void kope_kernel(const float* x, float* y, int64_t M, int64_t N) {
  const float one = 1.0f, zero = 0.0f;
  kope_baseline::check_cublas(cublasSgeam(kope_baseline::cublas(), CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(M), static_cast<int>(N), &one, x,
                                          static_cast<int>(N), &zero, y, static_cast<int>(M), y, static_cast<int>(M)),
                              "cublasSgeam");
}
