// expect: resource_limit
// op: vadd
// Adversarial: floods stdout through OpenCL printf.
// kope: global=(N)
__kernel void kope_kernel(__global const float* x, __global const float* y, __global float* z, long N) {
  long i = get_global_id(0);
  for (int k = 0; k < 100000; ++k) printf("flooding the evaluator's pipe with text, line %d of work-item %ld\n", k, i);
  if (i < N) z[i] = x[i] + y[i];
}
