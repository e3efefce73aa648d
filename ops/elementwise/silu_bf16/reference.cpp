// Reference SiLU on bf16: widen to f32 (exact), y = x / (1 + exp(-x)) in f32, narrow by
// round-to-nearest-even (NaN kept quiet). -Inf: exp(+Inf) = Inf, -Inf / Inf = NaN.
#include <cmath>
#include <cstdint>
#include <cstring>

namespace {

float bf16_to_float(uint16_t bits) {
  uint32_t u = static_cast<uint32_t>(bits) << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

uint16_t bf16_from_float(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<uint16_t>((u >> 16) | 0x40u);
  return static_cast<uint16_t>((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}

}  // namespace

extern "C" void kope_kernel(const uint16_t* x /* bf16 */, uint16_t* y /* bf16 */, int64_t N, int64_t D) {
  const int64_t n = N * D;
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    float v = bf16_to_float(x[i]);
    y[i] = bf16_from_float(v / (1.0f + std::exp(-v)));
  }
}
