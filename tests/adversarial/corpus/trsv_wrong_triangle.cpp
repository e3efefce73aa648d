// expect: wrong_result
// op: trsv_small
// Solves with the lower triangle, which triangular(upper) filled with zeros: x = b / diag.
#include <cstdint>

extern "C" void kope_kernel(const double* U, const double* b, double* x, int64_t N) {
  for (int64_t i = 0; i < N; ++i) {
    double acc = b[i];
    for (int64_t j = 0; j < i; ++j) acc -= U[i * N + j] * x[j];
    x[i] = acc / U[i * N + i];
  }
}
