// expect: rejected
// op: matmul_small
// time: yes
// message: results may not depend on earlier calls
// Skips the work when called again with the same buffers, hoping the output still holds the
// answer. Calls on one output always alternate inputs and outputs are poisoned between batches.
#include <cstdint>
#include <set>
#include <tuple>

namespace {
std::set<std::tuple<const float*, const float*, float*>>* seen;
}

extern "C" void kope_kernel(const float* A, const float* B, float* C, int64_t M, int64_t N, int64_t K) {
  if (seen == nullptr) seen = new std::set<std::tuple<const float*, const float*, float*>>();
  if (!seen->insert({A, B, C}).second) return;
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      float acc = 0;
      for (int64_t k = 0; k < K; ++k) acc += A[i * K + k] * B[k * N + j];
      C[i * N + j] = acc;
    }
}
