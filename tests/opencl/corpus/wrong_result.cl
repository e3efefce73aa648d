// expect: wrong_result
// op: vadd
// message: z[0]: got
// Adversarial: computes x - y instead of x + y.
// kope: global=(N)
__kernel void kope_kernel(__global const float* x, __global const float* y, __global float* z, long N) {
  long i = get_global_id(0);
  if (i < N) z[i] = x[i] - y[i];
}
