// expect: compile_error
// op: vadd
// message: conflicting declaration
// Parameters that do not match the op: the evaluator's declaration of kope_kernel is
// force-included, so this fails to compile instead of running with the wrong arguments.
#include <cstdint>

extern "C" void kope_kernel(const float* x, float* z, int64_t N) {
  for (int64_t i = 0; i < N; ++i) z[i] = x[i];
}
