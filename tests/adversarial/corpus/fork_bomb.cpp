// expect: rejected
// op: vadd
// expect-uninspected: rejected
// message: fork
#include <unistd.h>

#include <cstdint>

extern "C" void kope_kernel(const float* x, const float* y, float* z, int64_t N) {
  for (;;) fork();
}
