// Reference u8 x s8 linear layer with requantisation: each dot product accumulated exactly in
// int32, then float(acc) * scale[j] as one f32 multiplication, rounded half to even
// (std::nearbyint in the default rounding mode) and saturated to [-128, 127].
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

extern "C" void kope_kernel(const uint8_t* x, const int8_t* w, const float* scale, int8_t* y,
                            int64_t M, int64_t N, int64_t K) {
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < M; ++i) {
    std::vector<int32_t> acc(static_cast<std::size_t>(N), 0);
    for (int64_t k = 0; k < K; ++k) {
      const int32_t a = x[i * K + k];
      for (int64_t j = 0; j < N; ++j) acc[j] += a * static_cast<int32_t>(w[k * N + j]);
    }
    for (int64_t j = 0; j < N; ++j) {
      const float v = std::nearbyint(static_cast<float>(acc[j]) * scale[j]);
      y[i * N + j] = static_cast<int8_t>(std::clamp(v, -128.0f, 127.0f));
    }
  }
}
