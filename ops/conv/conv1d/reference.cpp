// Reference 1-D convolution, NCL, stride 1, no padding, with bias. Each output row (n, o) is
// accumulated in double.
#include <cstddef>
#include <cstdint>
#include <vector>

extern "C" void kope_kernel(const float* x, const float* wt, const float* b, float* y, int64_t N,
                            int64_t C, int64_t L, int64_t CO, int64_t KW) {
  const int64_t LO = L - KW + 1;
#pragma omp parallel for schedule(dynamic)
  for (int64_t no = 0; no < N * CO; ++no) {
    const int64_t n = no / CO, o = no % CO;
    std::vector<double> acc(static_cast<std::size_t>(LO), static_cast<double>(b[o]));
    for (int64_t c = 0; c < C; ++c) {
      const float* row = x + (n * C + c) * L;
      for (int64_t k = 0; k < KW; ++k) {
        const double wv = wt[(o * C + c) * KW + k];
        for (int64_t t = 0; t < LO; ++t) acc[t] += wv * row[t + k];
      }
    }
    float* yp = y + (n * CO + o) * LO;
    for (int64_t t = 0; t < LO; ++t) yp[t] = static_cast<float>(acc[t]);
  }
}
