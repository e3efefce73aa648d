// Reference group normalisation on NCHW with C = G * CG channels, in double: for each sample n
// and group g, the mean and biased variance over the group's CG * H * W elements (two passes),
// then y = (x - mean) / sqrt(var + eps) * gamma[c] + beta[c].
#include <cmath>
#include <cstdint>

extern "C" void kope_kernel(const float* x, const float* gamma, const float* beta, float* y, int64_t N, int64_t G,
                            int64_t CG, int64_t H, int64_t W, float eps) {
  const int64_t hw = H * W;
  const int64_t group_size = CG * hw;
  for (int64_t n = 0; n < N; ++n) {
    for (int64_t g = 0; g < G; ++g) {
      const float* in = x + (n * G + g) * group_size;
      float* out = y + (n * G + g) * group_size;
      double mean = 0;
      for (int64_t i = 0; i < group_size; ++i) mean += in[i];
      mean /= static_cast<double>(group_size);
      double var = 0;
      for (int64_t i = 0; i < group_size; ++i) var += (in[i] - mean) * (in[i] - mean);
      var /= static_cast<double>(group_size);
      double inv = 1.0 / std::sqrt(var + static_cast<double>(eps));
      for (int64_t k = 0; k < CG; ++k) {
        int64_t c = g * CG + k;
        for (int64_t i = 0; i < hw; ++i) {
          out[k * hw + i] = static_cast<float>((in[k * hw + i] - mean) * inv * gamma[c] + beta[c]);
        }
      }
    }
  }
}
