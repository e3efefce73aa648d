// kope-library: openblas
// SGEMM with B transposed through OpenBLAS cblas_sgemm (row-major, B as N x K, alpha 1, beta 0).
#include <cblas.h>

#include <cstdint>

extern "C" void kope_kernel(const float* A, const float* B, float* C, int64_t M, int64_t N,
                            int64_t K) {
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<blasint>(M),
              static_cast<blasint>(N), static_cast<blasint>(K), 1.0f, A, static_cast<blasint>(K), B,
              static_cast<blasint>(K), 0.0f, C, static_cast<blasint>(N));
}
