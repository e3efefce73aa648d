// Reference 3x3 convolution, NCHW, stride 1, zero padding 1, with bias. The input is first
// copied into a zero-padded buffer; then each output plane (n, o) is accumulated in double.
#include <cstddef>
#include <cstdint>
#include <vector>

extern "C" void kope_kernel(const float* x, const float* wt, const float* b, float* y, int64_t N,
                            int64_t C, int64_t H, int64_t W, int64_t CO) {
  const int64_t R = 3, S = 3, pad = 1;
  const int64_t HP = H + 2 * pad, WP = W + 2 * pad;  // padded input size
  const int64_t HO = H, WO = W;                      // output size (stride 1)
  std::vector<float> xp(static_cast<std::size_t>(N * C * HP * WP), 0.0f);
  for (int64_t nc = 0; nc < N * C; ++nc) {
    for (int64_t h = 0; h < H; ++h) {
      for (int64_t w = 0; w < W; ++w)
        xp[(nc * HP + h + pad) * WP + w + pad] = x[(nc * H + h) * W + w];
    }
  }
#pragma omp parallel for schedule(dynamic)
  for (int64_t no = 0; no < N * CO; ++no) {
    const int64_t n = no / CO, o = no % CO;
    std::vector<double> acc(static_cast<std::size_t>(HO * WO), static_cast<double>(b[o]));
    for (int64_t c = 0; c < C; ++c) {
      const float* plane = xp.data() + (n * C + c) * HP * WP;
      for (int64_t r = 0; r < R; ++r) {
        for (int64_t s = 0; s < S; ++s) {
          const double wv = wt[((o * C + c) * R + r) * S + s];
          for (int64_t oh = 0; oh < HO; ++oh) {
            const float* row = plane + (oh + r) * WP + s;
            double* out = acc.data() + oh * WO;
            for (int64_t ow = 0; ow < WO; ++ow) out[ow] += wv * row[ow];
          }
        }
      }
    }
    float* yp = y + (n * CO + o) * HO * WO;
    for (int64_t i = 0; i < HO * WO; ++i) yp[i] = static_cast<float>(acc[i]);
  }
}
