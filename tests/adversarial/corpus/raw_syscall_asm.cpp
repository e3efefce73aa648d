// expect: rejected
// op: vadd
// expect-uninspected: rejected
// message: raw system call
// openat(AT_FDCWD, "/etc/passwd", O_RDONLY) without libc.
#include <cstdint>

extern "C" void kope_kernel(const float* x, const float* y, float* z, int64_t N) {
  long ret;
  const char* path = "/etc/passwd";
  register long r10 asm("r10") = 0;
  asm volatile("syscall" : "=a"(ret) : "a"(257), "D"(-100), "S"(path), "d"(0), "r"(r10) : "rcx", "r11", "memory");
  for (int64_t i = 0; i < N; ++i) z[i] = x[i] + y[i] + static_cast<float>(ret & 0);
}
