// An AVX-512 vadd: correct on an AVX-512 CPU, but above x86-64-v3 (eval_cli_test.cpp: under
// `--isa x86-64-v3` it must not compile, and the error must name AVX-512).
#include <immintrin.h>

#include <cstdint>

extern "C" void kope_kernel(const float* x, const float* y, float* z, int64_t N) {
  const int64_t blocks = N / 16;
  for (int64_t b = 0; b < blocks; ++b) {
    __m512 a = _mm512_loadu_ps(x + 16 * b);
    __m512 c = _mm512_loadu_ps(y + 16 * b);
    _mm512_storeu_ps(z + 16 * b, _mm512_add_ps(a, c));
  }
  for (int64_t i = blocks * 16; i < N; ++i) z[i] = x[i] + y[i];
}
