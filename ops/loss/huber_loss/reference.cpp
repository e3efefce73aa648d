// Reference Huber loss, in double: with d = a[i] - b[i],
// l = 0.5 * d^2 if |d| < delta else delta * (|d| - 0.5 * delta); loss = mean of l.
#include <cmath>
#include <cstdint>

extern "C" void kope_kernel(const float* a, const float* b, float* loss, int64_t N, float delta) {
  double total = 0;
  const double dl = delta;
  for (int64_t i = 0; i < N; ++i) {
    double d = std::fabs(static_cast<double>(a[i]) - b[i]);
    total += d < dl ? 0.5 * d * d : dl * (d - 0.5 * dl);
  }
  *loss = static_cast<float>(total / static_cast<double>(N));
}
