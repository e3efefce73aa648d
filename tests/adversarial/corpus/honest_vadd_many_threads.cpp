// expect: correct
// op: vadd
// Asks OpenMP for far more threads than the machine has (and nesting): the thread limit the
// runner sets keeps this inside the pre-created pool, so no thread is ever created.
#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <vector>

extern "C" void kope_kernel(const float* x, const float* y, float* z, int64_t N) {
  omp_set_max_active_levels(4);
  std::vector<float> scratch(static_cast<size_t>(N));
  const int64_t block = 4096;
#pragma omp parallel for num_threads(64)
  for (int64_t b = 0; b < N; b += block) {
#pragma omp parallel for num_threads(8)
    for (int64_t i = b; i < std::min(N, b + block); ++i) scratch[static_cast<size_t>(i)] = x[i] + y[i];
  }
  for (int64_t i = 0; i < N; ++i) z[i] = scratch[static_cast<size_t>(i)];
  if (N == 3) std::printf("debug output is allowed and ignored: %f\n", z[0]);
}
