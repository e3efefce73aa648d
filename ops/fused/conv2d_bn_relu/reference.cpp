// Reference 3x3 convolution + inference batch norm + ReLU, NCHW, stride 1, zero padding 1. The
// input is first copied into a zero-padded buffer; each output plane (n, o) is accumulated in
// double, then normalised with the running statistics and rectified in double before the one
// rounding to float (the batch norm is applied, not folded into the weights).
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

extern "C" void kope_kernel(const float* x, const float* wt, const float* bn_g, const float* bn_b,
                            const float* bn_mean, const float* bn_var, float* y, int64_t N,
                            int64_t C, int64_t H, int64_t W, int64_t CO, float eps) {
  const int64_t HP = H + 2, WP = W + 2;  // padded input size
  std::vector<float> xp(static_cast<std::size_t>(N * C * HP * WP), 0.0f);
  for (int64_t nc = 0; nc < N * C; ++nc) {
    for (int64_t h = 0; h < H; ++h) {
      for (int64_t w = 0; w < W; ++w) xp[(nc * HP + h + 1) * WP + w + 1] = x[(nc * H + h) * W + w];
    }
  }
#pragma omp parallel for schedule(dynamic)
  for (int64_t no = 0; no < N * CO; ++no) {
    const int64_t n = no / CO, o = no % CO;
    std::vector<double> acc(static_cast<std::size_t>(H * W), 0.0);
    for (int64_t c = 0; c < C; ++c) {
      const float* plane = xp.data() + (n * C + c) * HP * WP;
      for (int64_t r = 0; r < 3; ++r) {
        for (int64_t s = 0; s < 3; ++s) {
          const double wv = wt[((o * C + c) * 3 + r) * 3 + s];
          for (int64_t h = 0; h < H; ++h) {
            const float* row = plane + (h + r) * WP + s;
            for (int64_t w = 0; w < W; ++w) acc[h * W + w] += wv * row[w];
          }
        }
      }
    }
    const double inv = 1.0 / std::sqrt(static_cast<double>(bn_var[o]) + static_cast<double>(eps));
    float* yp = y + no * H * W;
    for (int64_t i = 0; i < H * W; ++i) {
      const double z = (acc[i] - bn_mean[o]) * inv * bn_g[o] + bn_b[o];
      yp[i] = static_cast<float>(z > 0 ? z : 0.0);
    }
  }
}
