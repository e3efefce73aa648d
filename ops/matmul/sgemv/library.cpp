// kope-library: openblas
// GEMV through OpenBLAS cblas_sgemv (row-major, no transpose, alpha = 1, beta = 0).
#include <cblas.h>

#include <cstdint>

extern "C" void kope_kernel(const float* A, const float* x, float* y, int64_t M, int64_t K) {
  cblas_sgemv(CblasRowMajor, CblasNoTrans, static_cast<blasint>(M), static_cast<blasint>(K), 1.0f,
              A, static_cast<blasint>(K), x, 1, 0.0f, y, 1);
}
