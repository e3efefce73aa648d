// kope-library: cudnn
// Depthwise 3×3 convolution, stride 1, padding 1, with bias, on the GPU through cuDNN: a grouped
// cudnnConvolutionForward with C groups (FP32, CUDNN_FMA_MATH) and cudnnAddTensor for the bias;
// the C×3×3 weight is the C×1×3×3 filter.
#include "kope_gpu_baseline.h"

extern "C" void kope_host_describe(char* out, size_t size) {
  kope_baseline::describe_cudnn(out, size, "grouped_conv_fwd+add_bias,fp32,fma_math");
}

extern "C" void kope_kernel(const float* x, const float* wt, const float* b, float* y, int64_t N, int64_t C, int64_t H, int64_t W) {
  static kope_baseline::Conv conv;
  conv.prepare(N, C, H, W, C, 3, 1, 1, C);
  conv.run(x, wt, b, y);
}
