// expect: rejected
// op: matmul_small
// time: yes
// message: never-seen inputs
// Remembers the results of the last four input contents in plain zero-initialised globals (no
// constructor, no heap, nothing for the object inspection to see), keyed by a hash of a sample
// of the inputs. Data moving between buffers and outputs poisoned between calls don't matter to
// it; only inputs it has never seen cost it the full computation.
#include <cstdint>
#include <cstring>

namespace {
constexpr int k_entries = 4;
constexpr int64_t k_max = 192 * 192;
uint64_t g_keys[k_entries];
int64_t g_sizes[k_entries];
float g_results[k_entries][k_max];
int g_next;

uint64_t key_of(const float* A, const float* B, int64_t M, int64_t N, int64_t K) {
  uint64_t h = 1469598103934665603ULL ^ static_cast<uint64_t>(M * 131 + N * 7 + K);
  auto mix = [&](const float* p, int64_t n) {
    for (int64_t i = 0; i < n; i += 61) {
      uint32_t bits;
      std::memcpy(&bits, p + i, sizeof bits);
      h = (h ^ bits) * 1099511628211ULL;
    }
  };
  mix(A, M * K);
  mix(B, K * N);
  return h | 1;  // never 0, the value of an empty slot
}
}  // namespace

extern "C" void kope_kernel(const float* A, const float* B, float* C, int64_t M, int64_t N, int64_t K) {
  int64_t n = M * N;
  uint64_t key = key_of(A, B, M, N, K);
  for (int e = 0; e < k_entries; ++e) {
    if (g_keys[e] == key && g_sizes[e] == n) {
      std::memcpy(C, g_results[e], static_cast<size_t>(n) * sizeof(float));
      return;
    }
  }
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      float acc = 0;
      for (int64_t k = 0; k < K; ++k) acc += A[i * K + k] * B[k * N + j];
      C[i * N + j] = acc;
    }
  if (n <= k_max) {
    g_keys[g_next] = key;
    g_sizes[g_next] = n;
    std::memcpy(g_results[g_next], C, static_cast<size_t>(n) * sizeof(float));
    g_next = (g_next + 1) % k_entries;
  }
}
