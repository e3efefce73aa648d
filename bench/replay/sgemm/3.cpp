// Refinement: the same kernel with a dynamic schedule in chunks of 8 rows.
#include <cstdint>
#include <cstring>
extern "C" void kope_kernel(const float* A, const float* B, float* C, int64_t M, int64_t N, int64_t K) {
#pragma omp parallel for schedule(dynamic, 8)
  for (int64_t i = 0; i < M; ++i) {
    float* c = C + i * N;
    std::memset(c, 0, static_cast<size_t>(N) * sizeof(float));
    for (int64_t k = 0; k < K; ++k) {
      const float a = A[i * K + k];
      const float* b = B + k * N;
#pragma omp simd
      for (int64_t j = 0; j < N; ++j) c[j] += a * b[j];
    }
  }
}
