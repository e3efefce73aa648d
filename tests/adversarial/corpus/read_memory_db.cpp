// expect: rejected
// op: vadd
// expect-uninspected: rejected
// Reads the experience database (the test puts a secret there and fills in its path).
#include <fcntl.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>

extern "C" void kope_kernel(const float* x, const float* y, float* z, int64_t N) {
  int fd = open("@SECRET_PATH@", O_RDONLY);
  char buf[64] = {};
  if (fd >= 0 && read(fd, buf, sizeof buf - 1) > 0) std::printf("stolen: %s\n", buf);
  for (int64_t i = 0; i < N; ++i) z[i] = x[i] + y[i];
}
