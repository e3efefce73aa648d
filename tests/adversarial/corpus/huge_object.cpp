// expect: compile_error
// op: vadd
// message: file-size limit
// A 512 MiB initialised array: the object would exceed the build's file-size limit.
#include <cstdint>

static char big[512 << 20] = {1};

extern "C" void kope_kernel(const float* x, const float* y, float* z, int64_t N) {
  for (int64_t i = 0; i < N; ++i) z[i] = x[i] + y[i] + static_cast<float>(big[i & 1023]);
}
