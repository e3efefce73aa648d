// kope-library: openblas
// Row L2 norms through OpenBLAS cblas_snrm2, one call per row, the rows split over the threads
// (OpenMP; snrm2 itself runs on one). oneDNN's reduction_norm_lp_sum was the baseline before:
// oneDNN 2.7 has only its reference implementation for the norm reductions (ref:any, about
// 0.5 GB/s, 50x slower than snrm2 here), a baseline no one would choose.
#include <cblas.h>

#include <cstdint>

extern "C" void kope_kernel(const float* x, float* y, int64_t N, int64_t D) {
#pragma omp parallel for schedule(static) if (N * D >= (int64_t{1} << 16))
  for (int64_t i = 0; i < N; ++i) y[i] = cblas_snrm2(static_cast<blasint>(D), x + i * D, 1);
}
