// kope-library: openblas
// DGEMM through OpenBLAS cblas_dgemm (row-major, no transposes, alpha = 1, beta = 0).
#include <cblas.h>

#include <cstdint>

extern "C" void kope_kernel(const double* A, const double* B, double* C, int64_t M, int64_t N,
                            int64_t K) {
  cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<blasint>(M),
              static_cast<blasint>(N), static_cast<blasint>(K), 1.0, A, static_cast<blasint>(K), B,
              static_cast<blasint>(N), 0.0, C, static_cast<blasint>(N));
}
