// expect: correct
// op: scale_shift
// time: yes
// Honest OpenCL scale_shift (tests/ops/elementwise/scale_shift): f64 and i64 tensors and attrs.
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
// kope: global=(N)
// kope: local=(128)
__kernel void kope_kernel(__global const double* x, __global const long* k, __global double* y, __global long* m, long N,
                          double alpha, double beta, long shift) {
  long i = get_global_id(0);
  if (i < N) {
    y[i] = alpha * x[i] + beta;
    m[i] = k[i] * shift;
  }
}
