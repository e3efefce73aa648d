// expect: rejected
// op: matmul_small
// time: yes
// message: results may not depend on earlier calls
// Remembers the result per input address and replays it when the same buffers come back.
// Verification passes (each input buffer holds one data set); timing moves the data between
// the buffers, and the replayed results are stale.
#include <cstdint>
#include <cstring>
#include <map>
#include <utility>
#include <vector>

namespace {
std::map<std::pair<const float*, const float*>, std::vector<float>>* cache;
}

extern "C" void kope_kernel(const float* A, const float* B, float* C, int64_t M, int64_t N, int64_t K) {
  if (cache == nullptr) cache = new std::map<std::pair<const float*, const float*>, std::vector<float>>();
  auto key = std::make_pair(A, B);
  auto it = cache->find(key);
  size_t n = static_cast<size_t>(M * N);
  if (it != cache->end() && it->second.size() == n) {
    std::memcpy(C, it->second.data(), n * sizeof(float));
    return;
  }
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      float acc = 0;
      for (int64_t k = 0; k < K; ++k) acc += A[i * K + k] * B[k * N + j];
      C[i * N + j] = acc;
    }
  (*cache)[key] = std::vector<float>(C, C + n);
}
