// kope-library: openblas
// Triangular solve through OpenBLAS cblas_strsv (row-major, lower, no transpose, non-unit
// diagonal), in place on x after copying b into it.
#include <cblas.h>

#include <cstdint>
#include <cstring>

extern "C" void kope_kernel(const float* L, const float* b, float* x, int64_t N) {
  std::memcpy(x, b, static_cast<size_t>(N) * sizeof(float));
  cblas_strsv(CblasRowMajor, CblasLower, CblasNoTrans, CblasNonUnit, static_cast<blasint>(N), L, static_cast<blasint>(N), x, 1);
}
