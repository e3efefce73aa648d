// kope-library: openblas
// SGEMM through OpenBLAS cblas_sgemm (row-major, no transposes, alpha = 1, beta = 0).
#include <cblas.h>

#include <cstdint>

extern "C" void kope_kernel(const float* A, const float* B, float* C, int64_t M, int64_t N,
                            int64_t K) {
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<blasint>(M),
              static_cast<blasint>(N), static_cast<blasint>(K), 1.0f, A, static_cast<blasint>(K), B,
              static_cast<blasint>(N), 0.0f, C, static_cast<blasint>(N));
}
