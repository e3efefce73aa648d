// Reference 2x2 / stride 2 max pooling, NCHW, floor mode.
#include <cstdint>

extern "C" void kope_kernel(const float* x, float* y, int64_t N, int64_t C, int64_t H, int64_t W) {
  const int64_t HO = H / 2, WO = W / 2;
#pragma omp parallel for schedule(static)
  for (int64_t nc = 0; nc < N * C; ++nc) {
    const float* plane = x + nc * H * W;
    for (int64_t p = 0; p < HO; ++p) {
      for (int64_t q = 0; q < WO; ++q) {
        float m = plane[(2 * p) * W + 2 * q];
        for (int64_t i = 0; i < 2; ++i) {
          for (int64_t j = 0; j < 2; ++j) {
            const float v = plane[(2 * p + i) * W + 2 * q + j];
            if (v > m) m = v;
          }
        }
        y[(nc * HO + p) * WO + q] = m;
      }
    }
  }
}
