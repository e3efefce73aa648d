// expect: compile_error
// op: vadd
// message: No such file
// Pulls a host file into the compiler's diagnostics. The compile sandbox has no /etc/passwd.
#include "/etc/passwd"
#include <cstdint>

extern "C" void kope_kernel(const float* x, const float* y, float* z, int64_t N) {}
