// Reference global average pooling, NCHW: each plane is summed in double and divided by H*W.
#include <cstdint>

extern "C" void kope_kernel(const float* x, float* y, int64_t N, int64_t C, int64_t H, int64_t W) {
  const int64_t P = H * W;
#pragma omp parallel for schedule(static)
  for (int64_t nc = 0; nc < N * C; ++nc) {
    const float* plane = x + nc * P;
    double sum = 0;
    for (int64_t p = 0; p < P; ++p) sum += plane[p];
    y[nc] = static_cast<float>(sum / static_cast<double>(P));
  }
}
