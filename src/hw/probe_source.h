// hw/probe_source.h — the peak-FLOP/s and bandwidth probe, compiled at run time with the
// candidates' compiler and flags so the roofline reflects what a candidate could reach.
#pragma once

namespace kope::hw {

// Prints one JSON object: {"gflops": F, "gflops_core": F1, "gflops_f64": D, "gflops_f64_core": D1,
// "giops": I, "giops_core": I1, "bandwidth": [[bytes, gbps], ...]} (FP32 and FP64 FMA peaks, triad bandwidth per working set:
// beyond the last-level cache the better of plain and streaming stores).
// argv[1]: the largest working set in bytes for the triad; argv[2]: the last-level cache size.
inline constexpr const char* k_probe_source = R"PROBE(
#include <omp.h>
#include <sched.h>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>
#include <algorithm>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif
#if defined(__AVX2__)
#include <immintrin.h>
#endif

#if defined(__AVX512F__)
constexpr int kBytes = 64;
#elif defined(__AVX__)
constexpr int kBytes = 32;
#else
constexpr int kBytes = 16;
#endif
// Independent chains: enough to cover FMA latency x 2 ports, and few enough that the chains
// and the two operands stay in vector registers (16 with AVX2 and before, 32 with AVX-512):
// with 16 chains on AVX2 the compiler spills, and a Zen 3 core measured 59 instead of 104
// GFLOP/s.
#if defined(__AVX512F__)
constexpr int kAcc = 16;
#else
constexpr int kAcc = 12;
#endif

static double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// FMA chains of one vector register width in element type T; returns a sum so nothing is
// optimised away.
template <class T>
__attribute__((noinline)) static T fma_loop(long iters, T seed) {
  constexpr int lanes = kBytes / (int)sizeof(T);
  typedef T vec __attribute__((vector_size(kBytes)));
  vec acc[kAcc];
  vec a, b;
  for (int l = 0; l < lanes; ++l) { a[l] = (T)0.999999; b[l] = (T)1e-7 * seed; }
  for (int i = 0; i < kAcc; ++i) for (int l = 0; l < lanes; ++l) acc[i][l] = seed + i + l;
  for (long it = 0; it < iters; ++it) {
#pragma GCC unroll 16
    for (int i = 0; i < kAcc; ++i) acc[i] = acc[i] * a + b;
  }
  T s = 0;
  for (int i = 0; i < kAcc; ++i) for (int l = 0; l < lanes; ++l) s += acc[i][l];
  return s;
}

// FMA throughput of `threads` threads: each thread times its own runs, and the figure is the sum
// of each thread's best, so a thread that lost its CPU to other load for a while does not drag
// the peak down (what each core delivers while it runs).
template <class T>
static double gflops(int threads) {
  constexpr int lanes = kBytes / (int)sizeof(T);
  const long iters = 200000;  // about 1 ms per run: short enough to fit between preemptions
  std::vector<double> best(threads, 1e30);
  volatile double sink = 0;
  for (int rep = 0; rep < 60; ++rep) {
#pragma omp parallel num_threads(threads)
    {
      int t = omp_get_thread_num();
      double t0 = now();
      T r = fma_loop<T>(iters, (T)(1 + t));
      double dt = now() - t0;
      if (dt < best[t]) best[t] = dt;
#pragma omp atomic
      sink += (double)r;
    }
  }
  double f = 0;
  for (int t = 0; t < threads; ++t) f += 2.0 * lanes * kAcc * (double)iters / best[t] / 1e9;
  return f;
}

// Integer multiply-add chains in the widest int8 dot product the ISA level has, each u8 x s8
// product counted as a multiply-add (2 ops), the way int8 dot products are counted:
// - AVX-512 VNNI: vpdpbusd on zmm (64 products summed in fours into 16 i32 lanes and
//   accumulated: 128 ops an instruction);
// - AVX-512 BW: vpmaddubsw on zmm (64 products summed in pairs into 32 i16 lanes: 128 ops);
// - AVX-VNNI: vpdpbusd on ymm (64 ops); AVX2: vpmaddubsw on ymm (64 ops);
// - otherwise int16 multiply-add in vectors of the register width (2 ops a lane).
// A probe with a narrower instruction than kernels may use puts int8 kernels "beyond the roof"
// (a VNNI GEMM measured 140% of the AVX2 figure). The chains are named variables, not an array:
// gcc 12 copies an array of accumulators through other registers and the stack on every
// iteration, and copies even named ones around its builtins (half the vpdpbusd throughput
// measured), so each step is one instruction of inline assembly on a named chain. Returns a sum so
// nothing is optimised away.
#define KOPE_CHAINS12(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11)
#define KOPE_CHAINS16(X) KOPE_CHAINS12(X) X(12) X(13) X(14) X(15)
__attribute__((noinline)) static long int_loop(long iters, int seed, double* ops) {
  long s = 0;
#if defined(__AVX512VNNI__) || defined(__AVX512BW__)
  const __m512i a = _mm512_set1_epi8((char)(3 + (seed & 7)));
  const __m512i b = _mm512_set1_epi8((char)(1 + (seed & 3)));
#define KOPE_INIT(i) __m512i c##i = _mm512_set1_epi32(i + seed);
  KOPE_CHAINS16(KOPE_INIT)
#undef KOPE_INIT
  for (long it = 0; it < iters; ++it) {
#if defined(__AVX512VNNI__)
#define KOPE_STEP(i) asm("vpdpbusd %2, %1, %0" : "+v"(c##i) : "v"(a), "v"(b));
#else
#define KOPE_STEP(i) asm("vpmaddubsw %1, %0, %0" : "+v"(c##i) : "v"(b));
#endif
    KOPE_CHAINS16(KOPE_STEP)
#undef KOPE_STEP
  }
  (void)a;
#define KOPE_SUM(i) s += _mm512_cvtsi512_si32(c##i);
  KOPE_CHAINS16(KOPE_SUM)
#undef KOPE_SUM
  *ops = 128.0 * 16 * (double)iters;
#elif defined(__AVX2__)
  const __m256i a = _mm256_set1_epi8((char)(3 + (seed & 7)));
  const __m256i b = _mm256_set1_epi8((char)(1 + (seed & 3)));
#define KOPE_INIT(i) __m256i c##i = _mm256_set1_epi16((short)(i + seed));
  KOPE_CHAINS12(KOPE_INIT)
#undef KOPE_INIT
  for (long it = 0; it < iters; ++it) {
#if defined(__AVXVNNI__)
#define KOPE_STEP(i) asm("%{vex%} vpdpbusd %2, %1, %0" : "+x"(c##i) : "x"(a), "x"(b));
#else
#define KOPE_STEP(i) asm("vpmaddubsw %1, %0, %0" : "+x"(c##i) : "x"(b));
#endif
    KOPE_CHAINS12(KOPE_STEP)
#undef KOPE_STEP
  }
  (void)a;
#define KOPE_SUM(i) s += _mm256_extract_epi16(c##i, 0);
  KOPE_CHAINS12(KOPE_SUM)
#undef KOPE_SUM
  *ops = 64.0 * 12 * (double)iters;
#else
  constexpr int lanes = kBytes / 2;
  typedef short vec __attribute__((vector_size(kBytes)));
  vec acc[kAcc];
  vec a, b;
  for (int l = 0; l < lanes; ++l) { a[l] = 3; b[l] = (short)(seed + l); }
  for (int i = 0; i < kAcc; ++i) for (int l = 0; l < lanes; ++l) acc[i][l] = (short)(seed + i + l);
  for (long it = 0; it < iters; ++it) {
#pragma GCC unroll 16
    for (int i = 0; i < kAcc; ++i) acc[i] = acc[i] * a + b;
  }
  for (int i = 0; i < kAcc; ++i) for (int l = 0; l < lanes; ++l) s += acc[i][l];
  *ops = 2.0 * lanes * kAcc * (double)iters;
#endif
  return s;
}

// Integer throughput of `threads` threads, as gflops(): the sum of each thread's best run.
static double giops(int threads) {
  const long iters = 200000;
  std::vector<double> best(threads, 1e30);
  double ops = 0;
  volatile long sink = 0;
  for (int rep = 0; rep < 60; ++rep) {
#pragma omp parallel num_threads(threads)
    {
      int t = omp_get_thread_num();
      double my_ops = 0;
      double t0 = now();
      long r = int_loop(iters, 1 + t, &my_ops);
      double dt = now() - t0;
      if (dt < best[t]) best[t] = dt;
#pragma omp atomic
      sink += r;
#pragma omp critical
      ops = my_ops;
    }
  }
  double g = 0;
  for (int t = 0; t < threads; ++t) g += ops / best[t] / 1e9;
  return g;
}

// One triad pass a = b + 3c over elements [lo, hi). `streaming`: the stores bypass the caches
// (x86 non-temporal stores), so the line written is not read first.
static inline void triad_pass(double* a, const double* b, const double* c, size_t lo, size_t hi, bool streaming) {
  size_t i = lo;
#if defined(__SSE2__)
  if (streaming) {
    const __m128d three = _mm_set1_pd(3.0);
    for (; i + 2 <= hi; i += 2) _mm_stream_pd(a + i, _mm_add_pd(_mm_load_pd(b + i), _mm_mul_pd(three, _mm_load_pd(c + i))));
    _mm_sfence();
  }
#endif
  for (; i < hi; ++i) a[i] = b[i] + 3.0 * c[i];
  __asm__ __volatile__("" ::: "memory");
}

// Triad a = b + 3c over a working set of 24n bytes, each thread on its own static share of
// whole 64-byte lines. Small working sets repeat the triad `inner` times inside one parallel
// region (no fork/join per pass).
//
// Cache-resident sets (`per_thread`) are timed per thread and pass, and the bandwidth is the sum
// of each thread's best: what every core's own caches deliver while it runs, whatever else the
// machine runs at the time.
//
// Larger sets share the memory system, so they are timed as the threads run together: each
// repetition starts every thread at a barrier and ends when the last one is done, and the
// bandwidth is the best repetition's. Never the sum of each thread's best pass there: a thread
// that ran while the other waited had the memory system to itself, so the sum counts shared
// bandwidth once per thread (on a 2-CPU VM it read 2-22% above the threads' common time;
// probe version 7).
//
// `streaming`: non-temporal stores. STREAM counting (24 bytes an element) leaves out the read of
// the line a plain store writes, so a kernel with streaming stores moves more counted bytes per
// second than the plain triad: the roof must be the better of the two.
static double triad(size_t n, int reps, bool per_thread, bool streaming = false) {
  double* a = (double*)aligned_alloc(64, n * 8);
  double* b = (double*)aligned_alloc(64, n * 8);
  double* c = (double*)aligned_alloc(64, n * 8);
#pragma omp parallel for schedule(static)
  for (size_t i = 0; i < n; ++i) { a[i] = 0; b[i] = 1.0 + (double)(i & 7); c[i] = 2.0; }
  long inner = (long)std::max<size_t>(1, ((size_t)8 << 20) / (24 * n));
  int tn_max = omp_get_max_threads();
  std::vector<double> best_pass(tn_max, 1e30);
  std::vector<size_t> share(tn_max, 0);
  double best = 1e30;
  for (int r = 0; r < reps; ++r) {
    double together = 0;  // shared sets: from the common start to the last thread's end
#pragma omp parallel
    {
      size_t t = (size_t)omp_get_thread_num(), tn = (size_t)omp_get_num_threads();
      // Shares start on 64-byte lines: no line is written by two threads.
      size_t lo = (n * t / tn) & ~(size_t)7, hi = t + 1 == tn ? n : (n * (t + 1) / tn) & ~(size_t)7;
      share[t] = hi - lo;
      if (per_thread) {
        // Passes are timed in groups of at least 256 KiB of traffic (the clock's resolution).
        long group = (long)std::max<size_t>(1, ((size_t)256 << 10) / std::max<size_t>(1, 24 * share[t]));
        for (long k = 0; k < inner; k += group) {
          long g = std::min(group, inner - k);
          double p0 = now();
          for (long q = 0; q < g; ++q) triad_pass(a, b, c, lo, hi, streaming);
          double dp = (now() - p0) / (double)g;
          if (dp < best_pass[t]) best_pass[t] = dp;
        }
      } else {
#pragma omp barrier
        double s0 = now();
        for (long q = 0; q < inner; ++q) triad_pass(a, b, c, lo, hi, streaming);
#pragma omp barrier
        if (t == 0) together = (now() - s0) / (double)inner;
      }
    }
    if (!per_thread && together > 0) best = std::min(best, together);
  }
  volatile double sink = a[n / 2];
  (void)sink;
  free(a); free(b); free(c);
  if (!per_thread) return 24.0 * (double)n / best / 1e9;
  double gbps = 0;
  for (int t = 0; t < tn_max; ++t) {
    if (share[t] > 0 && best_pass[t] < 1e29) gbps += 24.0 * (double)share[t] / best_pass[t] / 1e9;
  }
  return gbps;
}

// Puts each thread of the pool on a CPU of its own (the t-th the process may use), as kope's
// timing keeps a kernel's threads apart. Left to the scheduler, on a VM that reports no cache
// shared between its CPUs, both triad threads often ran on one CPU while the other idled: the
// same 2-CPU machine measured 53 GB/s beyond its caches in one run and 104 GB/s in the next.
// Nothing is pinned when there are more threads than CPUs.
static void pin_threads() {
  cpu_set_t allowed;
  if (sched_getaffinity(0, sizeof allowed, &allowed) != 0) return;
  std::vector<int> cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &allowed)) cpus.push_back(c);
  }
