// expect: rejected
// op: vadd
// message: static constructor
// expect-uninspected: rejected
// message-uninspected: forbidden system call
// Code that would run when the kernel is loaded, before the first call: with the inspection
// off, the loading-time seccomp filter still stops it from starting a process.
#include <unistd.h>

#include <cstdint>
#include <cstdio>

__attribute__((constructor)) static void at_load() {
  std::puts("running before the harness is ready");
  if (fork() == 0) _exit(0);
}

extern "C" void kope_kernel(const float* x, const float* y, float* z, int64_t N) {
  for (int64_t i = 0; i < N; ++i) z[i] = x[i] + y[i];
}
