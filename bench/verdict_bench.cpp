// kope_verdict_bench: fast verdicts against full timing on a recorded sequence of candidates.
//
//   build/bench/kope_verdict_bench [--corpus DIR] [--max-seconds S] [--target-ci F] [--ops a,b,...]
//
// Replays the kernels a real model wrote through `kope run` (default corpus:
// ../shared/corpus/real-model, `<op>/<attempt>.cpp` in attempt order) the way the agent judges
// them: each candidate against the op's current incumbent, in two modes side by side
// (candidate by candidate, so both see the same machine conditions):
//   full — the candidate timed to the full CI with the baselines, then compared with the
//          incumbent's recorded timings (geomean of incumbent / candidate > 1 + 0.01);
//   fast — the candidate timed against the incumbent in alternating batches until the
//          sequential rule decides (EvalOptions::incumbent_source); only a faster one is timed
//          to the full CI.
// Each mode keeps its own incumbent. Before measuring, every kernel is compiled once and every
// op's baselines are timed once (both then come from the caches in both modes), and, as in
// `kope run`, every evaluation of an op uses one data seed, whose data the evaluator keeps
// between evaluations (made once before measuring), so the figures are the time a verdict
// takes in a run beyond compiling. Prints one line per evaluation, then the median
// wall time per evaluation with min/max per mode (all evaluations, and those against an
// incumbent), and whether the incumbent decisions agree, also counted over the steps where
// full timing's own confidence intervals separate the kernels by the margin (on a near tie
// full timing's decision is the noise's). On a shared machine the numbers are
// noisy: read the spread.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "kope/eval.h"
#include "kope/hw.h"
#include "kope/spec.h"
#include "util/fs.h"
#include "util/hash.h"
#include "util/strings.h"

using namespace kope;
namespace fs = std::filesystem;

namespace {

struct Spread {
  double median = 0, min = 0, max = 0;
  size_t n = 0;
};

Spread spread(std::vector<double> v) {
  Spread s;
  s.n = v.size();
  if (v.empty()) return s;
  std::sort(v.begin(), v.end());
  s.min = v.front();
  s.max = v.back();
  s.median = v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
  return s;
}

int die(const std::string& m) {
  std::fprintf(stderr, "kope_verdict_bench: %s\n", m.c_str());
  return 2;
}

struct Incumbent {
  std::string name;
  std::string source;
  std::vector<eval::CaseTiming> timing;
};

// Full timing's comparison of `after` with `before`: the geometric mean of the per-case ratios
// before / after, and its interval, each case's log ratio widened by the sum of both timings'
// relative 95% half-widths (conservative).
struct Speed {
  double ratio = 1, lower = 1, upper = 1;
};

std::optional<Speed> relative_speed_interval(const std::vector<eval::CaseTiming>& before, const std::vector<eval::CaseTiming>& after) {
  double acc = 0, width = 0;
  int n = 0;
  for (const auto& b : before) {
    for (const auto& a : after) {
      if (a.case_index != b.case_index || a.median_us <= 0 || b.median_us <= 0) continue;
      acc += std::log(b.median_us / a.median_us);
      width += b.ci95_us / b.median_us + a.ci95_us / a.median_us;
      ++n;
    }
  }
  if (n == 0) return std::nullopt;
  return Speed{std::exp(acc / n), std::exp((acc - width) / n), std::exp((acc + width) / n)};
}

std::optional<double> relative_speed(const std::vector<eval::CaseTiming>& before, const std::vector<eval::CaseTiming>& after) {
  auto s = relative_speed_interval(before, after);
  return s ? std::optional<double>(s->ratio) : std::nullopt;
}

// Whether full timing's own interval separates the two kernels by the margin. A step whose
// interval contains 1 + margin is a near tie that full timing itself cannot call: either
// decision is consistent with it.
bool full_timing_is_clear(const std::vector<eval::CaseTiming>& before, const std::vector<eval::CaseTiming>& after, double margin) {
  auto s = relative_speed_interval(before, after);
  return s && (s->lower > 1 + margin || s->upper < 1 + margin);
}

// One op's data seed for the whole replay (random per bench run, as the agent's per run).
uint64_t data_seed(const std::string& op) {
  static const uint64_t run = std::random_device{}() * 0x9e3779b97f4a7c15ULL ^ std::random_device{}();
  return util::fnv1a64(fmt::format("{}/{}", run, op));
}

}  // namespace

