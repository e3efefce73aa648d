// expect: wrong_result
// op: vadd
// message: never written
#include <cstdint>

extern "C" void kope_kernel(const float* x, const float* y, float* z, int64_t N) {}
