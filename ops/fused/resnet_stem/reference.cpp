// Reference ResNet stem: 7x7 stride-2 convolution (zero padding 3) + inference batch norm + ReLU,
// then 3x3 stride-2 max pooling (padding 1). The input is copied into a zero-padded buffer; each
// convolution output plane is accumulated in double and normalised and rectified in double; the
// pooling takes the maximum of the in-bounds elements of each window and rounds once to float.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

extern "C" void kope_kernel(const float* x, const float* wt, const float* bn_g, const float* bn_b,
                            const float* bn_mean, const float* bn_var, float* y, int64_t N,
                            int64_t C, int64_t H, int64_t W, int64_t CO, float eps) {
  const int64_t HP = H + 6, WP = W + 6;                      // padded input
  const int64_t HT = (H - 1) / 2 + 1, WT = (W - 1) / 2 + 1;  // convolution output
  const int64_t HY = (HT - 1) / 2 + 1, WY = (WT - 1) / 2 + 1;  // pooled output
  std::vector<float> xp(static_cast<std::size_t>(N * C * HP * WP), 0.0f);
  for (int64_t nc = 0; nc < N * C; ++nc) {
    for (int64_t h = 0; h < H; ++h) {
      for (int64_t w = 0; w < W; ++w) xp[(nc * HP + h + 3) * WP + w + 3] = x[(nc * H + h) * W + w];
    }
  }
#pragma omp parallel for schedule(dynamic)
  for (int64_t no = 0; no < N * CO; ++no) {
    const int64_t n = no / CO, o = no % CO;
    std::vector<double> t(static_cast<std::size_t>(HT * WT), 0.0);
    for (int64_t c = 0; c < C; ++c) {
      const float* plane = xp.data() + (n * C + c) * HP * WP;
      for (int64_t r = 0; r < 7; ++r) {
        for (int64_t s = 0; s < 7; ++s) {
          const double wv = wt[((o * C + c) * 7 + r) * 7 + s];
          for (int64_t h = 0; h < HT; ++h) {
            const float* row = plane + (2 * h + r) * WP + s;
            for (int64_t w = 0; w < WT; ++w) t[h * WT + w] += wv * row[2 * w];
          }
        }
      }
    }
    const double inv = 1.0 / std::sqrt(static_cast<double>(bn_var[o]) + static_cast<double>(eps));
    for (double& v : t) v = std::max((v - bn_mean[o]) * inv * bn_g[o] + bn_b[o], 0.0);
    for (int64_t h = 0; h < HY; ++h) {
      for (int64_t w = 0; w < WY; ++w) {
        double m = -INFINITY;
        for (int64_t i = std::max<int64_t>(0, 2 * h - 1); i <= std::min(HT - 1, 2 * h + 1); ++i) {
          for (int64_t j = std::max<int64_t>(0, 2 * w - 1); j <= std::min(WT - 1, 2 * w + 1); ++j)
            m = std::max(m, t[i * WT + j]);
        }
        y[(no * HY + h) * WY + w] = static_cast<float>(m);
      }
    }
  }
}
