// expect: compile_error
// op: vadd
// message: kernel.cl:8:28: use of undeclared identifier 'yy'
// Adversarial: does not compile (undeclared identifier).
// kope: global=(N)
__kernel void kope_kernel(__global const float* x, __global const float* y, __global float* z, long N) {
  long i = get_global_id(0);
  if (i < N) z[i] = x[i] + yy[i];
}
