// Reference mean squared error, in double: loss = (1/N) * sum_i (a[i] - b[i])^2.
#include <cstdint>

extern "C" void kope_kernel(const float* a, const float* b, float* loss, int64_t N) {
  double total = 0;
  for (int64_t i = 0; i < N; ++i) {
    double d = static_cast<double>(a[i]) - b[i];
    total += d * d;
  }
  *loss = static_cast<float>(total / static_cast<double>(N));
}
