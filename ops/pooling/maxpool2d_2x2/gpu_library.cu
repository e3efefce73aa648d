// kope-library: cudnn
// 2×2 max pooling, stride 2, no padding (floor mode) on the GPU through cuDNN cudnnPoolingForward.
#include "kope_gpu_baseline.h"

extern "C" void kope_host_describe(char* out, size_t size) { kope_baseline::describe_cudnn(out, size, "pooling_max,fp32"); }

extern "C" void kope_kernel(const float* x, float* y, int64_t N, int64_t C, int64_t H, int64_t W) {
  static kope_baseline::Pool pool;
  pool.prepare(CUDNN_POOLING_MAX, N, C, H, W, 2, 2, 0, 2, 2);
  pool.run(x, y);
}
