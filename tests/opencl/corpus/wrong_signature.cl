// expect: compile_error
// op: vadd
// message: should have type long
// Adversarial: the dim is an int, not a long (the ABI is inputs, outputs, dims as long).
// kope: global=(N)
__kernel void kope_kernel(__global const float* x, __global const float* y, __global float* z, int N) {
  int i = get_global_id(0);
  if (i < N) z[i] = x[i] + y[i];
}
