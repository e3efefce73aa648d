// expect: correct
// op: softmax
// Honest OpenCL softmax (ops/normalization/softmax): one work-group of 64 per row, local-memory
// reductions for the max and the sum.
// kope: global=(64, N)
// kope: local=(64, 1)
__kernel void kope_kernel(__global const float* x, __global float* y, long N, long D) {
  __local float scratch[64];
  long row = get_global_id(1);
  int lid = get_local_id(0);
  __global const float* xr = x + row * D;
  __global float* yr = y + row * D;
  float m = -INFINITY;
  for (long d = lid; d < D; d += 64) m = fmax(m, xr[d]);
  scratch[lid] = m;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int s = 32; s > 0; s >>= 1) {
    if (lid < s) scratch[lid] = fmax(scratch[lid], scratch[lid + s]);
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  m = scratch[0];
  barrier(CLK_LOCAL_MEM_FENCE);
  float sum = 0.0f;
  for (long d = lid; d < D; d += 64) sum += exp(xr[d] - m);
  scratch[lid] = sum;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int s = 32; s > 0; s >>= 1) {
    if (lid < s) scratch[lid] += scratch[lid + s];
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  float inv = 1.0f / scratch[0];
  for (long d = lid; d < D; d += 64) yr[d] = exp(xr[d] - m) * inv;
}
