// Reference GEMV: y[i] = sum_k A[i, k] * x[k], each dot product accumulated in double.
#include <cstdint>

extern "C" void kope_kernel(const float* A, const float* x, float* y, int64_t M, int64_t K) {
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < M; ++i) {
    const float* a = A + i * K;
    double acc = 0;
    for (int64_t k = 0; k < K; ++k) acc += static_cast<double>(a[k]) * x[k];
    y[i] = static_cast<float>(acc);
  }
}
