// Reference: z = x + y, recomputed 32 times through a volatile, so that an ordinary kernel is
// far faster than it (the floor test needs a baseline slower than the candidate).
#include <cstdint>

extern "C" void kope_kernel(const float* x, const float* y, float* z, int64_t N) {
  for (int rep = 0; rep < 32; ++rep) {
    for (int64_t i = 0; i < N; ++i) {
      volatile float v = x[i] + y[i];
      z[i] = v;
    }
  }
}
