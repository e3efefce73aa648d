// expect: rejected
// op: vadd
// message: wrote to input x
// Adversarial: writes into its input x (inputs are read-only), casting the const away.
// kope: global=(N)
__kernel void kope_kernel(__global const float* x, __global const float* y, __global float* z, long N) {
  long i = get_global_id(0);
  if (i < N) {
    z[i] = x[i] + y[i];
    ((__global float*)x)[i] = 0.0f;
  }
}
