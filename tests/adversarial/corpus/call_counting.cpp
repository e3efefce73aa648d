// expect: rejected
// op: vadd
// time: yes
// message: gave wrong results
// Honest for the first calls (verification), idle afterwards (timing). Which check sees it
// first, a timed batch or the fresh-data check after timing, depends on the batch sizes the
// machine's load gives: both say it "gave wrong results".
#include <cstdint>

namespace {
long calls = 0;
}

extern "C" void kope_kernel(const float* x, const float* y, float* z, int64_t N) {
  if (++calls > 40) return;
  for (int64_t i = 0; i < N; ++i) z[i] = x[i] + y[i];
}
