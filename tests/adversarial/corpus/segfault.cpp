// expect: runtime_error
// op: vadd
// message: SIGSEGV
#include <cstdint>

extern "C" void kope_kernel(const float* x, const float* y, float* z, int64_t N) {
  volatile float* null = nullptr;
  *null = x[0];
}
