// expect: rejected
// op: vadd
// message: raw system call
// Adversarial: a raw system call (getpid) through inline assembly; the disassembly of the
// compiled work-group function shows it and the inspection rejects the kernel.
// kope: global=(N)
__kernel void kope_kernel(__global const float* x, __global const float* y, __global float* z, long N) {
  long i = get_global_id(0);
  long r = 39;
  if (i == 0) __asm__ volatile("syscall" : "+a"(r) : : "rcx", "r11", "memory");
  if (i < N) z[i] = x[i] + y[i] + (r == 0 ? 1.0f : 0.0f);
}
