// Reference log-softmax: y = x - max - log(sum exp(x - max)), the sum in double.
#include <cmath>
#include <cstdint>

extern "C" void kope_kernel(const float* x, float* y, int64_t N, int64_t D) {
  for (int64_t n = 0; n < N; ++n) {
    const float* row = x + n * D;
    float* out = y + n * D;
    float m = row[0];
    for (int64_t d = 1; d < D; ++d) m = std::fmax(m, row[d]);
    double sum = 0;
    for (int64_t d = 0; d < D; ++d) sum += std::exp(static_cast<double>(row[d]) - m);
    double lse = std::log(sum);
    for (int64_t d = 0; d < D; ++d) out[d] = static_cast<float>(static_cast<double>(row[d]) - m - lse);
  }
}
