// expect: correct
// op: syrk_inout
// time: yes
// An inout arrives holding its initial contents on every call, checked or timed: the kernel
// reads beta * C from it and leaves the strict upper triangle alone. fp32 accumulation, within
// the per-output tolerance that grows with K.
#include <cstdint>

extern "C" void kope_kernel(const float* A, float* C, int64_t N, int64_t K, float alpha, float beta) {
  for (int64_t i = 0; i < N; ++i) {
    for (int64_t j = 0; j <= i; ++j) {
      float acc = 0;
      for (int64_t k = 0; k < K; ++k) acc += A[i * K + k] * A[j * K + k];
      C[i * N + j] = alpha * acc + beta * C[i * N + j];
    }
  }
}
