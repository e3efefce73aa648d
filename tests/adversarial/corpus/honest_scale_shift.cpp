// expect: correct
// op: scale_shift
// time: yes
// Attributes arrive by value; integers must match exactly.
#include <cstdint>

extern "C" void kope_kernel(const double* x, const int64_t* k, double* y, int64_t* m, int64_t N, double alpha, double beta,
                            int64_t shift) {
#pragma omp simd
  for (int64_t i = 0; i < N; ++i) {
    y[i] = alpha * x[i] + beta;
    m[i] = k[i] * shift;
  }
}
