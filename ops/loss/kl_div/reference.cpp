// Reference KL divergence (PyTorch kl_div, reduction "batchmean"), in double:
// loss = (1/N) * sum_{n,c} p * (log p - logq), with 0 * log 0 = 0.
#include <cmath>
#include <cstdint>

extern "C" void kope_kernel(const float* logq, const float* p, float* loss, int64_t N, int64_t C) {
  double total = 0;
  for (int64_t i = 0; i < N * C; ++i) {
    double pi = p[i];
    if (pi > 0) total += pi * (std::log(pi) - logq[i]);
  }
  *loss = static_cast<float>(total / static_cast<double>(N));
}
