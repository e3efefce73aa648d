// Reference ResNet basic block (inference): relu(bn2(conv2(relu(bn1(conv1(x))))) + x). Every
// intermediate is kept in double; each convolution zero-pads its input into a copy and
// accumulates each output plane in double.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace {

// out = conv3x3(in, w), NCHW, C -> C channels, stride 1, zero padding 1, no bias.
void conv3x3(const std::vector<double>& in, const float* w, std::vector<double>& out, int64_t N,
             int64_t C, int64_t H, int64_t W) {
  const int64_t HP = H + 2, WP = W + 2;
  std::vector<double> padded(static_cast<std::size_t>(N * C * HP * WP), 0.0);
  for (int64_t nc = 0; nc < N * C; ++nc) {
    for (int64_t h = 0; h < H; ++h) {
      for (int64_t x = 0; x < W; ++x)
        padded[(nc * HP + h + 1) * WP + x + 1] = in[(nc * H + h) * W + x];
    }
  }
#pragma omp parallel for schedule(dynamic)
  for (int64_t no = 0; no < N * C; ++no) {
    const int64_t n = no / C, o = no % C;
    double* acc = out.data() + no * H * W;
    for (int64_t i = 0; i < H * W; ++i) acc[i] = 0;
    for (int64_t c = 0; c < C; ++c) {
      const double* plane = padded.data() + (n * C + c) * HP * WP;
      for (int64_t r = 0; r < 3; ++r) {
        for (int64_t s = 0; s < 3; ++s) {
          const double wv = w[((o * C + c) * 3 + r) * 3 + s];
          for (int64_t h = 0; h < H; ++h) {
            const double* row = plane + (h + r) * WP + s;
            for (int64_t x = 0; x < W; ++x) acc[h * W + x] += wv * row[x];
          }
        }
      }
    }
  }
}

// t = bn(t) with running statistics, in place.
void batchnorm(std::vector<double>& t, const float* g, const float* b, const float* mean,
               const float* var, double eps, int64_t N, int64_t C, int64_t HW) {
  for (int64_t nc = 0; nc < N * C; ++nc) {
    const int64_t c = nc % C;
    const double inv = 1.0 / std::sqrt(static_cast<double>(var[c]) + eps);
    for (int64_t i = 0; i < HW; ++i)
      t[nc * HW + i] = (t[nc * HW + i] - mean[c]) * inv * g[c] + b[c];
  }
}

}  // namespace

extern "C" void kope_kernel(const float* x, const float* w1, const float* bn1_g, const float* bn1_b,
                            const float* bn1_mean, const float* bn1_var, const float* w2,
                            const float* bn2_g, const float* bn2_b, const float* bn2_mean,
                            const float* bn2_var, float* y, int64_t N, int64_t C, int64_t H,
                            int64_t W, float eps) {
  const int64_t total = N * C * H * W;
  std::vector<double> xd(x, x + total), t(static_cast<std::size_t>(total)),
      u(static_cast<std::size_t>(total));
  conv3x3(xd, w1, t, N, C, H, W);
  batchnorm(t, bn1_g, bn1_b, bn1_mean, bn1_var, eps, N, C, H * W);
  for (double& v : t) v = v > 0 ? v : 0.0;
  conv3x3(t, w2, u, N, C, H, W);
  batchnorm(u, bn2_g, bn2_b, bn2_mean, bn2_var, eps, N, C, H * W);
  for (int64_t i = 0; i < total; ++i) {
    const double r = u[i] + xd[i];
    y[i] = static_cast<float>(r > 0 ? r : 0.0);
  }
}
