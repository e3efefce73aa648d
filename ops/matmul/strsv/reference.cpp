// Reference lower-triangular solve by forward substitution, each row's sum accumulated in double:
// x[i] = (b[i] - sum_{j<i} L[i, j] * x[j]) / L[i, i]. Sequential: row i needs every earlier x.
#include <cstddef>
#include <cstdint>
#include <vector>

extern "C" void kope_kernel(const float* L, const float* b, float* x, int64_t N) {
  std::vector<double> xd(static_cast<size_t>(N));
  for (int64_t i = 0; i < N; ++i) {
    const float* row = L + i * N;
    double acc = b[i];
    for (int64_t j = 0; j < i; ++j) acc -= static_cast<double>(row[j]) * xd[static_cast<size_t>(j)];
    xd[static_cast<size_t>(i)] = acc / row[i];
    x[i] = static_cast<float>(xd[static_cast<size_t>(i)]);
  }
}
