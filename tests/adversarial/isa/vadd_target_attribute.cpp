// A helper with `__attribute__((target("avx512f")))` lifts this vadd above the x86-64-v3 it is
// compiled for: it compiles under `--isa x86-64-v3`, and only its compiled code shows the zmm
// instructions (eval_cli_test.cpp: it must be a compile error naming AVX-512 and the level).
#include <immintrin.h>

#include <cstdint>

__attribute__((target("avx512f"))) static void add16(const float* x, const float* y, float* z, int64_t blocks) {
  for (int64_t b = 0; b < blocks; ++b) {
    _mm512_storeu_ps(z + 16 * b, _mm512_add_ps(_mm512_loadu_ps(x + 16 * b), _mm512_loadu_ps(y + 16 * b)));
  }
}

extern "C" void kope_kernel(const float* x, const float* y, float* z, int64_t N) {
  const int64_t blocks = N / 16;
  add16(x, y, z, blocks);
  for (int64_t i = blocks * 16; i < N; ++i) z[i] = x[i] + y[i];
}
