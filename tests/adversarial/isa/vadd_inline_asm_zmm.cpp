// Inline asm adds 16 floats at a time in a zmm register: the assembler takes any instruction
// whatever -march says, so this compiles under `--isa x86-64-v3`, and only its compiled code
// shows the zmm instructions (eval_cli_test.cpp: it must be a compile error naming AVX-512).
#include <cstdint>

extern "C" void kope_kernel(const float* x, const float* y, float* z, int64_t N) {
  int64_t i = 0;
  for (; i + 16 <= N; i += 16) {
    asm volatile(
        "vmovups (%0), %%zmm0\n\t"
        "vaddps (%1), %%zmm0, %%zmm0\n\t"
        "vmovups %%zmm0, (%2)\n\t"
        "vzeroupper"
        :
        : "r"(x + i), "r"(y + i), "r"(z + i)
        : "xmm0", "memory");
  }
  for (; i < N; ++i) z[i] = x[i] + y[i];
}
