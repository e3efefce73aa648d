// build: ok
// expect: wrong_result
// op: vadd
// Cheat: computes only on every 64th call and otherwise launches an empty kernel, hoping
// the outputs survive between calls (they do not: the harness poisons them on the device).
static int g_calls = 0;
__global__ void vadd(const float* x, const float* y, float* z, int64_t n) {
  int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i < n) z[i] = x[i] + y[i];
}
__global__ void nothing() {}
extern "C" void kope_kernel(const float* x, const float* y, float* z, int64_t N) {
  if (N == 0) return;
  if (g_calls++ % 64 == 0) vadd<<<static_cast<unsigned>((N + 255) / 256), 256>>>(x, y, z, N);
  else nothing<<<1, 1>>>();
}
