// `kope eval` (judge one kernel) and `kope bench` (time the references and library baselines).
#include <cstdio>
#include <functional>

#include <nlohmann/json.hpp>

#include "cli.h"
#include "isa_option.h"
#include "eval/registry.h"
#include "kope/eval.h"
#include "kope/hw.h"
#include "kope/spec.h"
#include "util/fs.h"
#include "util/strings.h"

namespace kope::cli {

namespace {

using nlohmann::json;

void progress(std::string_view line) {
  std::fprintf(stderr, "%.*s\n", static_cast<int>(line.size()), line.data());
  std::fflush(stderr);
}

Result<HardwareProfile> profile() {
  if (!util::read_file(util::cache_dir() / "hw.json")) progress("kope: measuring this machine's roofline once (kope hw)...");
  return load_hardware_profile();
}

std::string us(double v) {
  if (v <= 0) return "-";
  if (v >= 1e6) return fmt::format("{:.3g} s", v / 1e6);
  if (v >= 1e3) return fmt::format("{:.4g} ms", v / 1e3);
  return fmt::format("{:.4g} µs", v);
}

std::string with_ci(double median, double ci) {
  if (median <= 0) return "-";
  return fmt::format("{} ±{:.1f}%", us(median), 100.0 * ci / median);
}

std::string percent(double f) { return f > 0 ? fmt::format("{:.0f}%", 100 * f) : "-"; }

// Pads to a display width, counting UTF-8 code points (µ, ±).
std::string pad(std::string_view s, size_t width, bool right = false) {
  size_t cps = 0;
  for (unsigned char c : s) cps += (c & 0xC0) != 0x80;
  std::string fill(cps < width ? width - cps : 0, ' ');
  return right ? fill + std::string(s) : std::string(s) + fill;
}

// The per-configuration table of --library-config best.
std::string selection_text(const eval::LibrarySelection& s, const spec::OpSpec& op) {
  std::string out = fmt::format("library configurations of {} ({}{}); per timed case: median ±95% CI, GFLOP/s\n", s.op, s.library,
                                s.cached ? fmt::format(", cached from {}", s.measured_at) : std::string());
  for (size_t i = 0; i < s.trials.size(); ++i) {
    const auto& t = s.trials[i];
    std::string figures;
    if (t.correct) {
      std::vector<std::string> parts;
      for (size_t k = 0; k < t.median_us.size(); ++k) {
        parts.push_back(fmt::format("{} ({:.1f} GFLOP/s)", with_ci(t.median_us[k], k < t.ci95_us.size() ? t.ci95_us[k] : 0),
                                    k < t.gflops.size() ? t.gflops[k] : 0.0));
      }
      figures = parts.empty() ? std::string("correct (no timed cases)") : util::join(parts, "; ");
    } else {
      figures = "not used: " + t.problem;
    }
    out += fmt::format("  {} {}{}{}\n", static_cast<int>(i) == s.best ? "*" : " ", pad(t.setting, 24),
                       pad(t.config.core.empty() ? "-" : t.config.core, 16), figures);
  }
  (void)op;
  out += s.best >= 0 ? fmt::format("  * kept: {}\n", s.trials[static_cast<size_t>(s.best)].setting)
                     : std::string("  no configuration was correct on every case: the environment's is used\n");
  return out;
}

std::string eval_text(const eval::EvalResult& r, const spec::OpSpec& op, int threads) {
  std::string out;
  out += fmt::format("kope eval: {} ({}) on {}, {} thread{}, seed {}\n", r.op, op.dir.string(), r.target, threads, threads == 1 ? "" : "s", r.seed);
  out += fmt::format("verdict: {} — {}\n", eval::verdict_name(r.verdict), r.message);
  if (!r.diagnostics.empty()) {
    out += "\n";
    for (auto& line : util::split(util::trim(r.diagnostics), '\n')) out += "  " + line + "\n";
  }
  if (!r.cases.empty()) {
    out += fmt::format("\n{}{}{}{}\n", pad("case", 6), pad("shape", 28), pad("check", 8), "max abs err / first mismatch");
    for (const auto& c : r.cases) {
      std::string detail = c.ok ? fmt::format("{:.3g}", c.max_abs_err) : c.first_mismatch;
      out += fmt::format("{}{}{}{}\n", pad(std::to_string(c.case_index), 6), pad(c.label, 28), pad(c.ok ? "ok" : "FAIL", 8), detail);
    }
  }
  if (!r.timing.empty()) {
    out += fmt::format("\ntiming per call (median ±95% CI half-width):\n{}{}{}{}{}{}{}{}\n", pad("case", 6), pad("shape", 24),
                       pad("kernel", 20), pad("reference", 20), pad("library", 20), pad("roofline", 12), pad("of roofline", 13), "speedup");
    for (const auto& t : r.timing) {
      std::string lib = t.library_us ? with_ci(*t.library_us, t.library_ci95_us.value_or(0)) : "-";
      std::string speed = fmt::format("{:.2f}x ref", t.reference_us / t.median_us);
      if (t.library_us) {
        speed += fmt::format(", {:.2f}x lib{}", *t.library_us / t.median_us, r.library_config ? r.library_config->forced_note() : std::string());
      }
      if (t.beyond_roofline) speed += " (beyond the roofline: a bug of kope's model)";
      out += fmt::format("{}{}{}{}{}{}{}{}\n", pad(std::to_string(t.case_index), 6), pad(t.label, 24), pad(with_ci(t.median_us, t.ci95_us), 20),
                         pad(with_ci(t.reference_us, t.reference_ci95_us), 20), pad(lib, 20), pad(us(t.roofline_us), 12),
                         pad(percent(t.fraction_of_roofline), 13), speed);
      if (t.disturbed) out += fmt::format("      ^ disturbed by other load (waited for a CPU {:.0f}% of the time): not a clean measurement\n", 100 * t.contention);
    }
  }
  if (r.library_config) out += "library: " + r.library_config->describe() + "\n";
  if (r.incumbent && r.incumbent->decision != eval::IncumbentDecision::unavailable) {
    const eval::IncumbentComparison& c = *r.incumbent;
    out += fmt::format("\nvs the incumbent (alternating batches, {:.0f}% interval): {}, {:.3g}x [{:.3g}, {}], {} pairs in {:.1f} s{}\n",
                       100 * (1 - c.alpha), eval::incumbent_decision_name(c.decision), c.ratio, c.lower,
                       c.upper ? fmt::format("{:.3g}", *c.upper) : "inf", c.pairs, c.seconds,
                       c.full_timing ? "" : " (timings above: the comparison's early figures)");
    for (const auto& k : c.cases) {
      out += fmt::format("  case {}: {:.3g}x [{:.3g}, {}], {} of {} pairs, {} looks{}\n", k.case_index, k.ratio, k.lower,
                         k.upper ? fmt::format("{:.3g}", *k.upper) : "inf", k.pairs, k.pairs_total, k.looks,
                         eval::contention_disturbed(k.contention) ? fmt::format(", disturbed ({:.0f}% contention)", 100 * k.contention) : "");
    }
  }
  out += fmt::format("\ncompile {:.2f} s{}, total {:.2f} s\n", r.compile_seconds, r.compile_cached ? " (cached)" : "", r.wall_seconds);
  return out;
}

// --backend's help: every backend of the table, with what its row says of it.
std::string backend_help() {
  std::vector<std::string> parts;
  for (const auto& r : eval::backend_rows()) {
    parts.push_back(r.cli_help.empty() ? std::string(r.name) : fmt::format("{} ({})", r.name, r.cli_help));
  }
  return util::join(parts, ", ") + "; see `kope backends`";
}

void register_eval_command(CLI::App& app, Action& action) {
  auto* cmd = app.add_subcommand("eval", "Judge a kernel: sandboxed compile, verification on every case, timing");
  struct Options {
    std::string kernel;
    std::string op;
    bool json = false;
    bool no_time = false;
    std::optional<uint64_t> seed;
    double max_seconds = 10;
    double target_ci = 0.02;
    std::vector<std::string> flags;
    int threads = 0;
    bool refresh = false;
    std::string backend = std::string(eval::default_backend_name());
    std::string library_config = "environment";
    std::string incumbent;
    double margin = 0.01;
    double comparison_seconds = eval::EvalOptions{}.comparison_seconds;
    std::string suite;
    std::string isa;
  };
  auto o = std::make_shared<Options>();
  cmd->add_option("kernel", o->kernel, "The kernel's source file (C++, OpenCL C or CUDA, per --backend)")->required();
  cmd->add_option("--incumbent", o->incumbent,
                  "A kernel to beat: time both in alternating batches and stop as soon as \"faster or not\" is clear; only a faster "
                  "kernel is timed to the full CI");
  cmd->add_option("--margin", o->margin, "With --incumbent: faster means more than 1 + this times the incumbent's speed (0.01)")
      ->check(CLI::Range(0.0, 1.0));
  cmd->add_option("--comparison-seconds", o->comparison_seconds,
                  "With --incumbent: the comparison's budget over all timed cases; still undecided then, the incumbent stays "
                  "(0: up to --max-seconds per case)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  cmd->add_option("--backend", o->backend, backend_help())->check(CLI::IsMember(eval::backend_name_list()));
  cmd->add_option("--op", o->op, "Operator name (from the suite) or path to an op folder")->required();
  cmd->add_option("--suite", o->suite, "Suite root --op's name is looked up in (default: the built-in ops/)");
  cmd->add_flag("--json", o->json, "Print the result as JSON");
  cmd->add_flag("--no-time", o->no_time, "Verify only; do not time");
  cmd->add_option("--seed", o->seed, "Data seed (default: fresh)");
  cmd->add_option("--max-seconds", o->max_seconds, "Timing cap per timed case, seconds")->check(CLI::PositiveNumber);
  cmd->add_option("--target-ci", o->target_ci, "Stop timing when the 95% CI is within this fraction of the median")->check(CLI::Range(0.001, 0.5));
  add_isa_option(cmd, o->isa);
  cmd->add_option("--flag", o->flags, "Extra compile flag (-O, -f, -m, -D, -U, -W, -g; OpenCL: -D and -cl-*); repeatable")->allow_extra_args(false);
  cmd->add_option("--threads", o->threads, "OpenMP threads for the kernel (default: all cores)")->check(CLI::NonNegativeNumber);
  cmd->add_flag("--refresh-baselines", o->refresh, "Time the reference and library again instead of using cached times");
  cmd->add_option("--library-config", o->library_config,
                  "Library baseline configuration: environment (as the environment sets it) or best (the fastest correct one "
                  "this CPU runs, measured once and cached)")
      ->check(CLI::IsMember({"environment", "best"}));
  cmd->callback([&action, o] {
    action = [o]() -> Result<int> {
      KOPE_TRY(apply_isa(o->isa));
      KOPE_ASSIGN(std::string source, util::read_file(o->kernel));
      KOPE_ASSIGN(spec::OpSpec op, spec::resolve_op(o->op, o->suite.empty() ? spec::default_ops_dir() : spec::fs::path(o->suite)));
      KOPE_ASSIGN(HardwareProfile hw, profile());
      eval::EvaluatorOptions co;
      co.cpu.threads = o->threads;
      co.refresh_baselines = o->refresh;
      co.library_config = o->library_config;
      KOPE_ASSIGN(auto evaluator, eval::make_evaluator(o->backend, hw, co));
      eval::EvalOptions eo;
      eo.seed = o->seed;
      eo.time = !o->no_time;
      eo.max_seconds_per_case = o->max_seconds;
      eo.target_ci = o->target_ci;
      eo.extra_flags = o->flags;
      if (!o->incumbent.empty()) {
        KOPE_ASSIGN(std::string incumbent, util::read_file(o->incumbent));
        eo.incumbent_source = std::move(incumbent);
        eo.incumbent_margin = o->margin;
        eo.comparison_seconds = o->comparison_seconds;
      }
      KOPE_ASSIGN(eval::EvalResult r, evaluator->evaluate(op, source, eo));
      if (o->json) {
        print(r.to_json() + "\n");
      } else {
        print(eval_text(r, op, o->threads > 0 ? o->threads : hw.cores));
      }
      return r.verdict == eval::Verdict::correct ? 0 : 1;
    };
  });
}

struct BenchOptions {
  std::vector<std::string> selectors;
  bool all = false;
  bool json = false;
  bool refresh = false;
  double max_seconds = 3;
  double target_ci = 0.02;
  std::string library_config = "environment";
  std::string suite;
  std::string backend = "cpu";
  std::string isa;
};

// What `kope bench` collects over the ops: the JSON rows, the table, the library configurations.
struct BenchOutput {
  json rows = json::array();
  json selections = json::array();
  std::string table, configs;
  int failures = 0;
};

json selection_json(const eval::LibrarySelection& s, const spec::OpSpec& op) {
  json trials = json::array();
  for (const auto& t : s.trials) {
    trials.push_back({{"setting", t.setting}, {"core", t.config.core}, {"threads", t.config.threads}, {"correct", t.correct},
                      {"problem", t.problem}, {"median_us", t.median_us}, {"ci95_us", t.ci95_us}, {"gflops", t.gflops}});
  }
  return {{"op", op.name},
          {"library", s.library},
          {"best", s.best >= 0 ? json(s.trials[static_cast<size_t>(s.best)].setting) : json(nullptr)},
          {"cached", s.cached},
          {"trials", trials}};
}

// --library-config best: the fastest correct library configuration for `op`, measured (or cached).
void bench_library_selection(const HardwareProfile& hw, const spec::OpSpec& op, const eval::EvaluatorOptions& co,
                             const eval::EvalOptions& eo, const std::function<void(std::string_view)>& report,
                             BenchOutput& out) {
  auto chosen = eval::select_library_config(hw, op, co, eo, report);
  if (!chosen) {
    ++out.failures;
    progress(fmt::format("kope bench: {}: {}", op.name, chosen.error().message));
  } else if (*chosen) {
    out.configs += selection_text(**chosen, op);
    out.selections.push_back(selection_json(**chosen, op));
  }
}

// One timed case's table line and JSON row.
void add_baseline_case(const spec::OpSpec& op, const eval::CaseBaselines& cb, BenchOutput& out) {
  double ref_frac = cb.reference.median_us > 0 ? cb.roofline_us / cb.reference.median_us : 0;
  double lib_frac = cb.library && cb.library->median_us > 0 ? cb.roofline_us / cb.library->median_us : 0;
  std::string lib = cb.library ? with_ci(cb.library->median_us, cb.library->ci95_us)
                               : (cb.library_problem.empty() ? std::string("-") : std::string("failed"));
  std::string vs = cb.library ? fmt::format("{:.2f}x{}", cb.reference.median_us / cb.library->median_us,
                                            cb.library_config ? cb.library_config->forced_note() : std::string())
                              : "-";
  out.table += fmt::format("{}{}{}{}{}{}{}{}\n", pad(op.name, 24), pad(cb.label, 26), pad(with_ci(cb.reference.median_us, cb.reference.ci95_us), 20),
                           pad(lib, 20), pad(us(cb.roofline_us), 12), pad(percent(ref_frac), 10), pad(percent(lib_frac), 10), vs);
  json row{{"op", op.name},
           {"case", cb.case_index},
           {"label", cb.label},
           {"flops", cb.flops},
           {"bytes", cb.bytes},
           {"reference_us", cb.reference.median_us},
           {"reference_ci95_us", cb.reference.ci95_us},
           {"reference_cached", cb.reference.cached},
           {"library_us", cb.library ? json(cb.library->median_us) : json(nullptr)},
           {"library_ci95_us", cb.library ? json(cb.library->ci95_us) : json(nullptr)},
           {"library_problem", cb.library_problem.empty() ? json(nullptr) : json(cb.library_problem)},
           {"roofline_us", cb.roofline_us},
           {"roofline_bound", std::string(cb.roof.bound())},
           {"roofline_gbps", cb.roof.gbps},
           {"roofline_gflops", cb.roof.gflops},
           {"reference_fraction_of_roofline", ref_frac},
           {"library_fraction_of_roofline", cb.library ? json(lib_frac) : json(nullptr)},
           {"library_config", cb.library_config ? json(cb.library_config->describe()) : json(nullptr)},
           {"library_forced", cb.library_config && cb.library_config->forced}};
  out.rows.push_back(row);
  if (cb.library_config) {
    std::string line = fmt::format("{}: library {}", op.name, cb.library_config->describe());
    if (out.configs.find(line) == std::string::npos) out.configs += line + "\n";
  }
  if (!cb.library_problem.empty()) progress(fmt::format("kope bench: {} {}: {}", op.name, cb.label, cb.library_problem));
}

Result<int> run_bench(const BenchOptions& o) {
  if (o.selectors.empty() && !o.all) return fail(ErrorKind::usage, "name the ops to bench, or pass --all for the whole suite");
  if (o.backend != "cpu" && o.library_config == "best") {
    return fail(ErrorKind::usage, "--library-config best chooses among CPU library configurations; the {} backend's baselines have none", o.backend);
  }
  std::vector<std::string> sel = o.all ? std::vector<std::string>{"all"} : o.selectors;
  KOPE_ASSIGN(auto ops, spec::select_ops(sel, o.suite.empty() ? spec::default_ops_dir() : spec::fs::path(o.suite)));
  KOPE_ASSIGN(HardwareProfile hw, profile());
  eval::EvaluatorOptions co;
  co.refresh_baselines = o.refresh;
  co.library_config = o.library_config;
  eval::EvalOptions eo;
  eo.max_seconds_per_case = o.max_seconds;
  eo.target_ci = o.target_ci;
  BenchOutput out;
  out.table += fmt::format("{}{}{}{}{}{}{}{}\n", pad("op", 24), pad("case", 26), pad("reference", 20), pad("library", 20), pad("roofline", 12),
                           pad("ref/roof", 10), pad("lib/roof", 10), "lib vs ref");
  size_t op_index = 0;
  for (const auto& op : ops) {
    ++op_index;
    auto report = [&](std::string_view line) { progress(fmt::format("[{}/{}] {}", op_index, ops.size(), line)); };
    if (o.library_config == "best" && op.library_path) bench_library_selection(hw, op, co, eo, report, out);
    auto r = eval::measure_baselines(o.backend, hw, op, co, eo, report);
    if (!r) {
      ++out.failures;
      progress(fmt::format("kope bench: {}: {}", op.name, r.error().message));
      out.table += fmt::format("{}{}\n", pad(op.name, 24), "error: " + std::string(util::trim(util::split(r.error().message, '\n')[0])));
      out.rows.push_back({{"op", op.name}, {"error", r.error().message}});
      continue;
    }
    for (const auto& cb : *r) add_baseline_case(op, cb, out);
  }
  if (o.backend != "cpu") {
    // A device backend: its baselines ran on the device, against the device's roofline.
    KOPE_ASSIGN(HardwareProfile device, eval::backend_profile(o.backend, hw, co));
    if (o.json) {
      print(json{{"backend", o.backend}, {"target", device.target.str()}, {"device", device.cpu_model}, {"rows", out.rows}}.dump(2) + "\n");
    } else {
      print(fmt::format("kope bench --backend {} on {} ({}; roofline: FP32 {:.0f} GFLOP/s, FP64 {:.0f} GFLOP/s, {:.0f} GB/s at the "
                        "largest working set); the reference runs on the CPU, the library is the device's baseline; times per "
                        "call, median ±95% CI (the library's by the device clock)\n\n",
                        o.backend, device.target.str(), device.cpu_model, device.peak_gflops, device.peak_gflops_for(true), device.peak_gbps) +
            out.table + (out.configs.empty() ? std::string() : "\n" + out.configs));
    }
    return out.failures == 0 ? 0 : 1;
  }
  if (o.json) {
    json doc{{"target", hw.target.str()}, {"cores", hw.cores}, {"rows", out.rows}};
    if (o.library_config == "best") doc["library_selections"] = out.selections;
    print(doc.dump(2) + "\n");
  } else {
    print(fmt::format("kope bench on {} ({} cores; roofline: FP32 {:.1f} GFLOP/s, FP64 {:.1f} GFLOP/s, {:.1f} GB/s DRAM, the "
                      "bandwidth curve by working set below it); times per call, median ±95% CI\n\n",
                      hw.target.str(), hw.cores, hw.peak_gflops, hw.peak_gflops_for(true), hw.peak_gbps) +
          out.table + (out.configs.empty() ? std::string() : "\n" + out.configs));
  }
  return out.failures == 0 ? 0 : 1;
}

void register_bench_command(CLI::App& app, Action& action) {
  auto* cmd = app.add_subcommand("bench", "Time the references and library baselines of ops against the roofline");
  auto o = std::make_shared<BenchOptions>();
  cmd->add_option("ops", o->selectors, "Op names, globs, categories (category:x), levels (level:n) or op folders");
  cmd->add_flag("--all", o->all, "The whole suite");
  cmd->add_option("--suite", o->suite, "Suite root the selectors apply to (default: the built-in ops/)");
  cmd->add_option("--backend", o->backend,
                  "Whose baselines: cpu (the op's library.cpp) or cuda (the op's GPU vendor baseline gpu_library.cu, run and "
                  "timed on the GPU; the reference stays the CPU's)")
      ->check(CLI::IsMember({"cpu", "cuda"}));
  cmd->add_flag("--json", o->json, "Print JSON");
  cmd->add_flag("--refresh", o->refresh, "Measure again instead of using cached times");
  cmd->add_option("--max-seconds", o->max_seconds, "Timing cap per case and kernel, seconds")->check(CLI::PositiveNumber);
  cmd->add_option("--target-ci", o->target_ci, "Stop timing when the 95% CI is within this fraction of the median")->check(CLI::Range(0.001, 0.5));
  cmd->add_option("--library-config", o->library_config,
                  "Library baseline configuration: environment (as the environment sets it) or best (measure the "
                  "configurations this CPU runs, verify each, keep the fastest correct one; cached)")
      ->check(CLI::IsMember({"environment", "best"}));
  add_isa_option(cmd, o->isa);
  cmd->callback([&action, o] {
    action = [o]() -> Result<int> {
      KOPE_TRY(apply_isa(o->isa));
      return run_bench(*o);
    };
  });
}

}  // namespace

void register_eval(CLI::App& app, Action& action) {
  register_eval_command(app, action);
  register_bench_command(app, action);
}

}  // namespace kope::cli
