// Reference batched matmul: c[b] = a[b]·b[b] (row-major). Each output row is accumulated in
// double, i-k-j order; rows of all batches are independent.
#include <cstdint>
#include <vector>

extern "C" void kope_kernel(const float* a, const float* b, float* c, int64_t BATCH, int64_t M,
                            int64_t N, int64_t K) {
#pragma omp parallel for schedule(static)
  for (int64_t row = 0; row < BATCH * M; ++row) {
    const int64_t bi = row / M;
    const float* arow = a + row * K;  // a[bi, i, :] with i = row % M
    const float* bmat = b + bi * K * N;
    std::vector<double> acc(N, 0.0);
    for (int64_t k = 0; k < K; ++k) {
      const double av = arow[k];
      for (int64_t j = 0; j < N; ++j) acc[j] += av * bmat[k * N + j];
    }
    for (int64_t j = 0; j < N; ++j) c[row * N + j] = static_cast<float>(acc[j]);
  }
}
