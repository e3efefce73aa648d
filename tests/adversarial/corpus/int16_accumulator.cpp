// expect: wrong_result
// op: dot_s8
// message: y[
// Sums int8 products in int16: overflows on long rows, and integer outputs are compared
// exactly.
#include <cstdint>

extern "C" void kope_kernel(const int8_t* A, const int8_t* x, int32_t* y, int16_t* pos, int64_t M, int64_t K) {
  for (int64_t i = 0; i < M; ++i) {
    int16_t acc = 0;
    int16_t n = 0;
    for (int64_t k = 0; k < K; ++k) {
      int32_t p = int32_t(A[i * K + k]) * int32_t(x[k]);
      acc = static_cast<int16_t>(acc + p);
      n = static_cast<int16_t>(n + (p > 0));
    }
    y[i] = acc;
    pos[i] = n;
  }
}
