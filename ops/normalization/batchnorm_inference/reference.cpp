// Reference batch normalisation (inference) on NCHW, in double:
// y = (x - mean[c]) / sqrt(var[c] + eps) * gamma[c] + beta[c].
#include <cmath>
#include <cstdint>

extern "C" void kope_kernel(const float* x, const float* mean, const float* var, const float* gamma,
                            const float* beta, float* y, int64_t N, int64_t C, int64_t H, int64_t W, float eps) {
  for (int64_t n = 0; n < N; ++n) {
    for (int64_t c = 0; c < C; ++c) {
      double inv = 1.0 / std::sqrt(static_cast<double>(var[c]) + static_cast<double>(eps));
      const float* in = x + (n * C + c) * H * W;
      float* out = y + (n * C + c) * H * W;
      for (int64_t i = 0; i < H * W; ++i) {
        out[i] = static_cast<float>((in[i] - static_cast<double>(mean[c])) * inv * gamma[c] + beta[c]);
      }
    }
  }
}