#pragma omp parallel
  {
    size_t t = (size_t)omp_get_thread_num();
    if ((size_t)omp_get_num_threads() <= cpus.size()) {
      cpu_set_t one;
      CPU_ZERO(&one);
      CPU_SET(cpus[t], &one);
      sched_setaffinity(0, sizeof one, &one);
    }
  }
}

int main(int argc, char** argv) {
  pin_threads();
  size_t max_ws = argc > 1 ? strtoull(argv[1], 0, 10) : (size_t)1 << 30;
  // argv[2]: the shared last-level cache in bytes; working sets below it are timed per thread.
  size_t llc = argc > 2 ? strtoull(argv[2], 0, 10) : (size_t)8 << 20;
  int threads = omp_get_max_threads();
  double g1 = gflops<float>(1);
  double gall = threads > 1 ? gflops<float>(threads) : g1;
  double d1 = gflops<double>(1);
  double dall = threads > 1 ? gflops<double>(threads) : d1;
  double i1 = giops(1);
  double iall = threads > 1 ? giops(threads) : i1;
  printf("{\"gflops\": %.3f, \"gflops_core\": %.3f, \"gflops_f64\": %.3f, \"gflops_f64_core\": %.3f, \"giops\": %.3f, "
         "\"giops_core\": %.3f, \"bandwidth\": [",
         gall, g1, dall, d1, iall, i1);
  // From 16 KiB (at least 8 KiB per thread) up in steps of 4x: L1, L2, L3 and DRAM.
  std::vector<size_t> sizes;
  size_t first = std::max<size_t>((size_t)16 << 10, (size_t)threads * (8 << 10));
  for (size_t ws = first; ws < max_ws; ws *= 4) sizes.push_back(ws);
  sizes.push_back(max_ws);
  for (size_t k = 0; k < sizes.size(); ++k) {
    size_t ws = sizes[k];
    size_t n = ws / 24;
    int reps = (int)std::min<size_t>(200, std::max<size_t>(10, ((size_t)2 << 30) / ws));
    double bw = triad(n, reps, ws < llc);
#if defined(__SSE2__)
    // Beyond the last-level cache, streaming stores save the write's line read.
    if (ws >= llc) bw = std::max(bw, triad(n, reps, false, true));
#endif
    printf("%s[%zu, %.3f]", k ? ", " : "", ws, bw);
  }
  printf("]}\n");
  return 0;
}
)PROBE";

}  // namespace kope::hw
