// expect: correct
// op: matmul_small
// time: yes
// Honest OpenCL sgemm (ops/matmul/sgemm): C = A x B, 16x16 tiles in local memory.
// kope: global=(N, M)
// kope: local=(16, 16)
#define T 16
__kernel void kope_kernel(__global const float* A, __global const float* B, __global float* C, long M, long N, long K) {
  __local float As[T][T];
  __local float Bs[T][T];
  long col = get_global_id(0), row = get_global_id(1);
  int lx = get_local_id(0), ly = get_local_id(1);
  float acc = 0.0f;
  for (long k0 = 0; k0 < K; k0 += T) {
    As[ly][lx] = (row < M && k0 + lx < K) ? A[row * K + k0 + lx] : 0.0f;
    Bs[ly][lx] = (col < N && k0 + ly < K) ? B[(k0 + ly) * N + col] : 0.0f;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int k = 0; k < T; ++k) acc += As[ly][k] * Bs[k][lx];
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  if (row < M && col < N) C[row * N + col] = acc;
}
