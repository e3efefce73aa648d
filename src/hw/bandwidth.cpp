// The memory bandwidth as it is now: the probe's triad (probe_source.h) in kope's own process,
// at one working set, timed around a kernel's timing.
//
// The profile's curve is measured once and cached; on a shared host the bandwidth past the
// cores' own caches moves with the neighbours' load (one 2-CPU VM read 43-48, 61 and 82 GB/s
// beyond its caches within a day). A kernel timed at 45 GB/s against a roof of 82 then reads
// 55% of a roof nothing reaches at the time. The roof of such a case is read here instead, a
// few triad passes before and after the kernel's timing.
#include <emmintrin.h>
#include <sched.h>
#include <sys/mman.h>

#include <algorithm>
#include <barrier>
#include <chrono>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

#include "eval/stats.h"
#include "kope/hw.h"

namespace kope {

namespace {

using Clock = std::chrono::steady_clock;

// One triad pass a = b + 3c over [lo, hi) (lo and hi multiples of 8, the arrays 64-byte
// aligned), on the widest vectors this CPU runs: GCC's vector type is one zmm in the avx512f
// clone, two ymm in the avx2 one, four xmm in the default.
using v8d = double __attribute__((vector_size(64)));

[[gnu::target_clones("avx512f", "avx2", "default")]] void plain_pass(double* a, const double* b, const double* c, size_t lo,
                                                                      size_t hi) {
  for (size_t i = lo; i < hi; i += 8) {
    v8d x = *reinterpret_cast<const v8d*>(b + i), y = *reinterpret_cast<const v8d*>(c + i);
    *reinterpret_cast<v8d*>(a + i) = x + 3.0 * y;
  }
}

// The same with non-temporal stores: the written line is not read first (past the caches, a
// kernel with streaming stores moves more counted bytes per second than the plain triad).
void streaming_pass(double* a, const double* b, const double* c, size_t lo, size_t hi) {
  const __m128d three = _mm_set1_pd(3.0);
  size_t i = lo;
  for (; i + 2 <= hi; i += 2) _mm_stream_pd(a + i, _mm_add_pd(_mm_load_pd(b + i), _mm_mul_pd(three, _mm_load_pd(c + i))));
  for (; i < hi; ++i) a[i] = b[i] + 3.0 * c[i];
  _mm_sfence();
}

// The three arrays, kept for the process's life: mapping and zeroing hundreds of MiB for every
// timed case would cost more than the passes.
struct Arrays {
  std::mutex mu;
  double* base = nullptr;
  size_t n = 0;  // elements per array
};

Arrays& arrays() {
  static Arrays a;
  return a;
}

bool ensure(Arrays& s, size_t n) {
  if (s.n >= n) return true;
  if (s.base) ::munmap(s.base, s.n * 3 * sizeof(double));
  s.base = nullptr;
  s.n = 0;
  void* p = ::mmap(nullptr, n * 3 * sizeof(double), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return false;
  ::madvise(p, n * 3 * sizeof(double), MADV_HUGEPAGE);
  s.base = static_cast<double*>(p);
  s.n = n;
  for (size_t i = 0; i < n; ++i) {
    s.base[i] = 0;
    s.base[n + i] = 1.0 + static_cast<double>(i & 7);
    s.base[2 * n + i] = 2.0;
  }
  return true;
}

}  // namespace

double measure_bandwidth_now(uint64_t working_set_bytes, int threads, int reps) {
  if (working_set_bytes < 24 * 64 || reps < 1) return 0;
  working_set_bytes = std::min(working_set_bytes, k_bandwidth_now_max_bytes);
  Arrays& s = arrays();
  std::lock_guard<std::mutex> lock(s.mu);
  const size_t n = (working_set_bytes / 24) & ~size_t{7};
  if (!ensure(s, n)) return 0;
  double *a = s.base, *b = s.base + s.n, *c = s.base + 2 * s.n;

  cpu_set_t allowed;
  std::vector<int> cpus;
  if (::sched_getaffinity(0, sizeof allowed, &allowed) == 0) {
    for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
      if (CPU_ISSET(cpu, &allowed)) cpus.push_back(cpu);
    }
  }
  const int tn = std::max(1, threads);
  // Each thread on a CPU of its own, as kope's timing keeps a kernel's threads apart (and as
  // the probe does); nothing is pinned when there are more threads than CPUs.
  const bool pin = static_cast<size_t>(tn) <= cpus.size();
  // Small sets repeat the pass inside one timed repetition, so the barriers' wake-ups stay a
  // small part of it.
  const int inner = static_cast<int>(std::max<uint64_t>(1, (uint64_t{128} << 20) / (24 * n)));
  std::vector<double> plain_s, streaming_s;
  std::barrier sync(tn);
  Clock::time_point start;
  auto work = [&](int t) {
    if (pin) {
      cpu_set_t one;
      CPU_ZERO(&one);
      CPU_SET(cpus[static_cast<size_t>(t)], &one);
      ::sched_setaffinity(0, sizeof one, &one);
    }
    // Shares start on 64-byte lines: no line is written by two threads.
    size_t lo = (n * static_cast<size_t>(t) / static_cast<size_t>(tn)) & ~size_t{7};
    size_t hi = t + 1 == tn ? n : (n * static_cast<size_t>(t + 1) / static_cast<size_t>(tn)) & ~size_t{7};
    // Alternating plain and streaming passes: a change of the host's load in between touches both.
    for (int r = 0; r < 2 * reps; ++r) {
      bool streaming = r % 2 == 1;
      sync.arrive_and_wait();
      if (t == 0) start = Clock::now();
      sync.arrive_and_wait();
      for (int k = 0; k < inner; ++k) {
        if (streaming) {
          streaming_pass(a, b, c, lo, hi);
        } else {
          plain_pass(a, b, c, lo, hi);
        }
      }
      sync.arrive_and_wait();
      if (t == 0) {
        double secs = std::chrono::duration<double>(Clock::now() - start).count() / inner;
        (streaming ? streaming_s : plain_s).push_back(secs);
      }
    }
  };
  std::vector<std::thread> pool;
  for (int t = 1; t < tn; ++t) pool.emplace_back(work, t);
  // The calling thread is not pinned: thread 0 runs on a thread of its own too.
  std::thread first(work, 0);
  first.join();
  for (auto& th : pool) th.join();
  double bytes = 24.0 * static_cast<double>(n);
  double best = 0;
  for (const auto* v : {&plain_s, &streaming_s}) {
    double m = eval::median(*v);
    if (m > 0) best = std::max(best, bytes / m / 1e9);
  }
  return best;
}

}  // namespace kope
