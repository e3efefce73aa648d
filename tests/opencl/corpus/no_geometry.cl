// expect: compile_error
// op: vadd
// message: no launch geometry
// Adversarial: no launch geometry header.
__kernel void kope_kernel(__global const float* x, __global const float* y, __global float* z, long N) {
  long i = get_global_id(0);
  if (i < N) z[i] = x[i] + y[i];
}
