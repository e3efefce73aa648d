// expect: rejected
// op: vadd
// time: yes
// message: results may not depend on earlier calls
// Honest for the first calls (verification), idle afterwards (timing).
#include <cstdint>

namespace {
long calls = 0;
}

extern "C" void kope_kernel(const float* x, const float* y, float* z, int64_t N) {
  if (++calls > 40) return;
  for (int64_t i = 0; i < N; ++i) z[i] = x[i] + y[i];
}
