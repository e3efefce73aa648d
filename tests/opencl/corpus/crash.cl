// expect: runtime_error
// op: vadd
// message: SIGSEGV
// Adversarial: dereferences a wild pointer.
// kope: global=(N)
__kernel void kope_kernel(__global const float* x, __global const float* y, __global float* z, long N) {
  long i = get_global_id(0);
  __global float* wild = (__global float*)(0x10 + i);
  if (i < N) z[i] = x[i] + y[i] + *wild;
}
