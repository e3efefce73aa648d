// expect: correct
// op: vadd
// time: yes
// OpenMP across cores, AVX2 intrinsics inside, a scalar tail.
#include <immintrin.h>
#include <omp.h>

#include <cstdint>

extern "C" void kope_kernel(const float* x, const float* y, float* z, int64_t N) {
  const int64_t blocks = N / 8;
#pragma omp parallel for schedule(static) if (N > 65536)
  for (int64_t b = 0; b < blocks; ++b) {
    __m256 a = _mm256_loadu_ps(x + 8 * b);
    __m256 c = _mm256_loadu_ps(y + 8 * b);
    _mm256_storeu_ps(z + 8 * b, _mm256_add_ps(a, c));
  }
  for (int64_t i = blocks * 8; i < N; ++i) z[i] = x[i] + y[i];
}
