// expect: correct
// op: vadd
// time: yes
// Honest OpenCL vadd for tests/ops/elementwise/vadd: z = x + y.
// kope: global=(N)
// kope: local=(64)
__kernel void kope_kernel(__global const float* x, __global const float* y, __global float* z, long N) {
  long i = get_global_id(0);
  if (i < N) z[i] = x[i] + y[i];
}