int main(int argc, char** argv) {
  fs::path corpus = fs::path(KOPE_SOURCE_DIR) / ".." / ".." / "shared" / "corpus" / "real-model";
  if (!fs::exists(corpus)) corpus = "/work/shared/corpus/real-model";
  double max_seconds = 10, target_ci = 0.02;
  std::vector<std::string> ops = {"sgemm", "softmax", "conv2d_3x3", "layernorm"};
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string k = argv[i];
    if (k == "--corpus") corpus = argv[i + 1];
    else if (k == "--max-seconds") max_seconds = std::atof(argv[i + 1]);
    else if (k == "--target-ci") target_ci = std::atof(argv[i + 1]);
    else if (k == "--ops") ops = util::split(argv[i + 1], ',');
    else return die("unknown option " + k);
  }
  auto hw = load_hardware_profile();
  if (!hw) return die(hw.error().message);
  auto ev = eval::make_cpu_evaluator(*hw);
  if (!ev) return die(ev.error().message);
  const double margin = 0.01;

  struct Step {
    std::string op, kernel;
    spec::OpSpec spec;
    std::string source;
  };
  std::vector<Step> steps;
  for (const auto& name : ops) {
    auto op = spec::resolve_op(name);
    if (!op) return die(op.error().message);
    for (int k = 1;; ++k) {
      fs::path p = corpus / name / (std::to_string(k) + ".cpp");
      auto src = util::read_file(p);
      if (!src) break;
      steps.push_back({name, std::to_string(k) + ".cpp", *op, *src});
    }
  }
  if (steps.empty()) return die("no kernels under " + corpus.string());
  std::printf("kope_verdict_bench: %zu candidates from %s, %d cores, cap %.3g s per case, target CI ±%.3g%%\n", steps.size(),
              corpus.string().c_str(), hw->cores, max_seconds, 100 * target_ci);

  // Warm the caches both modes share: every compile and every op's baselines.
  {
    eval::EvalOptions verify;
    verify.time = false;
    for (const auto& s : steps) {
      auto r = (*ev)->evaluate(s.spec, s.source, verify);
      if (!r) return die(r.error().message);
    }
    eval::EvalOptions timing;
    timing.max_seconds_per_case = max_seconds;
    timing.target_ci = target_ci;
    std::string last;
    for (const auto& s : steps) {
      if (s.op == last) continue;
      last = s.op;
      auto b = eval::measure_cpu_baselines(*hw, s.spec, {}, timing);
      if (!b) return die(b.error().message);
      // Like `kope run`, every evaluation of an op's attempts uses one data seed, and the
      // evaluator keeps that data between them: a short timed evaluation makes it.
      eval::EvalOptions data = timing;
      data.seed = data_seed(s.op);
      data.max_seconds_per_case = 0.2;
      auto r = (*ev)->evaluate(s.spec, s.source, data);
      if (!r) return die(r.error().message);
    }
    std::printf("caches warm (compiles, baselines, each op's data)\n\n");
  }

  std::printf("%-11s %-6s %-13s %9s %9s  %-27s %-22s %s\n", "op", "kernel", "verdict", "full s", "fast s", "fast decision",
              "ratio [interval]", "replace? full / fast");
  std::map<std::string, std::optional<Incumbent>> inc_full, inc_fast;
  std::vector<double> wall_full, wall_fast, wall_full_vs, wall_fast_vs;
  int agree = 0, compared = 0, diverged = 0, clear = 0, clear_agree = 0;
  std::vector<std::string> disagreements;
  for (const auto& s : steps) {
    eval::EvalOptions full;
    full.max_seconds_per_case = max_seconds;
    full.target_ci = target_ci;
    full.seed = data_seed(s.op);
    eval::EvalOptions fast = full;
    auto& fi = inc_full[s.op];
    auto& qi = inc_fast[s.op];
    if (qi) {
      fast.incumbent_source = qi->source;
      fast.incumbent_margin = margin;
    }
    auto rf = (*ev)->evaluate(s.spec, s.source, full);
    if (!rf) return die(rf.error().message);
    auto rq = (*ev)->evaluate(s.spec, s.source, fast);
    if (!rq) return die(rq.error().message);
    wall_full.push_back(rf->wall_seconds);
    wall_fast.push_back(rq->wall_seconds);
    if (fi) wall_full_vs.push_back(rf->wall_seconds);
    if (qi) wall_fast_vs.push_back(rq->wall_seconds);

    bool full_ok = rf->verdict == eval::Verdict::correct, fast_ok = rq->verdict == eval::Verdict::correct;
    bool replace_full = false, replace_fast = false;
    std::optional<double> full_ratio;
    if (full_ok) {
      if (fi) full_ratio = relative_speed(fi->timing, rf->timing);
      replace_full = !fi || (full_ratio && *full_ratio > 1 + margin);
    }
    std::string decision = "-", ratio = "-";
    if (fast_ok) {
      if (!qi) {
        replace_fast = true;
        decision = "(no incumbent)";
      } else if (rq->incumbent && rq->incumbent->decision != eval::IncumbentDecision::unavailable) {
        const auto& c = *rq->incumbent;
        replace_fast = c.decision == eval::IncumbentDecision::faster;
        decision = std::string(eval::incumbent_decision_name(c.decision)) + (c.disturbed ? "*" : "");
        ratio = fmt::format("{:.3f} [{:.3f}, {}]", c.ratio, c.lower, c.upper ? fmt::format("{:.3f}", *c.upper) : "inf");
      } else {
        auto r = relative_speed(qi->timing, rq->timing);
        replace_fast = r && *r > 1 + margin;
        decision = "unavailable";
      }
    }
    bool same_incumbent = (!fi && !qi) || (fi && qi && fi->name == qi->name);
    if (fi || qi) {
      if (same_incumbent) {
        ++compared;
        bool is_clear = !full_ok || !fi || full_timing_is_clear(fi->timing, rf->timing, margin);
        clear += is_clear;
        if (replace_full == replace_fast) {
          ++agree;
          clear_agree += is_clear;
        } else {
          disagreements.push_back(fmt::format("{} {}: full {} ({}{}), fast {} ({})", s.op, s.kernel, replace_full ? "replaces" : "keeps",
                                              full_ratio ? fmt::format("{:.3f}x", *full_ratio) : "-",
                                              is_clear ? "" : ", a near tie by full timing's own CIs", replace_fast ? "replaces" : "keeps",
                                              ratio));
        }
      } else {
        ++diverged;
      }
    }
    std::printf("%-11s %-6s %-13s %9.1f %9.1f  %-27s %-22s %s / %s%s\n", s.op.c_str(), s.kernel.c_str(),
                std::string(eval::verdict_name(rq->verdict)).c_str(), rf->wall_seconds, rq->wall_seconds, decision.c_str(), ratio.c_str(),
                replace_full ? "yes" : "no", replace_fast ? "yes" : "no",
                full_ratio ? fmt::format("  (full: {:.3f}x vs recorded)", *full_ratio).c_str() : "");
    std::fflush(stdout);
    if (replace_full) fi = Incumbent{s.kernel, s.source, rf->timing};
    if (replace_fast) qi = Incumbent{s.kernel, s.source, rq->timing};
  }
  auto line = [](const char* what, const Spread& f, const Spread& q) {
    std::printf("%-40s full %6.1f s [%5.1f, %5.1f]   fast %6.1f s [%5.1f, %5.1f]   (n = %zu)\n", what, f.median, f.min, f.max, q.median,
                q.min, q.max, q.n);
  };
  std::printf("\nwall time per evaluation, median [min, max]:\n");
  line("all evaluations", spread(wall_full), spread(wall_fast));
  line("against an incumbent", spread(wall_full_vs), spread(wall_fast_vs));
  std::printf("\nincumbent decisions: %d of %d agree (same incumbent in both modes)%s\n", agree, compared,
              diverged ? fmt::format("; {} steps had different incumbents", diverged).c_str() : "");
  std::printf("  where full timing's own CIs separate the two kernels by the margin: %d of %d agree; the other %d are near ties "
              "full timing cannot call\n",
              clear_agree, clear, compared - clear);
  for (const auto& d : disagreements) std::printf("  differs: %s\n", d.c_str());
  std::printf("* = the comparison was disturbed by other load\n");
  return 0;
}
