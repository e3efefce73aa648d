// Reference: f16 widened with the compiler's _Float16 (IEEE binary16, round to nearest even).
#include <cstdint>
#include <cstring>

extern "C" void kope_kernel(const uint16_t* x /* f16 */, const uint8_t* m /* bool */, uint16_t* y /* f16 */,
                            uint8_t* nz /* bool */, int64_t N) {
  for (int64_t i = 0; i < N; ++i) {
    _Float16 h;
    std::memcpy(&h, &x[i], 2);
    float v = static_cast<float>(h);
    _Float16 r = static_cast<_Float16>(m[i] ? 2.0f * v : v / 2.0f);
    std::memcpy(&y[i], &r, 2);
    nz[i] = v != 0.0f ? 1 : 0;
  }
}
