// expect: runtime_error
// op: vadd
// message: past the end of output z
// Adversarial: no bounds check, and writes 64 KiB past the end of the output.
// kope: global=(N)
__kernel void kope_kernel(__global const float* x, __global const float* y, __global float* z, long N) {
  long i = get_global_id(0);
  z[i + 16384] = x[0];
  if (i < N) z[i] = x[i] + y[i];
}
