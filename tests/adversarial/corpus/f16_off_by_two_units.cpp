// expect: wrong_result
// op: select_f16
// message: y[
// Two units in the last place off on every finite nonzero value: beyond the one unit the f16
// comparison allows.
#include <cstdint>
#include <cstring>

extern "C" void kope_kernel(const uint16_t* x, const uint8_t* m, uint16_t* y, uint8_t* nz, int64_t N) {
  for (int64_t i = 0; i < N; ++i) {
    _Float16 h;
    std::memcpy(&h, &x[i], 2);
    float v = static_cast<float>(h);
    _Float16 r = static_cast<_Float16>(m[i] ? 2.0f * v : v / 2.0f);
    std::memcpy(&y[i], &r, 2);
    if ((y[i] & 0x7C00) != 0x7C00 && (y[i] & 0x7FFF) > 0x0400 && (y[i] & 0x7FFF) < 0x7000) y[i] = static_cast<uint16_t>(y[i] + 2);
    nz[i] = v != 0.0f;
  }
}
