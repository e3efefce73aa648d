// hw/probe_source.h — the peak-FLOP/s and bandwidth probe, compiled at run time with the
// candidates' compiler and flags so the roofline reflects what a candidate could reach.
#pragma once

namespace kope::hw {

// Prints one JSON object: {"gflops": F, "gflops_core": F1, "bandwidth": [[bytes, gbps], ...]}.
// argv[1]: the largest working set in bytes for the triad.
inline constexpr const char* k_probe_source = R"PROBE(
#include <omp.h>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>
#include <algorithm>

#if defined(__AVX512F__)
constexpr int kLanes = 16;
#elif defined(__AVX__)
constexpr int kLanes = 8;
#else
constexpr int kLanes = 4;
#endif
typedef float vec __attribute__((vector_size(kLanes * 4)));
constexpr int kAcc = 16;  // independent chains: enough to cover FMA latency x 2 ports

static double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// FMA chains; returns seconds for `iters` iterations on this thread.
__attribute__((noinline)) static float fma_loop(long iters, float seed) {
  vec acc[kAcc];
  vec a, b;
  for (int l = 0; l < kLanes; ++l) { a[l] = 0.999999f; b[l] = 1e-7f * seed; }
  for (int i = 0; i < kAcc; ++i) for (int l = 0; l < kLanes; ++l) acc[i][l] = seed + i + l;
  for (long it = 0; it < iters; ++it) {
#pragma GCC unroll 16
    for (int i = 0; i < kAcc; ++i) acc[i] = acc[i] * a + b;
  }
  float s = 0;
  for (int i = 0; i < kAcc; ++i) for (int l = 0; l < kLanes; ++l) s += acc[i][l];
  return s;
}

static double gflops(int threads) {
  const long iters = 4000000;
  double best = 0;
  volatile float sink = 0;
  for (int rep = 0; rep < 5; ++rep) {
    double t0 = now();
#pragma omp parallel num_threads(threads)
    {
      float r = fma_loop(iters, 1.0f + omp_get_thread_num());
#pragma omp atomic
      sink += r;
    }
    double dt = now() - t0;
    double f = 2.0 * kLanes * kAcc * (double)iters * threads / dt / 1e9;
    best = std::max(best, f);
  }
  return best;
}

static double triad(size_t n, int reps) {
  double* a = (double*)aligned_alloc(64, n * 8);
  double* b = (double*)aligned_alloc(64, n * 8);
  double* c = (double*)aligned_alloc(64, n * 8);
#pragma omp parallel for schedule(static)
  for (size_t i = 0; i < n; ++i) { a[i] = 0; b[i] = 1.0 + (double)(i & 7); c[i] = 2.0; }
  double best = 1e30;
  for (int r = 0; r < reps; ++r) {
    double t0 = now();
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; ++i) a[i] = b[i] + 3.0 * c[i];
    double dt = now() - t0;
    best = std::min(best, dt);
  }
  volatile double sink = a[n / 2];
  (void)sink;
  free(a); free(b); free(c);
  return 24.0 * (double)n / best / 1e9;
}

int main(int argc, char** argv) {
  size_t max_ws = argc > 1 ? strtoull(argv[1], 0, 10) : (size_t)1 << 30;
  int threads = omp_get_max_threads();
  double g1 = gflops(1);
  double gall = threads > 1 ? gflops(threads) : g1;
  printf("{\"gflops\": %.3f, \"gflops_core\": %.3f, \"bandwidth\": [", gall, g1);
  std::vector<size_t> sizes;
  for (size_t ws = (size_t)256 << 10; ws < max_ws; ws *= 4) sizes.push_back(ws);
  sizes.push_back(max_ws);
  for (size_t k = 0; k < sizes.size(); ++k) {
    size_t ws = sizes[k];
    size_t n = ws / 24;
    int reps = (int)std::min<size_t>(200, std::max<size_t>(5, ((size_t)2 << 30) / ws));
    double bw = triad(n, reps);
    printf("%s[%zu, %.3f]", k ? ", " : "", ws, bw);
  }
  printf("]}\n");
  return 0;
}
)PROBE";

}  // namespace kope::hw
