// expect: resource_limit
// op: vadd
// message: flooded its stdout
#include <cstdint>
#include <cstdio>

extern "C" void kope_kernel(const float* x, const float* y, float* z, int64_t N) {
  for (;;) std::fputs("0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef\n", stdout);
}
