// Reference 5x5 convolution, NCHW, stride 2, no padding, no bias. Each output plane (n, o) is
// accumulated in double.
#include <cstddef>
#include <cstdint>
#include <vector>

extern "C" void kope_kernel(const float* x, const float* wt, float* y, int64_t N, int64_t C,
                            int64_t H, int64_t W, int64_t CO) {
  const int64_t R = 5, S = 5, stride = 2;
  const int64_t HO = (H - R) / stride + 1, WO = (W - S) / stride + 1;
#pragma omp parallel for schedule(dynamic)
  for (int64_t no = 0; no < N * CO; ++no) {
    const int64_t n = no / CO, o = no % CO;
    std::vector<double> acc(static_cast<std::size_t>(HO * WO), 0.0);
    for (int64_t c = 0; c < C; ++c) {
      const float* plane = x + (n * C + c) * H * W;
      for (int64_t r = 0; r < R; ++r) {
        for (int64_t s = 0; s < S; ++s) {
          const double wv = wt[((o * C + c) * R + r) * S + s];
          for (int64_t oh = 0; oh < HO; ++oh) {
            const float* row = plane + (oh * stride + r) * W + s;
            double* out = acc.data() + oh * WO;
            for (int64_t ow = 0; ow < WO; ++ow) out[ow] += wv * row[ow * stride];
          }
        }
      }
    }
    float* yp = y + (n * CO + o) * HO * WO;
    for (int64_t i = 0; i < HO * WO; ++i) yp[i] = static_cast<float>(acc[i]);
  }
}
