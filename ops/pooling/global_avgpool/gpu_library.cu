// kope-library: cudnn
// Global average pooling on the GPU through cuDNN cudnnPoolingForward: one H×W window, stride
// H×W, no padding, so the N×C×1×1 output is the N×C matrix.
#include "kope_gpu_baseline.h"

extern "C" void kope_host_describe(char* out, size_t size) { kope_baseline::describe_cudnn(out, size, "pooling_avg_global,fp32"); }

extern "C" void kope_kernel(const float* x, float* y, int64_t N, int64_t C, int64_t H, int64_t W) {
  static kope_baseline::Pool pool;
  pool.prepare(CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING, N, C, H, W, static_cast<int>(H), static_cast<int>(W), 0, static_cast<int>(H),
               static_cast<int>(W));
  pool.run(x, y);
}
