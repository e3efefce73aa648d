// Reference: the lower triangle of C updated in place, dot products in double.
#include <cstdint>

extern "C" void kope_kernel(const float* A, float* C /* inout */, int64_t N, int64_t K, float alpha, float beta) {
  for (int64_t i = 0; i < N; ++i) {
    for (int64_t j = 0; j <= i; ++j) {
      double acc = 0;
      for (int64_t k = 0; k < K; ++k) acc += static_cast<double>(A[i * K + k]) * A[j * K + k];
      C[i * N + j] = static_cast<float>(alpha * acc + static_cast<double>(beta) * C[i * N + j]);
    }
  }
}
