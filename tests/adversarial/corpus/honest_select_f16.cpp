// expect: correct
// op: select_f16
// time: yes
// f16 handled as bits with its own conversions (IEEE binary16, round to nearest even), bool
// written as 0 or 1.
#include <cstdint>
#include <cstring>

static float widen(uint16_t h) {
  uint32_t sign = uint32_t(h & 0x8000) << 16, e = (h >> 10) & 0x1F, m = h & 0x3FF, bits;
  if (e == 0x1F) {
    bits = sign | 0x7F800000u | (m << 13);
  } else if (e == 0) {
    float mag = float(m) * 0x1p-24f;
    return sign ? -mag : mag;
  } else {
    bits = sign | ((e + 112) << 23) | (m << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

static uint16_t narrow(float f) {
  _Float16 h = static_cast<_Float16>(f);
  uint16_t b;
  std::memcpy(&b, &h, 2);
  return b;
}

extern "C" void kope_kernel(const uint16_t* x, const uint8_t* m, uint16_t* y, uint8_t* nz, int64_t N) {
  for (int64_t i = 0; i < N; ++i) {
    float v = widen(x[i]);
    y[i] = narrow(m[i] ? 2.0f * v : 0.5f * v);
    nz[i] = v != 0.0f;
  }
}
