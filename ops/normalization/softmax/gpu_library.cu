// kope-library: cudnn
// Row-wise softmax on the GPU through cuDNN cudnnSoftmaxForward (CUDNN_SOFTMAX_ACCURATE: the
// row maximum is subtracted), FP32.
#include "kope_gpu_baseline.h"

extern "C" void kope_host_describe(char* out, size_t size) { kope_baseline::describe_cudnn(out, size, "softmax_accurate,instance,fp32"); }

extern "C" void kope_kernel(const float* x, float* y, int64_t N, int64_t D) {
  kope_baseline::softmax_rows(CUDNN_SOFTMAX_ACCURATE, x, y, N, D);
}
