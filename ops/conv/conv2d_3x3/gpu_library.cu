// kope-library: cudnn
// 3×3 convolution, stride 1, padding 1, with bias, on the GPU through cuDNN
// cudnnConvolutionForward (FP32, CUDNN_FMA_MATH: no TF32) and cudnnAddTensor for the bias.
#include "kope_gpu_baseline.h"

extern "C" void kope_host_describe(char* out, size_t size) { kope_baseline::describe_cudnn(out, size, "conv_fwd+add_bias,fp32,fma_math"); }

extern "C" void kope_kernel(const float* x, const float* wt, const float* b, float* y, int64_t N, int64_t C, int64_t H, int64_t W,
                            int64_t CO) {
  static kope_baseline::Conv conv;
  conv.prepare(N, C, H, W, CO, 3, 1, 1, 1);
  conv.run(x, wt, b, y);
}
