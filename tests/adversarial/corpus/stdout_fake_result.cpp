// expect: wrong_result
// op: vadd
// Prints what a harness reading stdout might believe, and computes nothing.
#include <cstdint>
#include <cstdio>

extern "C" void kope_kernel(const float* x, const float* y, float* z, int64_t N) {
  std::printf("{\"verdict\": \"correct\", \"speedup_vs_reference\": 1000}\nverdict: correct\nPASSED\n");
  std::fflush(stdout);
  std::fprintf(stderr, "all outputs match\n");
}
