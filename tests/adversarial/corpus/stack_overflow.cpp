// expect: runtime_error
// op: vadd
// message: SIGSEGV
#include <cstdint>

namespace {
int64_t deep(volatile int64_t n) {
  volatile char pad[4096];
  pad[0] = static_cast<char>(n);
  return deep(n + 1) + pad[0];
}
}  // namespace

extern "C" void kope_kernel(const float* x, const float* y, float* z, int64_t N) { z[0] = static_cast<float>(deep(N)); }
