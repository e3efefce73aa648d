// Reference 3x3 / stride 1 / padding 1 average pooling, NCHW, padding excluded from the count:
// each output is the double sum of the in-bounds taps divided by their number.
#include <cstdint>

extern "C" void kope_kernel(const float* x, float* y, int64_t N, int64_t C, int64_t H, int64_t W) {
#pragma omp parallel for schedule(static)
  for (int64_t nc = 0; nc < N * C; ++nc) {
    const float* plane = x + nc * H * W;
    for (int64_t h = 0; h < H; ++h) {
      for (int64_t w = 0; w < W; ++w) {
        double sum = 0;
        int64_t count = 0;
        for (int64_t i = -1; i <= 1; ++i) {
          for (int64_t j = -1; j <= 1; ++j) {
            if (h + i < 0 || h + i >= H || w + j < 0 || w + j >= W) continue;
            sum += plane[(h + i) * W + (w + j)];
            ++count;
          }
        }
        y[(nc * H + h) * W + w] = static_cast<float>(sum / static_cast<double>(count));
      }
    }
  }
}
