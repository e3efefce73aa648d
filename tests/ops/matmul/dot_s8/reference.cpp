// Reference: int32 dot products (exact), and how many products of each row are positive.
#include <cstdint>

extern "C" void kope_kernel(const int8_t* A, const int8_t* x, int32_t* y, int16_t* pos, int64_t M, int64_t K) {
  for (int64_t i = 0; i < M; ++i) {
    int32_t acc = 0;
    int16_t n = 0;
    for (int64_t k = 0; k < K; ++k) {
      int32_t p = static_cast<int32_t>(A[i * K + k]) * x[k];
      acc += p;
      n = static_cast<int16_t>(n + (p > 0));
    }
    y[i] = acc;
    pos[i] = n;
  }
}
