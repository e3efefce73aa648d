// expect: rejected
// op: vadd
// expect-uninspected: rejected
// Generates code at run time (executable memory).
#include <sys/mman.h>

#include <cstdint>
#include <cstring>

extern "C" void kope_kernel(const float* x, const float* y, float* z, int64_t N) {
  void* p = mmap(nullptr, 4096, PROT_READ | PROT_WRITE | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p != MAP_FAILED) {
    unsigned char ret = 0xc3;
    std::memcpy(p, &ret, 1);
    reinterpret_cast<void (*)()>(p)();
  }
  for (int64_t i = 0; i < N; ++i) z[i] = x[i] + y[i];
}
