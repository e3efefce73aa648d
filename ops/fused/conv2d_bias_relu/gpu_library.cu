// kope-library: cudnn
// 3×3 convolution, stride 1, padding 1, with bias, then ReLU, on the GPU through cuDNN:
// cudnnConvolutionForward (FP32, CUDNN_FMA_MATH: no TF32), cudnnAddTensor for the bias and
// cudnnActivationForward (RELU) in place.
#include "kope_gpu_baseline.h"

extern "C" void kope_host_describe(char* out, size_t size) {
  kope_baseline::describe_cudnn(out, size, "conv_fwd+add_bias+activation_relu,fp32,fma_math");
}

extern "C" void kope_kernel(const float* x, const float* wt, const float* b, float* y, int64_t N, int64_t C, int64_t H, int64_t W,
                            int64_t CO) {
  static kope_baseline::Conv conv;
  static cudnnActivationDescriptor_t relu = [] {
    cudnnActivationDescriptor_t d = nullptr;
    kope_baseline::check_cudnn(cudnnCreateActivationDescriptor(&d), "cudnnCreateActivationDescriptor");
    kope_baseline::check_cudnn(cudnnSetActivationDescriptor(d, CUDNN_ACTIVATION_RELU, CUDNN_NOT_PROPAGATE_NAN, 0.0),
                               "cudnnSetActivationDescriptor");
    return d;
  }();
  conv.prepare(N, C, H, W, CO, 3, 1, 1, 1);
  conv.run(x, wt, b, y);
  const float one = 1.0f, zero = 0.0f;
  kope_baseline::check_cudnn(cudnnActivationForward(kope_baseline::cudnn(), relu, &one, conv.y, y, &zero, conv.y, y), "cudnnActivationForward");
}
