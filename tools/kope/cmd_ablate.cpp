// `kope ablate`: the paper's context ablation as one command (docs/design.md §5, §6).
//
//   kope ablate --train OPS --test OPS [--modes none,passive,active,random] [--iterations N]
//               [--dir DIR] [--seed N] [--token-budget N] [--window N] [--jobs N]
//               [--llm PROFILE] [--policy llm|replay] [--backend cpu] [--suite DIR]
//               [--run-arg ARG]... [--resamples N] [--phase NAME]... [--side-by-side [--side-by-side-seconds S]]
//               [--json]
//
// Phase "train": one `kope run` on the training operators builds a memory of its own
// (DIR/memory/train.db, never the user's; no starter experience). Or, with --from-memory FILE
// instead of --train, DIR/memory/train.db is FILE's experience: an export (plain or .zst, such
// as the shipped starter) imported, or a memory database merged into a fresh one (FILE is never
// modified). Then, for each mode, a copy
// of that memory (DIR/memory/<mode>.db) and one `kope run --context <mode>` on the test
// operators, every phase with the same seed, iterations, token budget and window
// (compute-matched; each run's results.json records them). The test operators must not be
// training operators. The modes are compared through `kope report`'s machinery (paired
// differences per operator with seeded bootstrap intervals, against the first mode):
// printed, and written as DIR/ablation.html, with DIR/ablation.json naming every phase. Beside
// attempts to best, each mode's tokens to target: per operator, the tokens spent up to and
// including the first kernel within 10% of the best speed any compared mode reached on it
// (report::compute_tokens_to_target), geomean and median over the operators the mode reached.
//
// --side-by-side then times each mode's best kernel against the baseline's, operator by operator,
// in alternating batches on an otherwise quiet machine (side_by_side.h): the speed comparison no
// longer rests on timings each run took under its own load. DIR/side-by-side.json keeps it
// (resumable) and ablation.json carries it.
//
// --phase NAME runs just the named phases (a test phase only once training is complete) and
// says which are left; the comparison waits until every phase is complete.
//
// Resumable: DIR/ablate.json holds the plan; rerunning the same command skips the phases
// whose results.json is complete, continues an interrupted one with `kope run --resume`
// (kope run's own resume), and starts the rest. Each phase is a child process that dies with
// this one.
#include <algorithm>
#include <fstream>
#include <set>

#include <nlohmann/json.hpp>

#include "child_run.h"
#include "cli.h"
#include "context/context.h"
#include "eval/registry.h"
#include "kope/memory.h"
#include "kope/spec.h"
#include "report/figures.h"
#include "report/html.h"
#include "report/tables.h"
#include "side_by_side.h"
#include "util/fs.h"
#include "util/strings.h"

