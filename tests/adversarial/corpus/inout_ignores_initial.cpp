// expect: wrong_result
// op: syrk_inout
// message: C[
// Treats the inout as a plain output (beta * C dropped): wrong wherever C's initial contents
// matter.
#include <cstdint>

extern "C" void kope_kernel(const float* A, float* C, int64_t N, int64_t K, float alpha, float beta) {
  (void)beta;
  for (int64_t i = 0; i < N; ++i) {
    for (int64_t j = 0; j <= i; ++j) {
      float acc = 0;
      for (int64_t k = 0; k < K; ++k) acc += A[i * K + k] * A[j * K + k];
      C[i * N + j] = alpha * acc;
    }
  }
}
