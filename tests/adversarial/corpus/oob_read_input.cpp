// expect: runtime_error
// op: vadd
// message: read past the end of input x
#include <cstdint>

extern "C" void kope_kernel(const float* x, const float* y, float* z, int64_t N) {
  volatile const float* far = x + N + 2048;
  z[0] = *far;
}
