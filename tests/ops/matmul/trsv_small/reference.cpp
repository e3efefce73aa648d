// Reference back substitution: x[i] = (b[i] - sum_{j>i} U[i, j] x[j]) / U[i, i].
#include <cstdint>

extern "C" void kope_kernel(const double* U, const double* b, double* x, int64_t N) {
  for (int64_t i = N - 1; i >= 0; --i) {
    double acc = b[i];
    for (int64_t j = i + 1; j < N; ++j) acc -= U[i * N + j] * x[j];
    x[i] = acc / U[i * N + i];
  }
}
