// kope-library: openblas
// C = A @ B through OpenBLAS's cblas_sgemm (row-major).
#include <cstdint>

#include <cblas.h>

extern "C" void kope_kernel(const float* A, const float* B, float* C, int64_t M, int64_t N, int64_t K) {
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(M), static_cast<int>(N), static_cast<int>(K), 1.0f,
              A, static_cast<int>(K), B, static_cast<int>(N), 0.0f, C, static_cast<int>(N));
}
