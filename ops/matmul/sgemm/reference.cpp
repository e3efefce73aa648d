// Reference SGEMM: C = A·B (row-major). Each row of C is accumulated in double, i-k-j order.
#include <cstdint>
#include <vector>

extern "C" void kope_kernel(const float* A, const float* B, float* C, int64_t M, int64_t N,
                            int64_t K) {
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < M; ++i) {
    std::vector<double> acc(N, 0.0);
    for (int64_t k = 0; k < K; ++k) {
      const double a = A[i * K + k];
      const float* b = B + k * N;
      for (int64_t j = 0; j < N; ++j) acc[j] += a * b[j];
    }
    for (int64_t j = 0; j < N; ++j) C[i * N + j] = static_cast<float>(acc[j]);
  }
}
