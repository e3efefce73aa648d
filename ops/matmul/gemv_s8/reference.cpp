// Reference int8 GEMV: each dot product accumulated in int32 (exact: |y| <= 16384 * K < 2^31).
#include <cstdint>

extern "C" void kope_kernel(const int8_t* A, const int8_t* x, int32_t* y, int64_t M, int64_t K) {
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < M; ++i) {
    const int8_t* a = A + i * K;
    int32_t acc = 0;
    for (int64_t k = 0; k < K; ++k) acc += static_cast<int32_t>(a[k]) * static_cast<int32_t>(x[k]);
    y[i] = acc;
  }
}
