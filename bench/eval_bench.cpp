// kope_eval_bench: how fast the evaluator reaches a verdict, and how tight its timings get.
//
//   build/bench/kope_eval_bench [--repeats N] [--max-seconds S]
//
// Prints, for the test op tests/ops/elementwise/vadd (an elementwise candidate):
//   - the time to a verdict (sandboxed compile + inspection + verification of every case) with a
//     fresh compile and with a compile-cache hit, median over N runs with min/max;
//   - a full evaluation including timing (baselines cached);
// and the CI half-width the timing reaches (target ±2%, cap S seconds) on a memory-bound case
// (vadd, N = 2^20) and a compute-bound case (matmul_small, 192^3). Uses the hardware profile in
// the cache (`kope hw`) and the machine's cores. Numbers on a shared machine are noisy: read the
// spread, not just the median.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "kope/eval.h"
#include "kope/hw.h"
#include "kope/spec.h"
#include "spec/generate.h"
#include "util/fs.h"

using namespace kope;
namespace fs = std::filesystem;

namespace {

using Clock = std::chrono::steady_clock;

const char* k_vadd = R"(
#include <cstdint>
extern "C" void kope_kernel(const float* x, const float* y, float* z, int64_t N) {
#pragma omp parallel for simd if (N > 100000)
  for (int64_t i = 0; i < N; ++i) z[i] = x[i] + y[i];
}
)";

struct Spread {
  double median = 0, min = 0, max = 0;
};

Spread spread(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  Spread s;
  s.min = v.front();
  s.max = v.back();
  s.median = v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
  return s;
}

std::string nonce() {
  static std::mt19937_64 rng(std::random_device{}());
  char buf[40];
  std::snprintf(buf, sizeof buf, "// %016llx\n", static_cast<unsigned long long>(rng()));
  return buf;
}

int die(const std::string& m) {
  std::fprintf(stderr, "kope_eval_bench: %s\n", m.c_str());
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  int repeats = 5;
  double max_seconds = 10;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string k = argv[i];
    if (k == "--repeats") repeats = std::max(1, std::atoi(argv[i + 1]));
    else if (k == "--max-seconds") max_seconds = std::atof(argv[i + 1]);
  }
  auto hw = load_hardware_profile();
  if (!hw) return die(hw.error().message);
  auto ev = eval::make_cpu_evaluator(*hw);
  if (!ev) return die(ev.error().message);
  fs::path ops = fs::path(KOPE_SOURCE_DIR) / "tests" / "ops";
  auto vadd = spec::load_op(ops / "elementwise" / "vadd");
  auto mm = spec::load_op(ops / "matmul" / "matmul_small");
  if (!vadd || !mm) return die("cannot load the test ops under " + ops.string());
  std::printf("kope_eval_bench on %s, %d cores, cache %s\n\n", hw->target.str().c_str(), hw->cores, util::cache_dir().c_str());

  eval::EvalOptions verify_only;
  verify_only.time = false;
  std::vector<double> cold, warm, cold_compile;
  for (int r = 0; r < repeats; ++r) {
    std::string source = nonce() + k_vadd;
    auto t0 = Clock::now();
    auto a = (*ev)->evaluate(*vadd, source, verify_only);
    auto t1 = Clock::now();
    auto b = (*ev)->evaluate(*vadd, source, verify_only);
    auto t2 = Clock::now();
    if (!a || !b) return die(!a ? a.error().message : b.error().message);
    if (a->verdict != eval::Verdict::correct || b->verdict != eval::Verdict::correct || !b->compile_cached) {
      return die("unexpected verdict: " + a->message + " / " + b->message);
    }
    cold.push_back(std::chrono::duration<double>(t1 - t0).count());
    warm.push_back(std::chrono::duration<double>(t2 - t1).count());
    cold_compile.push_back(a->compile_seconds);
  }
  Spread c = spread(cold), w = spread(warm), cc = spread(cold_compile);
  std::printf("verdict, elementwise (vadd, 6 cases), fresh compile:   median %.3f s  [%.3f .. %.3f]  (compile %.3f s)  target <= 1.0 s\n",
              c.median, c.min, c.max, cc.median);
  std::printf("verdict, elementwise (vadd, 6 cases), compile cached:  median %.3f s  [%.3f .. %.3f]  target <= 0.2 s\n", w.median,
              w.min, w.max);

  // The share of a verdict no evaluator change can remove: generating the evaluation's fresh
  // inputs (two data sets per case, spec::generate_inputs).
  {
    std::vector<double> gen;
    for (int r = 0; r < std::min(repeats, 3); ++r) {
      auto t0 = Clock::now();
      for (const auto& vc : vadd->cases) {
        for (int set = 0; set < 2; ++set) {
          std::vector<std::vector<uint8_t>> bufs;
          std::vector<void*> ptrs;
          for (const auto& t : vadd->inputs) {
            bufs.emplace_back(vadd->byte_size(t, vc) + 64);
            ptrs.push_back(bufs.back().data());
          }
          spec::generate_inputs(*vadd, vc, 1234 + static_cast<uint64_t>(r * 2 + set), ptrs.data());
        }
      }
      gen.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
    }
    Spread g = spread(gen);
    std::printf("  of which generating the fresh inputs (2 sets per case):    median %.3f s  [%.3f .. %.3f]\n", g.median, g.min, g.max);
  }

  eval::EvalOptions timed;
  timed.max_seconds_per_case = max_seconds;
  timed.target_ci = 0.02;
  for (const auto* op : {&*vadd, &*mm}) {
    std::string source = op == &*vadd ? std::string(k_vadd) : *util::read_file(op->reference_path);
    // First run fills the baseline cache; the second is what an agent iteration costs.
    auto first = (*ev)->evaluate(*op, source, timed);
    auto t0 = Clock::now();
    auto r = (*ev)->evaluate(*op, source, timed);
    double total = std::chrono::duration<double>(Clock::now() - t0).count();
    if (!first || !r) return die(!first ? first.error().message : r.error().message);
    if (r->verdict != eval::Verdict::correct) return die(r->message);
    for (const auto& t : r->timing) {
      std::printf("timing, %s (%s, %s): %.4g us ±%.2f%% (95%% CI half-width) from %zu batches of %lld calls; "
                  "reference %.4g us ±%.2f%%; whole evaluation %.2f s\n",
                  op->name.c_str(), op == &*vadd ? "memory-bound" : "compute-bound", t.label.c_str(), t.median_us,
                  100 * t.ci95_us / t.median_us, t.samples_us.size(), static_cast<long long>(t.calls_per_batch), t.reference_us,
                  100 * t.reference_ci95_us / t.reference_us, total);
    }
  }
  return 0;
}
