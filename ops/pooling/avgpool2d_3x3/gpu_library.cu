// kope-library: cudnn
// 3×3 average pooling, stride 1, padding 1, padding excluded from the count, on the GPU through
// cuDNN cudnnPoolingForward (CUDNN_POOLING_AVERAGE_COUNT_EXCLUDE_PADDING).
#include "kope_gpu_baseline.h"

extern "C" void kope_host_describe(char* out, size_t size) { kope_baseline::describe_cudnn(out, size, "pooling_avg_exclude_pad,fp32"); }

extern "C" void kope_kernel(const float* x, float* y, int64_t N, int64_t C, int64_t H, int64_t W) {
  static kope_baseline::Pool pool;
  pool.prepare(CUDNN_POOLING_AVERAGE_COUNT_EXCLUDE_PADDING, N, C, H, W, 3, 3, 1, 1, 1);
  pool.run(x, y);
}
