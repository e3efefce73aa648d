// Reference strided slice of a matrix: y[r, c] = x[OR + r*SR, OC + c*SC], where x has
// OR + R*SR rows and OC + C*SC columns.
#include <cstdint>

extern "C" void kope_kernel(const float* x, float* y, int64_t R, int64_t C, int64_t SR, int64_t SC, int64_t OR,
                            int64_t OC) {
  const int64_t ld = OC + C * SC;
  for (int64_t r = 0; r < R; ++r) {
    for (int64_t c = 0; c < C; ++c) y[r * C + c] = x[(OR + r * SR) * ld + OC + c * SC];
  }
}
