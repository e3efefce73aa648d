// expect: timeout
// op: vadd
// Adversarial: never returns.
// kope: global=(N)
__kernel void kope_kernel(__global const float* x, __global const float* y, __global float* z, long N) {
  long i = get_global_id(0);
  volatile long k = 0;
  while (k >= 0) k = (k + 1) & 0xffff;
  if (i < N) z[i] = x[i] + y[i];
}
