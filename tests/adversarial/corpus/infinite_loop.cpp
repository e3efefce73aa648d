// expect: timeout
// op: vadd
#include <cstdint>

extern "C" void kope_kernel(const float* x, const float* y, float* z, int64_t N) {
  volatile uint64_t spin = 0;
  for (;;) spin = spin + 1;
}
