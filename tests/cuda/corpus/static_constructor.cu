// build: rejected
// expect: rejected
// op: vadd
// message: static constructor
// Cheat: code that runs when the kernel is loaded, before the sandbox's filter.
#include <cstdlib>
__attribute__((constructor)) static void early() { std::getenv("HOME"); }
__global__ void vadd(const float* x, const float* y, float* z, int64_t n) {
  int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i < n) z[i] = x[i] + y[i];
}
extern "C" void kope_kernel(const float* x, const float* y, float* z, int64_t N) {
  if (N) vadd<<<static_cast<unsigned>((N + 255) / 256), 256>>>(x, y, z, N);
}
