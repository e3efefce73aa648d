// build: ok
// expect: timeout
// op: vadd
// Never finishes on the device.
__global__ void spin(float* z) {
  volatile int k = 0;
  while (k >= 0) k = (k + 1) & 0xffff;
  z[0] = 0;
}
extern "C" void kope_kernel(const float* x, const float* y, float* z, int64_t N) {
  (void)x; (void)y; (void)N;
  spin<<<1, 1>>>(z);
}
