// Reference cross-entropy from logits with integer labels, in double:
// loss = (1/N) * sum_n (log(sum_c exp(x[n, c] - m_n)) + m_n - x[n, label[n]]), m_n = row max.
#include <cmath>
#include <cstdint>

extern "C" void kope_kernel(const float* logits, const int64_t* labels, float* loss, int64_t N, int64_t C) {
  double total = 0;
  for (int64_t n = 0; n < N; ++n) {
    const float* row = logits + n * C;
    float m = row[0];
    for (int64_t c = 1; c < C; ++c) m = std::fmax(m, row[c]);
    double sum = 0;
    for (int64_t c = 0; c < C; ++c) sum += std::exp(static_cast<double>(row[c]) - m);
    total += std::log(sum) + m - row[labels[n]];
  }
  *loss = static_cast<float>(total / static_cast<double>(N));
}
