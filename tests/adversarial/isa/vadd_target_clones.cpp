// `__attribute__((target_clones("avx512f", "default")))` compiles an AVX-512 clone of the
// helper beside the level's own and picks one when the kernel is loaded: the AVX-512 clone is
// above x86-64-v3 even if an AVX2 machine would never pick it (eval_cli_test.cpp).
#include <cstdint>

__attribute__((target_clones("avx512f", "default"))) void add_all(const float* x, const float* y, float* z, int64_t n) {
  for (int64_t i = 0; i < n; ++i) z[i] = x[i] + y[i];
}

extern "C" void kope_kernel(const float* x, const float* y, float* z, int64_t N) { add_all(x, y, z, N); }
