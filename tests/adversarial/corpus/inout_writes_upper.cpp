// expect: wrong_result
// op: syrk_inout
// Updates the whole of C: the strict upper triangle had to keep its initial contents.
#include <cstdint>

extern "C" void kope_kernel(const float* A, float* C, int64_t N, int64_t K, float alpha, float beta) {
  for (int64_t i = 0; i < N; ++i) {
    for (int64_t j = 0; j < N; ++j) {
      float acc = 0;
      for (int64_t k = 0; k < K; ++k) acc += A[i * K + k] * A[j * K + k];
      C[i * N + j] = alpha * acc + beta * C[i * N + j];
    }
  }
}
