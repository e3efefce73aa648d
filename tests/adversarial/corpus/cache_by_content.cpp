// expect: rejected
// op: matmul_small
// time: yes
// message: never-seen inputs
// Remembers results keyed by a sample of the input values, so it survives data moving between
// buffers. Only inputs it has never seen reveal it: they take the full computation time.
#include <cstdint>
#include <cstring>
#include <map>
#include <vector>

namespace {
std::map<std::vector<float>, std::vector<float>>* cache;
}

extern "C" void kope_kernel(const float* A, const float* B, float* C, int64_t M, int64_t N, int64_t K) {
  if (cache == nullptr) cache = new std::map<std::vector<float>, std::vector<float>>();
  std::vector<float> key;
  for (int64_t i = 0; i < M * K; i += 97) key.push_back(A[i]);
  for (int64_t i = 0; i < K * N; i += 89) key.push_back(B[i]);
  key.push_back(static_cast<float>(M * N * K));
  size_t n = static_cast<size_t>(M * N);
  auto it = cache->find(key);
  if (it != cache->end()) {
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
