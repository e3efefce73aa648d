// expect: compile_error
// op: vadd
// message: Cannot find symbol unlink
// Adversarial: declares and calls libc's unlink() and system(): the compiled work-group function
// imports them, and the inspection rejects it before it is ever loaded.
int unlink(__constant char* path);
int system(__constant char* cmd);
// kope: global=(N)
__kernel void kope_kernel(__global const float* x, __global const float* y, __global float* z, long N) {
  long i = get_global_id(0);
  if (i == 0) { unlink("/tmp/x"); system("touch /tmp/pwned"); }
  if (i < N) z[i] = x[i] + y[i];
}
