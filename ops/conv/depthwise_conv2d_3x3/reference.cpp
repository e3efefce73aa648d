// Reference depthwise 3x3 convolution, NCHW, stride 1, zero padding 1, with bias. Each output
// element is accumulated in double; taps that fall into the padding are skipped.
#include <cstdint>

extern "C" void kope_kernel(const float* x, const float* wt, const float* b, float* y, int64_t N,
                            int64_t C, int64_t H, int64_t W) {
#pragma omp parallel for schedule(static)
  for (int64_t nc = 0; nc < N * C; ++nc) {
    const int64_t c = nc % C;
    const float* plane = x + nc * H * W;
    const float* k = wt + c * 9;
    for (int64_t h = 0; h < H; ++h) {
      for (int64_t w = 0; w < W; ++w) {
        double acc = b[c];
        for (int64_t r = 0; r < 3; ++r) {
          for (int64_t s = 0; s < 3; ++s) {
            const int64_t ih = h + r - 1, iw = w + s - 1;
            if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
            acc += static_cast<double>(k[r * 3 + s]) * plane[ih * W + iw];
          }
        }
        y[(nc * H + h) * W + w] = static_cast<float>(acc);
      }
    }
  }
}
