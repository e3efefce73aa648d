// kope-library: cudnn
// Pointwise (1×1) convolution without bias on the GPU through cuDNN cudnnConvolutionForward
// (FP32, CUDNN_FMA_MATH: no TF32); the CO×C weight is the CO×C×1×1 filter.
#include "kope_gpu_baseline.h"

extern "C" void kope_host_describe(char* out, size_t size) { kope_baseline::describe_cudnn(out, size, "conv_fwd,fp32,fma_math"); }

extern "C" void kope_kernel(const float* x, const float* wt, float* y, int64_t N, int64_t C, int64_t H, int64_t W, int64_t CO) {
  static kope_baseline::Conv conv;
  conv.prepare(N, C, H, W, CO, 1, 0, 1, 1);
  conv.run(x, wt, nullptr, y);
}
