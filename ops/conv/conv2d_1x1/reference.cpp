// Reference pointwise convolution, NCHW: each output plane (n, o) is the weighted sum of the
// input planes of image n, accumulated in double.
#include <cstddef>
#include <cstdint>
#include <vector>

extern "C" void kope_kernel(const float* x, const float* wt, float* y, int64_t N, int64_t C,
                            int64_t H, int64_t W, int64_t CO) {
  const int64_t P = H * W;  // pixels per plane
#pragma omp parallel for schedule(dynamic)
  for (int64_t no = 0; no < N * CO; ++no) {
    const int64_t n = no / CO, o = no % CO;
    std::vector<double> acc(static_cast<std::size_t>(P), 0.0);
    for (int64_t c = 0; c < C; ++c) {
      const double wv = wt[o * C + c];
      const float* plane = x + (n * C + c) * P;
      for (int64_t p = 0; p < P; ++p) acc[p] += wv * plane[p];
    }
    float* yp = y + (n * CO + o) * P;
    for (int64_t p = 0; p < P; ++p) yp[p] = static_cast<float>(acc[p]);
  }
}
