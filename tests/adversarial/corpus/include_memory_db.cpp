// expect: compile_error
// op: vadd
// message: No such file
#include "@SECRET_PATH@"
#include <cstdint>

extern "C" void kope_kernel(const float* x, const float* y, float* z, int64_t N) {}
