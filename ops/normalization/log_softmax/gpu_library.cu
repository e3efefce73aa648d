// kope-library: cudnn
// Row-wise log-softmax on the GPU through cuDNN cudnnSoftmaxForward (CUDNN_SOFTMAX_LOG), FP32.
#include "kope_gpu_baseline.h"

extern "C" void kope_host_describe(char* out, size_t size) { kope_baseline::describe_cudnn(out, size, "softmax_log,instance,fp32"); }

extern "C" void kope_kernel(const float* x, float* y, int64_t N, int64_t D) {
  kope_baseline::softmax_rows(CUDNN_SOFTMAX_LOG, x, y, N, D);
}
