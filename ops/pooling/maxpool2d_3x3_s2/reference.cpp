// Reference 3x3 / stride 2 / padding 1 max pooling, NCHW: the maximum over the in-bounds part
// of each window (padding never wins).
#include <cstdint>
#include <limits>

extern "C" void kope_kernel(const float* x, float* y, int64_t N, int64_t C, int64_t H, int64_t W) {
  const int64_t HO = (H - 1) / 2 + 1, WO = (W - 1) / 2 + 1;
#pragma omp parallel for schedule(static)
  for (int64_t nc = 0; nc < N * C; ++nc) {
    const float* plane = x + nc * H * W;
    for (int64_t p = 0; p < HO; ++p) {
      for (int64_t q = 0; q < WO; ++q) {
        float m = -std::numeric_limits<float>::infinity();
        for (int64_t i = 0; i < 3; ++i) {
          for (int64_t j = 0; j < 3; ++j) {
            const int64_t h = 2 * p + i - 1, w = 2 * q + j - 1;
            if (h < 0 || h >= H || w < 0 || w >= W) continue;
            if (plane[h * W + w] > m) m = plane[h * W + w];
          }
        }
        y[(nc * HO + p) * WO + q] = m;
      }
    }
  }
}
