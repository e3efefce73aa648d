// Refinement: blocked over K (256) and N (512) so the B panel stays in L2, 4 rows of C at a time.
#include <algorithm>
#include <cstdint>
#include <cstring>
extern "C" void kope_kernel(const float* A, const float* B, float* C, int64_t M, int64_t N, int64_t K) {
  constexpr int64_t KB = 256, NB = 512, MB = 4;
#pragma omp parallel for schedule(static)
  for (int64_t i0 = 0; i0 < M; i0 += MB) {
    int64_t i1 = std::min(M, i0 + MB);
    for (int64_t i = i0; i < i1; ++i) std::memset(C + i * N, 0, static_cast<size_t>(N) * sizeof(float));
    for (int64_t j0 = 0; j0 < N; j0 += NB) {
      int64_t j1 = std::min(N, j0 + NB);
      for (int64_t k0 = 0; k0 < K; k0 += KB) {
        int64_t k1 = std::min(K, k0 + KB);
        for (int64_t i = i0; i < i1; ++i) {
          float* c = C + i * N;
          for (int64_t k = k0; k < k1; ++k) {
            const float a = A[i * K + k];
            const float* b = B + k * N;
#pragma omp simd
            for (int64_t j = j0; j < j1; ++j) c[j] += a * b[j];
          }
        }
      }
    }
  }
}
