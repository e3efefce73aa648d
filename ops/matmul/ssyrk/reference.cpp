// Reference SYRK, lower triangle in place: C[i, j] = alpha * sum_k A[i, k] * A[j, k] + beta * C[i, j]
// for j <= i, each dot product accumulated in double; C[i, j] for j > i is not touched.
#include <cstdint>

extern "C" void kope_kernel(const float* A, float* C /* inout */, int64_t N, int64_t K, float alpha, float beta) {
#pragma omp parallel for schedule(dynamic, 16)
  for (int64_t i = 0; i < N; ++i) {
    const float* a = A + i * K;
    for (int64_t j = 0; j <= i; ++j) {
      const float* b = A + j * K;
      double acc = 0;
      for (int64_t k = 0; k < K; ++k) acc += static_cast<double>(a[k]) * b[k];
      C[i * N + j] = static_cast<float>(alpha * acc + static_cast<double>(beta) * C[i * N + j]);
    }
  }
}
