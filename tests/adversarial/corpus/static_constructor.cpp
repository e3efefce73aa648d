// expect: rejected
// op: vadd
// message: static constructor
// Code that would run when the kernel is loaded, before any rule applies.
#include <cstdint>
#include <cstdio>

__attribute__((constructor)) static void at_load() { std::puts("running before the harness is ready"); }

extern "C" void kope_kernel(const float* x, const float* y, float* z, int64_t N) {
  for (int64_t i = 0; i < N; ++i) z[i] = x[i] + y[i];
}
