// kope-library: cudnn
// Batch normalisation in inference mode on the GPU through cuDNN
// cudnnBatchNormalizationForwardInference (CUDNN_BATCHNORM_SPATIAL: per-channel mean, var,
// gamma, beta over an NCHW tensor), FP32.
#include "kope_gpu_baseline.h"

extern "C" void kope_host_describe(char* out, size_t size) { kope_baseline::describe_cudnn(out, size, "batchnorm_inference_spatial,fp32"); }

extern "C" void kope_kernel(const float* x, const float* mean, const float* var, const float* gamma, const float* beta, float* y,
                            int64_t N, int64_t C, int64_t H, int64_t W, float eps) {
  static cudnnTensorDescriptor_t t = nullptr, per_channel = nullptr;
  static int64_t key[4] = {-1, -1, -1, -1};
  if (key[0] != N || key[1] != C || key[2] != H || key[3] != W) {
    t = kope_baseline::tensor_nchw(t, N, C, H, W);
    per_channel = kope_baseline::tensor_nchw(per_channel, 1, C, 1, 1);
    key[0] = N;
    key[1] = C;
    key[2] = H;
    key[3] = W;
  }
  const float one = 1.0f, zero = 0.0f;
  kope_baseline::check_cudnn(cudnnBatchNormalizationForwardInference(kope_baseline::cudnn(), CUDNN_BATCHNORM_SPATIAL, &one, &zero, t, x, t,
                                                                     y, per_channel, gamma, beta, mean, var, static_cast<double>(eps)),
                             "cudnnBatchNormalizationForwardInference");
}
