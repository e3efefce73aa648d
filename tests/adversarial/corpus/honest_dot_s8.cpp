// expect: correct
// op: dot_s8
// time: yes
// int8 products widened to int32 before the sum: exact, so exactly equal to the reference.
#include <cstdint>

extern "C" void kope_kernel(const int8_t* A, const int8_t* x, int32_t* y, int16_t* pos, int64_t M, int64_t K) {
#pragma omp parallel for
  for (int64_t i = 0; i < M; ++i) {
    int32_t acc = 0;
    int32_t n = 0;
#pragma omp simd reduction(+ : acc, n)
    for (int64_t k = 0; k < K; ++k) {
      int32_t p = int32_t(A[i * K + k]) * int32_t(x[k]);
      acc += p;
      n += p > 0;
    }
    y[i] = acc;
    pos[i] = static_cast<int16_t>(n);
  }
}
