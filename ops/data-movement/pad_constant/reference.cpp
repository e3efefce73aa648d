// Reference constant padding of the two spatial axes of an NCHW tensor: the output is filled with
// `value`, then x is copied into rows PT..PT+H-1 and columns PL..PL+W-1 of each plane.
#include <cstdint>

extern "C" void kope_kernel(const float* x, float* y, int64_t N, int64_t C, int64_t H, int64_t W, int64_t PT,
                            int64_t PB, int64_t PL, int64_t PR, float value) {
  const int64_t ho = PT + H + PB;
  const int64_t wo = PL + W + PR;
  for (int64_t p = 0; p < N * C; ++p) {
    for (int64_t i = 0; i < ho * wo; ++i) y[p * ho * wo + i] = value;
    for (int64_t h = 0; h < H; ++h) {
      for (int64_t w = 0; w < W; ++w) y[p * ho * wo + (PT + h) * wo + PL + w] = x[(p * H + h) * W + w];
    }
  }
}
