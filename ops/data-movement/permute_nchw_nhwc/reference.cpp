// Reference NCHW -> NHWC permutation: y[n, h, w, c] = x[n, c, h, w].
#include <cstdint>

extern "C" void kope_kernel(const float* x, float* y, int64_t N, int64_t C, int64_t H, int64_t W) {
  for (int64_t n = 0; n < N; ++n) {
    for (int64_t c = 0; c < C; ++c) {
      for (int64_t h = 0; h < H; ++h) {
        for (int64_t w = 0; w < W; ++w) y[((n * H + h) * W + w) * C + c] = x[((n * C + c) * H + h) * W + w];
      }
    }
  }
}
