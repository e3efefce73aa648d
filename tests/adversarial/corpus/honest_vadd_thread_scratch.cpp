// expect: correct
// op: vadd
// time: yes
// Every OpenMP thread allocates its own scratch blocks (below malloc's mmap threshold, so they
// come from the thread's own arena) and frees them at the end: glibc then trims the thread's heap
// and, the first time, reads /proc/sys/vm/overcommit_memory. An honest pattern, not an open.
#include <omp.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>

extern "C" void kope_kernel(const float* x, const float* y, float* z, int64_t N) {
#pragma omp parallel
  {
    constexpr int k_blocks = 16;
    constexpr size_t k_block = 96 * 1024;
    char* scratch[k_blocks];
    for (int b = 0; b < k_blocks; ++b) {
      scratch[b] = static_cast<char*>(std::malloc(k_block));
      if (scratch[b] != nullptr) std::memset(scratch[b], 0, k_block);
    }
#pragma omp for schedule(static)
    for (int64_t i = 0; i < N; ++i) z[i] = x[i] + y[i];
    for (int b = k_blocks - 1; b >= 0; --b) std::free(scratch[b]);
  }
}
