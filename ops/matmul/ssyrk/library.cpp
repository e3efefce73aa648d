// kope-library: openblas
// SYRK through OpenBLAS cblas_ssyrk (row-major, lower, no transpose): only the lower triangle
// of C is read and written, as the op says.
#include <cblas.h>

#include <cstdint>

extern "C" void kope_kernel(const float* A, float* C /* inout */, int64_t N, int64_t K, float alpha, float beta) {
  cblas_ssyrk(CblasRowMajor, CblasLower, CblasNoTrans, static_cast<blasint>(N), static_cast<blasint>(K), alpha, A,
              static_cast<blasint>(K), beta, C, static_cast<blasint>(N));
}