namespace kope::cli {

namespace {

using nlohmann::json;
namespace fs = std::filesystem;

struct AblateOptions {
  std::vector<std::string> train, test;
  std::string from_memory;  // instead of a training phase: this export or database is the memory
  std::vector<std::string> modes = {"none", "passive", "active"};
  int64_t token_budget = 0;
  int64_t window = 0;
  int jobs = 1;
  std::string backend = "cpu";
  int resamples = 10000;
  std::string stop_rule = "gap";  // every phase's `kope run --stop-rule` (plans from before it: fixed)
  std::vector<std::string> only;  // --phase: run just these phases this time (not part of the plan)
  bool side_by_side = false;      // time the modes' best kernels against the baseline's (not part of the plan)
  double side_by_side_seconds = 30;
  ChildRunOptions run;  // holdout: earlier experience of an op never reaches its phase
};

// What defines the experiment; a rerun must ask for the same (--jobs, --json, --resamples and --phase
// may change: they say how fast it runs or how it is shown, not what it computes).
json plan_json(const AblateOptions& o) {
  return {{"train", o.train},   {"test", o.test},       {"modes", o.modes},       {"iterations", o.run.iterations},
          {"seed", o.run.seed},     {"token_budget", o.token_budget}, {"window", o.window}, {"llm", o.run.llm},
          {"policy", o.run.policy}, {"backend", o.backend}, {"suite", o.run.suite},       {"run_args", o.run.run_args},
          {"stop_rule", o.stop_rule}, {"from_memory", o.from_memory}};
}

// The names of the operators `selectors` select, failing with usage for an empty selection.
Result<std::set<std::string>> op_names(const std::vector<std::string>& selectors, const std::string& flag,
                                       const AblateOptions& o) {
  if (selectors.empty()) return fail(ErrorKind::usage, "{} needs at least one operator", flag);
  KOPE_ASSIGN(auto ops, spec::select_ops(selectors, o.run.suite.empty() ? spec::default_ops_dir() : fs::path(o.run.suite)));
  std::set<std::string> names;
  for (const auto& op : ops) names.insert(op.name);
  if (names.empty()) return fail(ErrorKind::usage, "{} {} selects no operator", flag, util::join(selectors, ","));
  return names;
}

Status check_options(const AblateOptions& o) {
  if (o.run.iterations < 1) return fail(ErrorKind::usage, "--iterations must be at least 1");
  if (!eval::find_backend_row(o.backend)) {
    return fail(ErrorKind::usage, "--backend must be {} (got '{}')", eval::backend_names(", ", " or "), o.backend);
  }
  if (o.modes.empty()) return fail(ErrorKind::usage, "--modes needs at least one context mode");
  std::set<std::string> seen;
  for (const auto& m : o.modes) {
    if (!context::parse_mode(m))
      return fail(ErrorKind::usage, "--modes: '{}' is not a context mode (none, passive, active, random)", m);
    if (!seen.insert(m).second) return fail(ErrorKind::usage, "--modes names {} twice", m);
  }
  if (o.from_memory.empty() == o.train.empty()) {
    return fail(ErrorKind::usage, "{}", o.train.empty() ? "--train or --from-memory: the test phases need a memory to start from"
                                                         : "--train and --from-memory: choose one (a training phase, or a memory "
                                                           "to start from)");
  }
  KOPE_ASSIGN(auto test, op_names(o.test, "--test", o));
  if (!o.from_memory.empty()) {
    std::error_code ec;
    if (!fs::is_regular_file(o.from_memory, ec)) {
      return fail(ErrorKind::not_found, "--from-memory {}: no such file (a `kope memory export` file or a memory database)",
                  o.from_memory);
    }
    return {};  // its experience of the test operators is held out by each phase's --holdout
  }
  KOPE_ASSIGN(auto train, op_names(o.train, "--train", o));
  std::vector<std::string> both;
  std::set_intersection(train.begin(), train.end(), test.begin(), test.end(), std::back_inserter(both));
  if (!both.empty()) {
    return fail(ErrorKind::usage, "--train and --test share {} ({}): a test operator the memory was trained on measures "
                "recall, not transfer; choose disjoint sets", both.size() == 1 ? "an operator" : "operators",
                util::join(both, ", "));
  }
  return {};
}

// Writes the plan on the first run; on a rerun, fails unless it asks for the same experiment.
Status check_plan(const fs::path& dir, const json& plan) {
  fs::path file = dir / "ablate.json";
  std::error_code ec;
  if (!fs::exists(file, ec)) return util::write_file_atomic(file, plan.dump(2) + "\n");
  KOPE_ASSIGN(std::string text, util::read_file(file));
  json old = json::parse(text, nullptr, false);
  if (!old.is_object()) return fail(ErrorKind::corrupt, "{}: not a JSON object", file.string());
  std::vector<std::string> differ;
  // What a plan written before a key existed ran with.
  const json before = {{"stop_rule", "fixed"}, {"from_memory", ""}};
  for (const auto& [key, value] : plan.items()) {
    json was = old.value(key, before.value(key, json()));
    if (was != value) differ.push_back(fmt::format("{} ({} there, {} now)", key, was.dump(), value.dump()));
  }
  if (!differ.empty()) {
    return fail(ErrorKind::usage, "{} holds another ablation: {} differ; rerun it as it was, or choose another --dir",
                dir.string(), util::join(differ, ", "));
  }
  return {};
}

enum class PhaseState { fresh, interrupted, complete };

PhaseState phase_state(const fs::path& run_dir) {
  std::error_code ec;
  if (auto r = read_results(run_dir); r && r->value("complete", false)) return PhaseState::complete;
  return fs::exists(run_dir / "config.json", ec) ? PhaseState::interrupted : PhaseState::fresh;
}

// The arguments of a new phase's `kope run` (everything that makes the phases compute-matched).
std::vector<std::string> run_args(const AblateOptions& o, const std::vector<std::string>& ops, const std::string& mode,
                                  const fs::path& memory, const fs::path& run_dir) {
  std::vector<std::string> a = {"run", "--ops", util::join(ops, ","), "--context", mode, "--iterations",
                                std::to_string(o.run.iterations), "--token-budget", std::to_string(o.token_budget),
                                "--seed", std::to_string(o.run.seed), "--memory", memory.string(), "--run-dir",
                                run_dir.string(), "--backend", o.backend, "--jobs", std::to_string(o.jobs), "--quiet",
                                "--no-starter"};  // each phase's memory is exactly what the experiment says
  if (o.window > 0) a.insert(a.end(), {"--window", std::to_string(o.window)});
  if (!o.run.llm.empty()) a.insert(a.end(), {"--llm", o.run.llm});
  if (!o.run.policy.empty()) a.insert(a.end(), {"--policy", o.run.policy});
  if (!o.run.suite.empty()) a.insert(a.end(), {"--suite", o.run.suite});
  if (o.run.holdout) a.emplace_back("--holdout");
  a.insert(a.end(), {"--stop-rule", o.stop_rule});
  a.insert(a.end(), o.run.run_args.begin(), o.run.run_args.end());
  return a;
}

struct Phase {
  std::string name;  // "train" or a context mode
  std::string mode;  // the context mode it runs with
  const std::vector<std::string>* ops;
  fs::path run_dir, memory;
  std::optional<fs::path> memory_from;  // a test phase's memory: a copy of the training memory
  std::string import_from;              // the training phase of --from-memory: no run, this file's experience
};

PhaseState phase_state(const Phase& p) {
  std::error_code ec;
  if (!p.import_from.empty()) return fs::exists(p.memory, ec) ? PhaseState::complete : PhaseState::fresh;
  return phase_state(p.run_dir);
}

// The --from-memory phase: FILE's experience into a fresh database beside p.memory (an export
// imported, a database merged), renamed to p.memory once complete, so an interrupted import
// leaves no memory the test phases could start from.
Status import_memory(const Phase& p, const fs::path& log) {
  std::ifstream in(p.import_from, std::ios::binary);
  if (!in) return fail(ErrorKind::io, "--from-memory {}: cannot open it", p.import_from);
  std::string head(16, '\0');
  in.read(head.data(), 16);
  bool database = in.gcount() == 16 && head == std::string_view("SQLite format 3\0", 16);
  fs::path tmp = p.memory;
  tmp += ".import-tmp";
  std::error_code ec;
  for (const char* suffix : {"", "-wal", "-shm", "-journal"}) fs::remove(tmp.string() + suffix, ec);
  KOPE_TRY(run_kope_child({"memory", "--memory", tmp.string(), database ? "merge" : "import", p.import_from}, log));
  for (const char* suffix : {"-wal", "-shm"}) fs::remove(tmp.string() + suffix, ec);
  fs::rename(tmp, p.memory, ec);
  if (ec) return fail(ErrorKind::io, "cannot rename {} to {}: {}", tmp.string(), p.memory.string(), ec.message());
  return {};
}

// Runs `p` unless it is complete: continues an interrupted run, or starts it (from a fresh
// copy of the training memory for a test phase). Says what it does on stderr.
Status run_phase(const AblateOptions& o, const Phase& p, const fs::path& log) {
  auto say = [&](const std::string& s) {
    if (!o.run.json_out) std::fprintf(stderr, "kope ablate: %s\n", s.c_str());
  };
  switch (phase_state(p)) {
    case PhaseState::complete:
      say(fmt::format("phase {}: complete already ({})", p.name, p.import_from.empty() ? p.run_dir.string() : p.memory.string()));
      return {};
    case PhaseState::interrupted:
      say(fmt::format("phase {}: resuming the interrupted run in {}", p.name, p.run_dir.string()));
      return run_kope_child({"run", "--resume", p.run_dir.string(), "--jobs", std::to_string(o.jobs), "--quiet"}, log);
    case PhaseState::fresh:
      break;
  }
  if (!p.import_from.empty()) {
    say(fmt::format("phase {}: no training run; the memory is {}'s experience ({})", p.name, p.import_from, p.memory.string()));
    return import_memory(p, log);
  }
  if (p.memory_from) KOPE_TRY(memory::copy_database(*p.memory_from, p.memory));
  say(fmt::format("phase {}: context {} on {} ({} iterations per op), memory {}", p.name, p.mode, util::join(*p.ops, ","),
                  o.run.iterations, p.memory.string()));
  return run_kope_child(run_args(o, *p.ops, p.mode, p.memory, p.run_dir), log);
}

// A test phase's tokens to target (null for the training phase, which is not compared).
json target_json(const report::TargetFigures* t) {
  if (!t) return json(nullptr);
  auto opt = [](const std::optional<double>& v) { return v ? json(*v) : json(nullptr); };
  return {{"geomean", opt(t->geomean)}, {"median", opt(t->median)}, {"attempts_mean", opt(t->attempts_mean)},
          {"reached", t->reached},      {"ops", t->ops},            {"over", t->over}};
}

// Each phase's figures and the settings that make them compute-matched, from its results.json;
// a test phase's tokens to target from the comparison `target`.
Result<json> phase_summary(const Phase& p, const report::TargetFigures* target) {
  if (!p.import_from.empty()) return json{{"phase", p.name}, {"from_memory", p.import_from}, {"memory", p.memory.string()}};
  KOPE_ASSIGN(json r, read_results(p.run_dir));
  const json& f = r.at("figures");
  const json settings = r.value("settings", json::object());
  return json{{"phase", p.name},
              {"context_mode", r.value("context_mode", "")},
              {"run_dir", p.run_dir.string()},
              {"memory", p.memory.string()},
              {"seed", r.value("seed", json(nullptr))},
              {"settings", settings},
              {"pass_rate", f.value("pass_rate", json(nullptr))},
              {"solved", f.value("solved", json(nullptr))},
              {"ops", f.value("ops", json(nullptr))},
              {"geomean_speedup_vs_reference", f.value("geomean_speedup_vs_reference", json(nullptr))},
              {"tokens_prompt", f.value("tokens_prompt", json(nullptr))},
              {"tokens_completion", f.value("tokens_completion", json(nullptr))},
              {"tokens_per_solved_op", f.value("tokens_per_solved_op", json(nullptr))},
              {"tokens_cached", f.value("tokens_cached", json(nullptr))},
              {"tokens_billed_equivalent", f.value("tokens_billed_equivalent", json(nullptr))},
              {"tokens_billed_equivalent_per_solved_op", f.value("tokens_billed_equivalent_per_solved_op", json(nullptr))},
              {"cached_price_ratio", f.value("cached_price_ratio", json(nullptr))},
              {"attempts_to_best_mean", f.value("attempts_to_best_mean", json(nullptr))},
              {"attempts_to_best_median", f.value("attempts_to_best_median", json(nullptr))},
              {"tokens_to_target", target_json(target)}};
}

// One line per mode: tokens to target beside attempts to best.
std::string targets_text(const report::Analysis& an) {
  auto num = [](const std::optional<double>& v, const char* f) { return v ? fmt::format(fmt::runtime(f), *v) : std::string("-"); };
  std::string out = fmt::format("tokens to target (the first kernel within {:.0f}% of the best speed any mode reached):\n",
                                100 * (1 - report::k_target_fraction));
  for (const auto& f : an.figures) {
    const report::TargetFigures& t = f.tokens_to_target;
    const json& best = f.figures.value("attempts_to_best_mean", json(nullptr));
    out += fmt::format("  {:<10} geomean {} median {} tokens, reached on {} of {} operators; attempts to target {}, "
                       "attempts to best {}\n",
                       f.label, num(t.geomean, "{:.0f}"), num(t.median, "{:.0f}"), t.reached, t.ops,
                       num(t.attempts_mean, "{:.2f}"), best.is_number() ? fmt::format("{:.2f}", best.get<double>()) : "-");
  }
  return out;
}

// The test phases compared by the report machinery: printed, and DIR/ablation.html.
Result<std::pair<report::Analysis, std::vector<report::Table>>> compare(const AblateOptions& o,
                                                                        const std::vector<Phase>& tests,
                                                                        const fs::path& html) {
  std::vector<report::RunData> runs;
  for (const auto& p : tests) {
    KOPE_ASSIGN(report::RunData r, report::load_run(p.run_dir));
    runs.push_back(std::move(r));
  }
  report::ReportOptions ro;
  ro.labels = o.modes;
  ro.baseline = o.modes.front();
  ro.suite_root = o.run.suite;
  ro.bootstrap.resamples = o.resamples;
  ro.bootstrap.seed = o.run.seed;
  KOPE_ASSIGN(report::Analysis an, report::analyse(std::move(runs), ro));
  std::vector<report::Table> tables = report::build_tables(an);
  KOPE_TRY(util::write_file_atomic(html, report::render_html(an, tables)));
  return std::pair{std::move(an), std::move(tables)};
}

Result<int> ablate_command(const AblateOptions& o) {
  KOPE_TRY(check_options(o));
  fs::path dir = o.run.dir.empty() ? util::data_dir() / "ablate" / fmt::format("seed-{}", o.run.seed) : fs::absolute(o.run.dir);
  KOPE_TRY(util::make_dirs(dir / "memory"));
  KOPE_TRY(check_plan(dir, plan_json(o)));

  const fs::path train_db = dir / "memory" / "train.db";
  std::vector<Phase> phases = {{"train", "active", &o.train, dir / "train", train_db, std::nullopt, o.from_memory}};
  for (const auto& m : o.modes) phases.push_back({m, m, &o.test, dir / m, dir / "memory" / (m + ".db"), train_db, {}});
  for (const auto& name : o.only) {
    if (std::none_of(phases.begin(), phases.end(), [&](const Phase& p) { return p.name == name; })) {
      return fail(ErrorKind::usage, "--phase {}: this ablation's phases are train and {}", name, util::join(o.modes, ", "));
    }
  }
  for (const auto& p : phases) {
    if (!o.only.empty() && std::find(o.only.begin(), o.only.end(), p.name) == o.only.end()) continue;
    if (p.memory_from && phase_state(phases.front()) != PhaseState::complete) {
      return fail(ErrorKind::usage, "phase {} starts from a copy of the training memory: run phase train first", p.name);
    }
    KOPE_TRY(run_phase(o, p, dir / (p.name + ".log")));
  }
  std::vector<std::string> left;
  for (const auto& p : phases)
    if (phase_state(p) != PhaseState::complete) left.push_back(p.name);
  if (!left.empty()) {  // only with --phase: the comparison waits for every phase
    print(fmt::format("phases left: {} (rerun with --phase, or without it to run them all and compare)\n",
                      util::join(left, ", ")));
    return 0;
  }

  std::vector<Phase> tests(phases.begin() + 1, phases.end());
  fs::path html = dir / "ablation.html";
  KOPE_ASSIGN(auto compared, compare(o, tests, html));
  json summary = json::array();
  for (const auto& p : phases) {
    const report::TargetFigures* target = nullptr;
    for (const auto& f : compared.first.figures)
      if (p.name != "train" && f.label == p.name) target = &f.tokens_to_target;
    KOPE_ASSIGN(json s, phase_summary(p, target));
    summary.push_back(std::move(s));
  }
  json out = {{"experiment", "ablate"}, {"dir", dir.string()}, {"plan", plan_json(o)}, {"phases", summary},
              {"report", html.string()}};
  if (o.side_by_side) {
    std::vector<SideBySideRun> runs;
    for (const auto& p : tests) runs.push_back({p.name, p.run_dir});
    SideBySideOptions so;
    so.seconds = o.side_by_side_seconds;
    so.backend = o.backend;
    so.suite = o.run.suite;
    so.resamples = o.resamples;
    so.seed = o.run.seed;
    KOPE_ASSIGN(json sbs, side_by_side(runs, dir / "side-by-side.json", so, [&](const std::string& line) {
      if (!o.run.json_out) std::fprintf(stderr, "kope ablate: %s\n", line.c_str());
    }));
    out["side_by_side"] = std::move(sbs);
  }
  KOPE_TRY(util::write_file_atomic(dir / "ablation.json", out.dump(2) + "\n"));
  if (o.run.json_out) {
    out["comparison"] = report::report_json(compared.first, compared.second);
    print(out.dump(2) + "\n");
    return 0;
  }
  print(report::report_text(compared.first, compared.second, false));
  print(targets_text(compared.first));
  if (out.contains("side_by_side")) print(side_by_side_text(out["side_by_side"]));
  print(fmt::format("ablation: {}\nreport: {}\n", (dir / "ablation.json").string(), html.string()));
  return 0;
}

}  // namespace

void register_ablate(CLI::App& app, Action& action) {
  auto o = std::make_shared<AblateOptions>();
  auto* cmd = app.add_subcommand("ablate",
                                 "Context ablation: train a memory on --train ops, then run each --modes context mode on "
                                 "--test ops from a copy of it (same seed, iterations, budget); compare the modes");
  cmd->add_option("--train", o->train, "Operators the memory is built on (names, globs, category:x, level:N)")
      ->delimiter(',');
  cmd->add_option("--from-memory", o->from_memory,
                  "Instead of --train: start every test phase from this memory (a `kope memory export` file, plain or "
                  ".zst, such as the shipped starter, or a memory database; never modified). Its experience of a test "
                  "operator stays out of that operator's phase (--holdout)");
  cmd->add_option("--test", o->test, "Operators the modes are compared on (disjoint from --train)")->delimiter(',')->required();
  cmd->add_option("--modes", o->modes,
                  "Context modes to compare (none, passive, active, random); the first is the baseline")
      ->delimiter(',')
      ->default_str("none,passive,active");
  cmd->add_option("--token-budget", o->token_budget, "Tokens (prompt + completion) per op, every phase; 0 = unlimited")
      ->default_val(0);
  cmd->add_option("--window", o->window, "Cap the model's context window (tokens), every phase");
  cmd->add_option("--jobs", o->jobs, "Operators in flight at once in each phase")->default_val(1)->check(CLI::Range(1, 256));
  cmd->add_option("--backend", o->backend, "Kernel backend")->default_val("cpu");
  cmd->add_option("--phase", o->only,
                  "Run just this phase now (train or a mode; repeatable): e.g. to give each phase its own model "
                  "answerers or machine window. The comparison is made once every phase is complete")
      ->delimiter(',');
  cmd->add_flag("--side-by-side", o->side_by_side,
                "Once every phase is complete, time each mode's best kernel against the baseline's in alternating batches, "
                "operator by operator (keep the machine otherwise quiet; resumable, DIR/side-by-side.json)");
  cmd->add_option("--side-by-side-seconds", o->side_by_side_seconds, "The side-by-side comparison's budget per operator, seconds")
      ->default_val(30)
      ->check(CLI::PositiveNumber);
  cmd->add_option("--resamples", o->resamples, "Bootstrap resamples for the comparison's intervals")->default_val(10000);
  cmd->add_option("--stop-rule", o->stop_rule,
                  "Every phase's patience rule (kope run --stop-rule), the same in every mode: gap (ends an op when more "
                  "attempts are unlikely to pay), evidence (gap, shortened where memory says refinements of similar "
                  "operators seldom won; mode none has no memory to ask) or fixed")
      ->default_val("gap")
      ->check(CLI::IsMember({"fixed", "gap", "evidence"}));
  add_child_run_options(cmd, o->run,
                        {"phase", "Experiment directory (default: <data dir>/ablate/seed-<seed>); rerun to resume",
                         "Print ablation.json with the comparison",
                         "Let a phase use earlier runs' experience of its own operators (default: every phase runs with "
                         "--holdout, so the comparison measures learning, not recall)"});
  cmd->callback([&action, o] {
    if (!o->from_memory.empty()) o->from_memory = fs::absolute(o->from_memory).lexically_normal().string();
    action = [o]() -> Result<int> { return ablate_command(*o); };
  });
}

}  // namespace kope::cli
