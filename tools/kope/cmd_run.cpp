// `kope run`: the agent on a selection of operators (docs/design.md §1, §5, §6).
//
//   kope run [--ops SELECTOR] [--level N] [--backend cpu] [--llm PROFILE] [--iterations N]
//            [--token-budget N] [--context active|passive|none] [--memory PATH] [--jobs N]
//            [--run-dir DIR] [--seed N] [--policy llm|replay] [--quiet] [--json]
//            [--resume DIR] [--no-reflect] [--no-starter] ...
//            [--executor local|slurm [--partition P] [--slurm-args "..."] [--chunk N]]
//
// Without a configured model the replay policy runs (zero tokens) and the command says how to
// configure one. Before a new run the starter experience shipped with kope is imported into the
// memory once (as foreign experience; memory/starter.h), unless --no-starter. After the run,
// report.html is written into the run directory and a per-op summary says where each best kernel
// came from. Ctrl-C stops after the current step of every op and prints the resume command;
// a second Ctrl-C exits at once (the event log still allows resuming). With --executor slurm
// the operators run as a Slurm job array and this process coordinates it (run_slurm.h); Ctrl-C
// then cancels the array.
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <functional>
#include <random>
#include <set>

#include <nlohmann/json.hpp>

#include "agent/progress.h"
#include "agent/prompt_check.h"
#include "agent/run.h"
#include "run/results.h"
#include "run/tasks.h"
#include "cli.h"
#include "isa_option.h"
#include "eval/registry.h"
#include "kope/eval.h"
#include "kope/hw.h"
#include "kope/llm.h"
#include "kope/memory.h"
#include "kope/spec.h"
#include "memory/starter.h"
#include "run_end.h"
#include "run_slurm.h"
#include "run_services.h"
#include "util/fs.h"
#include "util/strings.h"

namespace kope::cli {

namespace {

using nlohmann::json;
namespace fs = std::filesystem;

std::atomic<bool> g_cancel{false};
std::atomic<int> g_interrupts{0};
llm::CancelToken* g_llm_cancel = nullptr;  // set before the handler is installed

extern "C" void on_interrupt(int) {
  if (g_interrupts.fetch_add(1) >= 1) {
    const char msg[] = "\nkope: interrupted again; exiting now (the run can still be resumed)\n";
    (void)!::write(STDERR_FILENO, msg, sizeof msg - 1);
    std::_Exit(130);
  }
  g_cancel.store(true);
  if (g_llm_cancel) g_llm_cancel->cancel();  // calls in flight return `cancelled` at once
  const char msg[] = "\nkope: stopping after the current step of each operator (Ctrl-C again to exit now)\n";
  (void)!::write(STDERR_FILENO, msg, sizeof msg - 1);
}

struct RunOptions {
  std::vector<std::string> ops;
  std::string isa;  // --isa; empty: $KOPE_ISA or native
  int level = 0;
  std::string backend = std::string(eval::default_backend_name());
  std::string llm;
  int iterations = 8;
  int64_t token_budget = 0;
  double time_limit = 0;
  double roofline_target = 0.8;
  double library_target = 0;
  int patience = 4;
  std::string stop_rule = "fixed";
  int gap_patience = 2;
  std::string context = "active";
  std::string memory;
  int jobs = 1;
  std::string run_dir;
  std::optional<uint64_t> seed;
  std::string policy;
  bool quiet = false;
  bool json_out = false;
  std::string resume;
  bool no_reflect = false;
  bool check_prompts = false;
  bool no_starter = false;
  bool holdout = false;
  std::string suite;
  int replay_limit = 0;
  bool replay_all = false;
  int64_t window = 0;
  int64_t generation = 0;
  int64_t recency_reserve = 0;
  double eval_ci = 0;
  double eval_max_seconds = 0;
  std::string library_config = "environment";
  bool full_timing = false;
  std::string executor = "local";
  SlurmSettings slurm;
};

// Options that define a run; with --resume the run's own configuration is used instead.
const std::vector<std::string> k_defining = {"--ops", "--level", "--backend", "--llm", "--iterations", "--token-budget",
                                             "--time-limit", "--roofline-target", "--patience", "--stop-rule", "--gap-patience",
                                             "--context", "--memory",
                                             "--run-dir", "--seed", "--policy", "--no-reflect", "--suite",
                                             "--replay-limit", "--replay-all", "--window", "--generation", "--recency-reserve",
                                             "--eval-ci", "--eval-max-seconds", "--library-config", "--full-timing", "--holdout",
                                             "--executor", "--partition", "--slurm-args", "--chunk"};

// Options a Slurm task's `kope run` does not get as given: the coordinator's own, the selection
// (each task gets its operators' folders), and what it passes resolved (seed, memory, policy,
// model profile), so that every task runs exactly the run the coordinator recorded.
const std::set<std::string> k_not_for_tasks = {"--executor", "--partition", "--slurm-args", "--chunk", "--ops", "--level",
                                               "--run-dir", "--resume", "--json", "--quiet", "--seed", "--memory", "--llm",
                                               "--policy", "--no-starter", "--check-prompts"};

// Where the memory is: a URL (postgresql://...) as given, a file path made absolute.
std::string memory_location(const std::string& given) {
  if (memory::is_store_url(given)) return given;
  return fs::absolute(given).string();
}

// `s` as a shell word, quoted only when it has to be (for the commands kope prints).
std::string shell_word(const std::string& s) {
  if (s.find_first_of(" \t'\"\\$`") == std::string::npos) return s;
  return util::shell_quote(s);
}

// Where the starter experience was recorded, said as it is. Foreign experience either way: its
// timings were taken on another machine and count here only once a kernel is re-timed here.
std::string starter_origin(const std::set<std::string>& targets, const std::string& here) {
  std::string listed = util::join(std::vector<std::string>(targets.begin(), targets.end()), ", ");
  std::string where = targets.empty()                                 ? "on another machine"
                      : targets.size() == 1 && targets.contains(here) ? "on the same target as this machine (" + here + ")"
                      : targets.contains(here) ? fmt::format("on several targets ({}), this machine's among them", listed)
                                               : fmt::format("on other hardware ({}; this machine is {})", listed, here);
  return "It was recorded " + where + "; it counts as foreign experience until re-timed here.";
}

Result<run::RunConfig> new_config(const RunOptions& o, const std::optional<llm::Profile>& profile, run::Policy policy,
                                  const std::vector<spec::OpSpec>& ops) {
  run::RunConfig c;
  c.run_id = run::new_run_id();
  c.selectors = o.ops;
  c.level = o.level;
  c.backend = o.backend;
  c.library_config = o.library_config;
  c.isa = util::get_env("KOPE_ISA").value_or("native");  // set by apply_isa
  c.suite_root = o.suite.empty() ? spec::default_ops_dir().string() : fs::absolute(o.suite).string();
  c.jobs = std::max(1, o.jobs);
  c.seed = o.seed ? *o.seed : std::random_device{}();
  c.memory_path = o.memory.empty() ? memory::default_store_path().string() : memory_location(o.memory);
  c.holdout = o.holdout;
  run::LoopConfig& l = c.loop;
  l.policy = policy;
  l.max_iterations = o.iterations;
  l.token_budget = o.token_budget;
  l.time_limit_seconds = o.time_limit;
  l.roofline_target = o.roofline_target;
  l.library_target = o.library_target;
  l.patience = o.patience;
  auto stop_rule = run::parse_stop_rule(o.stop_rule);
  if (!stop_rule) return fail(ErrorKind::usage, "--stop-rule must be fixed, gap or evidence (got '{}')", o.stop_rule);
  l.stop_rule = *stop_rule;
  l.gap_patience = o.gap_patience;
  l.reflect = !o.no_reflect;
  auto mode = context::parse_mode(o.context);
  if (!mode) return fail(ErrorKind::usage, "--context must be active, passive, none or random (got '{}')", o.context);
  l.mode = *mode;
  l.seed = c.seed;
  if (profile) {
    c.llm_profile = profile->name;
    c.model = {{"profile", profile->name},
               {"provider", profile->provider},
               {"model", profile->model},
               {"base_url", profile->base_url},
               {"context_window", profile->context_window},
               {"max_output_tokens", profile->max_output_tokens},
               {"temperature", profile->temperature}};
    l.budget.window = profile->context_window;
    l.budget.generation = profile->max_output_tokens;
  }
  if (o.window > 0) l.budget.window = std::min(l.budget.window, o.window);
  if (o.generation > 0) l.budget.generation = o.generation;
  l.budget.recency_reserve = o.recency_reserve > 0 ? o.recency_reserve : std::min<int64_t>(4096, l.budget.window / 8);
  if (l.budget.generation >= l.budget.window) {
    return fail(ErrorKind::usage, "the generation allowance ({} tokens) leaves no room in the {}-token window",
                l.budget.generation, l.budget.window);
  }
  // Replay re-times every kernel it tries: keep it quick by default. Up to two kernels per op,
  // the second only when the first fails here, is below 0.9x the library or slower than the reference (--replay-all: both, to
  // compare them here).
  bool replay = policy == run::Policy::replay;
  l.replay_limit = o.replay_limit > 0 ? o.replay_limit : 2;
  l.replay_all = o.replay_all;
  l.eval_options.target_ci = o.eval_ci > 0 ? o.eval_ci : (replay ? 0.1 : 0.02);
  // Replay's speed claim is the same median with its 95% CI, on a budget that answers "how fast
  // here" for the whole suite within minutes: ±10% or 0.5 s per kernel and timed case, whichever
  // is first. Baselines it caches at that precision are timed again by a run that asks for more.
  l.eval_options.max_seconds_per_case = o.eval_max_seconds > 0 ? o.eval_max_seconds : (replay ? 0.5 : 10.0);
  l.fast_verdict = !o.full_timing;
  (void)ops;
  return c;
}

// Prints a line of progress on stderr unless --quiet.
using Say = std::function<void(const std::string&)>;

// The ISA level a run directory's config.json records, for a resume given neither --isa nor
// $KOPE_ISA; "" (apply_isa's default) when it records none or cannot be read (opening the run
// then says why).
std::string recorded_isa(const fs::path& run_dir) {
  if (util::get_env("KOPE_ISA").value_or("") != "") return "";
  auto text = util::read_file(run_dir / "config.json");
  if (!text) return "";
  auto j = nlohmann::json::parse(*text, nullptr, false);
  return j.is_object() ? j.value("isa", "") : "";
}

// --resume: the run directory's run, continued as it was configured (only --jobs may change);
// its model profile, when it used one, must still be configured.
Result<std::unique_ptr<agent::Run>> resume_run(const RunOptions& o, const std::vector<std::string>& given,
                                               std::optional<llm::Profile>& profile, const Say& say) {
  std::vector<std::string> conflicting;
  for (const auto& g : given) {
    if (std::find(k_defining.begin(), k_defining.end(), g) != k_defining.end()) conflicting.push_back(g);
  }
  if (!conflicting.empty()) {
    return fail(ErrorKind::usage, "--resume continues a run as it was configured; drop {} (only --jobs, --quiet and --json "
                "may change)", util::join(conflicting, ", "));
  }
  KOPE_ASSIGN(auto run, agent::Run::open(o.resume));
  if (std::find(given.begin(), given.end(), "--jobs") != given.end()) {
    KOPE_TRY(run->set_jobs(o.jobs));  // how fast, not what is computed
  }
  if (run->config().loop.policy == run::Policy::llm) {
    KOPE_ASSIGN(auto chosen, resolve_model_profile(run->config().llm_profile));
    if (!chosen.profile) {
      return fail(ErrorKind::config, "the run used model profile '{}', which is no longer configured", run->config().llm_profile);
    }
    profile = chosen.profile;
  }
  say(fmt::format("kope run: resuming {} ({} ops)", run->dir().string(), run->ops().size()));
  return run;
}

// The policy of a new run: the one asked for, else llm with a configured model, else replay
// (saying so and how to configure a model). Sets `profile` for llm.
Result<run::Policy> choose_policy(const RunOptions& o, std::optional<run::Policy> asked,
                                  std::optional<llm::Profile>& profile, const Say& say) {
  run::Policy policy = asked.value_or(run::Policy::llm);
  if (asked == run::Policy::replay) return policy;
  KOPE_ASSIGN(auto chosen, resolve_model_profile(o.llm));
  if (chosen.profile) {
    profile = chosen.profile;
  } else if (asked == run::Policy::llm || !o.llm.empty()) {
    return fail(ErrorKind::config, "no model is configured{}. {}", o.llm.empty() ? "" : " for profile '" + o.llm + "'",
                chosen.how_to_configure);
  } else {
    policy = run::Policy::replay;
    say("kope run: no model is configured, so this run replays verified kernels from memory (zero tokens).");
    say("  " + chosen.how_to_configure);
  }
  return policy;
}

// A new run over the selected operators, in --run-dir or a fresh directory under the data dir.
Result<std::unique_ptr<agent::Run>> start_run(const RunOptions& o, std::optional<llm::Profile>& profile, const Say& say) {
  std::optional<run::Policy> asked = o.policy.empty() ? std::nullopt : run::parse_policy(o.policy);
  if (!o.policy.empty() && !asked) return fail(ErrorKind::usage, "--policy must be llm or replay (got '{}')", o.policy);
  if (o.iterations < 1) return fail(ErrorKind::usage, "--iterations must be at least 1");
  if (!eval::find_backend_row(o.backend)) {
    return fail(ErrorKind::usage, "--backend must be {} (got '{}'); see `kope backends`", eval::backend_names(", ", " or "), o.backend);
  }
  KOPE_ASSIGN(run::Policy policy, choose_policy(o, asked, profile, say));
  fs::path suite_root = o.suite.empty() ? spec::default_ops_dir() : fs::path(o.suite);
  KOPE_ASSIGN(auto ops, spec::select_ops(o.ops, suite_root));
  if (o.level > 0) std::erase_if(ops, [&](const spec::OpSpec& op) { return op.level != o.level; });
  if (ops.empty()) return fail(ErrorKind::usage, "the selection matches no operator (see `kope ops list`)");
  KOPE_ASSIGN(auto config, new_config(o, profile, policy, ops));
  fs::path dir = o.run_dir.empty() ? util::data_dir() / "runs" / config.run_id : fs::path(o.run_dir);
  return agent::Run::create(std::move(config), std::move(ops), dir);
}

// The run to drive: the one in --resume's directory, or a new one.
Result<std::unique_ptr<agent::Run>> open_run(const RunOptions& o, const std::vector<std::string>& given,
                                             std::optional<llm::Profile>& profile, const Say& say) {
  if (!o.resume.empty()) return resume_run(o, given, profile, say);
  return start_run(o, profile, say);
}

// Imports the starter experience into a new run's memory (once per content), saying what it
// holds and how this run uses it. True when it was imported now; a failure is a warning.
bool import_starter_for_run(const run::RunConfig& cfg, memory::Database& store, const std::string& here, const Say& say) {
  auto file = memory::starter_memory_file();
  if (!file) return false;
  auto st = memory::import_starter(store, *file);
  if (!st) {
    std::fprintf(stderr, "kope: warning: the starter experience %s was not imported: %s\n", file->string().c_str(),
                 st.error().message.c_str());
    return false;
  }
  if (!st->imported) return false;
  const memory::ExportSummary& sum = st->summary;
  std::string made;
  if (sum.provenance.is_object()) {
    std::string model = sum.provenance.value("model", std::string());
    std::string date = sum.provenance.value("date", sum.exported_at);
    std::vector<std::string> parts;
    if (!sum.targets.empty()) parts.push_back("on " + util::join(std::vector<std::string>(sum.targets.begin(), sum.targets.end()), ", "));
    if (!model.empty()) parts.push_back("by " + model);
    if (!date.empty()) parts.push_back(date.substr(0, 10));
    if (!parts.empty()) made = " (recorded " + util::join(parts, ", ") + ")";
  }
  say(fmt::format("kope run: imported the starter experience shipped with kope into {}: {} verified kernels for {} "
                  "operators{}, from {}.", cfg.memory_path, sum.correct_cases, sum.solved_ops.size(), made,
                  file->string()));
  say("  " + starter_origin(sum.targets, here) +
      (cfg.loop.policy == run::Policy::replay
           ? " This run replays it: every kernel is re-verified on every case and re-timed on this machine; a "
             "kernel that fails here is recorded as failed and never counts. (--no-starter skips this.)"
           : " The model sees it as feasibility evidence, never as speed evidence. (--no-starter skips this.)"));
  return true;
}

// A new run records this machine's target and toolchain; a resumed one must be on the target it
// was made on.
Status bind_machine(agent::Run& run, const eval::Evaluator& evaluator) {
  const run::RunConfig& cfg = run.config();
  if (!run.resumed()) return run.set_machine(evaluator.target().str(), evaluator.toolchain_id());
  if (!cfg.target.empty() && cfg.target != evaluator.target().str()) {
    return fail(ErrorKind::config, "the run in {} was made on target {}, this machine is {}; start a new run here",
                run.dir().string(), cfg.target, evaluator.target().str());
  }
  return {};
}

// The progress printer, told what a resumed run already finished, with the run's opening lines.
void announce_run(agent::ConsoleProgress& progress, const agent::Run& run) {
  const run::RunConfig& cfg = run.config();
  int done = 0, solved = 0;
  for (const auto& [name, st] : run.states()) {
    done += st.done;
    solved += st.done && st.incumbent();
  }
  progress.already_done(done, solved);
  progress.message(fmt::format("kope run {}: {} ops, policy {}, context {}, {} job{}, run directory {}", cfg.run_id,
                               run.ops().size(), run::policy_name(cfg.loop.policy), context::mode_name(cfg.loop.mode), cfg.jobs,
                               cfg.jobs == 1 ? "" : "s", run.dir().string()));
  if (cfg.loop.policy == run::Policy::llm) {
    progress.message(fmt::format("model: {} ({}), window {} tokens, generation {}, memory {}", cfg.model.value("model", ""),
                                 cfg.llm_profile, cfg.loop.budget.window, cfg.loop.budget.generation, cfg.memory_path));
  }
}

// Provider-side accounting (calls, retries, failures, cost) appended to llm-usage.json, one
// segment per process.
void append_llm_usage(const fs::path& run_dir, const llm::RunAccounting& accounting) {
  fs::path usage = run_dir / "llm-usage.json";
  json doc = json::object({{"segments", json::array()}});
  if (auto old = util::read_file(usage)) {
    json prev = json::parse(*old, nullptr, false);
    if (prev.is_object() && prev.contains("segments")) doc = prev;
  }
  doc["segments"].push_back(json::parse(accounting.to_json(), nullptr, false));
  (void)util::write_file_atomic(usage, doc.dump(2) + "\n");
}

// What a replay run says at the end: where its kernels came from, or that there was nothing to
// replay and how to get kernels.
void print_replay_notes(const run::RunConfig& cfg, const agent::RunReport& report, bool starter_imported) {
  if (starter_imported) {
    print("These kernels are the starter experience shipped with kope, re-verified and re-timed here. To write\n"
          "better ones for this machine, configure a model (README.md, \"Configuring a model\"; e.g. KOPE_MODEL,\n"
          "OPENAI_BASE_URL, OPENAI_API_KEY, or an [llm.<name>] profile in kope.toml) and run `kope run` again.\n");
  }
  if (!report.complete) return;
  int64_t attempts = 0;
  for (const auto& op : report.results.value("ops", json::array())) attempts += op.value("attempts", int64_t{0});
  if (attempts == 0) {
    print(fmt::format("nothing to replay: the memory {} holds no verified kernel for these operators (or related ones) yet;\n"
                      "configure a model so that kope can write some (README.md, \"Configuring a model\"), or import\n"
                      "experience from another machine with `kope memory import` / `kope memory merge`.\n",
                      cfg.memory_path));
  }
}

// The run's outcome on stdout: results.json's figures (--json), or the summary table, the figures
// and where the results and the report are.
void print_run_outcome(const RunOptions& o, const run::RunConfig& cfg, const agent::RunReport& report,
                       memory::Database& store, const std::string& target, const std::optional<fs::path>& html,
                       bool starter_imported) {
  if (o.json_out) {
    print(report.results.dump(2) + "\n");
    if (html && !o.quiet) std::fprintf(stderr, "report: %s\n", html->string().c_str());
    return;
  }
  if (o.quiet) return;
  print(run_summary_table(report.results, store, target));
  print(run::results_summary(report.results));
  print(fmt::format("results: {}\n", report.results_path.string()));
  if (html) print(fmt::format("report: {}\n", html->string()));
  if (cfg.loop.policy == run::Policy::replay) print_replay_notes(cfg, report, starter_imported);
}

// What every run ends with: report.html beside results.json, the outcome on stdout, the errors
// and (--check-prompts) the prompt check on stderr, and the exit code: 0, 1 when the run did not
// finish (with the command that resumes it) or a prompt has a finding, 130 when cancelled.
Result<int> finish_run(const RunOptions& o, const agent::Run& run, const agent::RunReport& report, memory::Database& store,
                       const std::string& target, bool starter_imported) {
  const run::RunConfig& cfg = run.config();
  // The HTML report of this run, always beside results.json (a failure to write it is reported,
  // not fatal: the run's figures are in results.json either way).
  std::optional<fs::path> html;
  if (auto h = write_run_report(run.dir(), cfg.memory_path)) {
    html = *h;
  } else {
    std::fprintf(stderr, "kope: warning: report.html was not written: %s\n", h.error().message.c_str());
  }
  print_run_outcome(o, cfg, report, store, target, html, starter_imported);
  for (const auto& e : report.errors) std::fprintf(stderr, "kope: %s\n", e.c_str());
  bool prompts_ok = true;
  if (o.check_prompts) {
    // A run through Slurm keeps its prompts in its tasks' run directories.
    std::vector<fs::path> dirs = run::task_dirs(run.dir());
    if (dirs.empty()) dirs.push_back(run.dir());
    for (const auto& dir : dirs) {
      if (!fs::exists(dir / "events.jsonl")) continue;  // a task that never started sent nothing
      KOPE_ASSIGN(agent::PromptCheckReport check, agent::check_run_prompts(dir));
      prompts_ok = prompts_ok && check.ok();
      std::string text = check.to_text();
      std::fprintf(stderr, "kope: prompt check%s: %s", dirs.size() > 1 ? (" of " + dir.string()).c_str() : "", text.c_str());
    }
  }
  if (!report.complete) {
    std::fprintf(stderr, "kope: the run stopped before every operator finished. Resume it with:\n  kope run --resume %s\n",
                 shell_word(run.dir().string()).c_str());
    return report.cancelled ? 130 : 1;
  }
  return prompts_ok ? 0 : 1;
}

// A new run over Slurm, or the resumption of one: this process coordinates the job array
// (run_slurm.h) and merges the tasks' results; it runs no operator itself. `task_args`: the
// options as given that every task's `kope run` gets too.
Result<int> slurm_command(const RunOptions& o, const std::vector<std::string>& given, const std::vector<std::string>& task_args,
                          const Say& say) {
  std::optional<llm::Profile> profile;
  KOPE_ASSIGN(std::unique_ptr<agent::Run> run, open_run(o, given, profile, say));
  const run::RunConfig& cfg = run->config();
  KOPE_ASSIGN(auto store, memory::open_store(cfg.memory_path));
  // The tasks share the memory: the starter experience goes in once, here, not in every task.
  const bool starter_imported =
      !run->resumed() && !o.no_starter && import_starter_for_run(cfg, *store, describe_host().target.str(), say);
  SlurmConsole console;
  console.say = say;
  console.cancel = &g_cancel;
  agent::RunReport report;
  if (run->resumed()) {
    KOPE_ASSIGN(report, resume_on_slurm(*run, console));
  } else {
    std::vector<std::string> args = task_args;
    args.insert(args.end(), {"--seed", std::to_string(cfg.seed), "--memory", cfg.memory_path, "--policy",
                             std::string(run::policy_name(cfg.loop.policy)), "--no-starter", "--quiet"});
    if (!cfg.llm_profile.empty()) args.insert(args.end(), {"--llm", cfg.llm_profile});
    say(fmt::format("kope run {}: {} ops through Slurm, {} per task, run directory {}", cfg.run_id, run->ops().size(),
                    o.slurm.chunk, run->dir().string()));
    KOPE_ASSIGN(report, dispatch_to_slurm(*run, o.slurm, args, console));
  }
  return finish_run(o, *run, report, *store, run->config().target, starter_imported);
}

Result<int> run_command(const RunOptions& o, const std::vector<std::string>& given, const std::vector<std::string>& task_args) {
  static auto llm_cancel = std::make_shared<llm::CancelToken>();
  g_llm_cancel = llm_cancel.get();
  std::signal(SIGINT, on_interrupt);
  std::signal(SIGTERM, on_interrupt);
  auto progress_style = o.quiet ? agent::ConsoleProgress::Style::quiet : agent::default_progress_style(STDERR_FILENO);
  Say say = [&](const std::string& line) {
    if (!o.quiet) std::fprintf(stderr, "%s\n", line.c_str());
  };
  KOPE_TRY(apply_isa(o.isa.empty() && !o.resume.empty() ? recorded_isa(o.resume) : o.isa));
  if (o.resume.empty() ? o.executor == "slurm" : is_slurm_run(o.resume)) return slurm_command(o, given, task_args, say);

  std::optional<llm::Profile> profile;
  KOPE_ASSIGN(std::unique_ptr<agent::Run> run, open_run(o, given, profile, say));
  const run::RunConfig& cfg = run->config();

  // Services: hardware, evaluator, memory, model, prompts.
  KOPE_ASSIGN(HardwareProfile hw, load_hardware_profile());
  KOPE_ASSIGN(auto evaluator, make_run_evaluator(cfg.backend, hw, cfg.library_config));
  KOPE_ASSIGN(auto store, memory::open_store(cfg.memory_path));
  const bool starter_imported = !run->resumed() && !o.no_starter && import_starter_for_run(cfg, *store, evaluator->target().str(), say);
  std::unique_ptr<llm::LlmClient> client;
  auto accounting = std::make_shared<llm::RunAccounting>();
  if (cfg.loop.policy == run::Policy::llm) {
    llm::ClientOptions co;
    co.transcript = run->dir() / "llm-calls.jsonl";  // every request, retry and failure, keys redacted
    co.accounting = accounting;
    co.cancel = llm_cancel;
    KOPE_ASSIGN(client, llm::make_client(*profile, co));
  }
  KOPE_ASSIGN(auto prompts, agent::PromptLibrary::load(agent::default_prompts_dir(), cfg.backend));
  agent::RunServices services;
  services.evaluator = evaluator.get();
  services.store = store.get();
  services.llm = client.get();
  services.prompts = &prompts;
  services.cancel = &g_cancel;
  if (auto suite = spec::load_suite(cfg.suite_root.empty() ? spec::default_ops_dir() : fs::path(cfg.suite_root))) {
    services.known_ops = std::move(suite->ops);
  }
  KOPE_TRY(bind_machine(*run, *evaluator));

  agent::ConsoleProgress progress(progress_style, stderr, static_cast<int>(run->ops().size()));
  services.progress = &progress;
  announce_run(progress, *run);
  KOPE_ASSIGN(agent::RunReport report, run->execute(services));
  progress.finish();
  if (client) append_llm_usage(run->dir(), *accounting);

  return finish_run(o, *run, report, *store, evaluator->target().str(), starter_imported);
}

}  // namespace

void register_run(CLI::App& app, Action& action) {
  auto o = std::make_shared<RunOptions>();
  CLI::App* cmd = app.add_subcommand("run", "Let the agent optimise kernels for a selection of operators");
  cmd->add_option("--ops", o->ops, "Operators: names, globs, categories (category:x), level:N, op folders")
      ->delimiter(',');
  cmd->add_option("--level", o->level, "Only operators of this difficulty level (1-4)")->check(CLI::Range(1, 4));
  cmd->add_option("--backend", o->backend, "Kernel backend")->default_val(std::string(eval::default_backend_name()));
  add_isa_option(cmd, o->isa);
  cmd->add_option("--llm", o->llm, "Model profile to use (default: the configured default profile)");
  cmd->add_option("--iterations", o->iterations, "Attempts per operator")->default_val(8);
  cmd->add_option("--token-budget", o->token_budget, "Tokens (prompt + completion) per operator; 0 = unlimited")
      ->default_val(0);
  cmd->add_option("--time-limit", o->time_limit, "Seconds per operator; 0 = unlimited")->default_val(0);
  cmd->add_option("--roofline-target", o->roofline_target, "Stop an operator once its best kernel reaches this fraction of the roofline; 0 = never")
      ->default_val(0.8);
  cmd->add_option("--library-target", o->library_target,
                  "Stop an operator with a library baseline once its best kernel is this many times as fast as the library, and faster than the reference (e.g. 1.2, with --library-config best); 0 = never")
      ->default_val(0)
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--patience", o->patience, "Stop an operator after this many attempts without a faster kernel; 0 = never")
      ->default_val(4);
  cmd->add_option("--stop-rule", o->stop_rule,
                  "Patience rule: fixed (--patience attempts without a faster kernel), gap (patience that grows with the "
                  "best kernel's gap to the roofline, from --gap-patience; only once it reaches 30% of the roofline) or "
                  "evidence (gap's patience, shortened where memory says refinements of the operator's category seldom won "
                  "on this machine)")
      ->default_val("fixed");
  cmd->add_option("--gap-patience", o->gap_patience, "With --stop-rule gap or evidence: attempts without a faster kernel allowed near the roofline; 0 = never")
      ->default_val(2);
  cmd->add_option("--context", o->context,
                  "Context management: active, passive (all relevant memory), none (no memory) or random (random memory "
                  "items at the token count active admits: the ablation's control)")
      ->default_val("active");
  cmd->add_option("--memory", o->memory, "Experience database: a file or a postgresql:// URL (default: $KOPE_MEMORY or the data directory's memory.db)");
  cmd->add_option("--jobs", o->jobs, "Operators in flight at once")->default_val(1)->check(CLI::Range(1, 256));
  cmd->add_option("--run-dir", o->run_dir, "Run directory (default: the data directory's runs/<run id>)");
  cmd->add_option("--seed", o->seed, "Seed for evaluation data and model sampling (default: random, recorded)");
  cmd->add_option("--policy", o->policy, "llm (a model writes kernels) or replay (re-verify kernels from memory, zero tokens)");
  cmd->add_flag("--quiet", o->quiet, "No progress and no summary; errors only");
  cmd->add_flag("--json", o->json_out, "Print results.json to stdout at the end");
  cmd->add_option("--resume", o->resume, "Continue the run in this directory");
  cmd->add_flag("--no-reflect", o->no_reflect, "Do not distil lessons into memory");
  cmd->add_flag("--check-prompts", o->check_prompts,
                "After the run, check every prompt it sent (as `kope prompts check`); exit 1 on a finding");
  cmd->add_flag("--no-starter", o->no_starter,
                "Do not import the starter experience shipped with kope into the memory (imported once otherwise)");
  cmd->add_flag("--holdout", o->holdout,
                "Contamination guard: leave experience about the selected operators (same name or spec hash) from earlier "
                "runs out of retrieval and replay; results mark them held-out");
  cmd->add_option("--suite", o->suite, "Operator suite root for selectors and related operators (default: the bundled ops/)");
  cmd->add_option("--replay-limit", o->replay_limit,
                  "Kernels the replay policy tries per operator, at most (default 2); it stops at the first one correct "
                  "here, at least 0.9x the library's speed and faster than the reference here, unless --replay-all");
  cmd->add_flag("--replay-all", o->replay_all,
                "Replay: re-verify and re-time --replay-limit kernels per operator even after one is correct here");
  cmd->add_option("--window", o->window, "Cap the model's context window (tokens), e.g. for compute-matched ablations");
  cmd->add_option("--generation", o->generation, "Tokens reserved for the answer (default: the profile's max output)");
  cmd->add_option("--recency-reserve", o->recency_reserve, "Minimum room kept for the hot tier (default min(4096, window/8))");
  cmd->add_option("--library-config", o->library_config,
                  "Library baselines: environment (as the environment configures them) or best (the fastest correct "
                  "configuration this CPU runs, measured once per operator and cached)")
      ->check(CLI::IsMember({"environment", "best"}));
  cmd->add_option("--eval-ci", o->eval_ci, "Timing precision: stop when the 95% CI is within this fraction of the median");
  cmd->add_option("--eval-max-seconds", o->eval_max_seconds, "Timing cap per timed case, in seconds");
  cmd->add_flag("--full-timing", o->full_timing,
                "Time every correct candidate to the full CI and compare it with the incumbent's recorded timings (default: "
                "time it against the incumbent and stop as soon as the decision is clear)");
  cmd->add_option("--executor", o->executor,
                  "Where the operators run: local (this process) or slurm (a Slurm job array, one task per --chunk "
                  "operators, each an exclusive node; this process coordinates and merges)")
      ->default_val("local")
      ->check(CLI::IsMember({"local", "slurm"}));
  cmd->add_option("--partition", o->slurm.partition, "Slurm: the partition the tasks run in (default: the cluster's)");
  cmd->add_option("--slurm-args", o->slurm.slurm_args,
                  "Slurm: more sbatch options for every task, as one string (e.g. \"--time=2:00:00 --constraint=avx512\")");
  cmd->add_option("--chunk", o->slurm.chunk, "Slurm: operators per array task")->default_val(1)->check(CLI::PositiveNumber);
  cmd->callback([o, cmd, &action] {
    std::vector<std::string> given, task_args;
    for (const CLI::Option* opt : cmd->get_options()) {
      if (opt->count() == 0 || opt->get_lnames().empty()) continue;
      std::string name = "--" + opt->get_lnames().front();
      given.push_back(name);
      if (k_not_for_tasks.contains(name)) continue;
      if (opt->get_type_size() == 0) {  // a flag
        task_args.push_back(name);
        continue;
      }
      for (const auto& value : opt->results()) task_args.insert(task_args.end(), {name, value});
    }
    action = [o, given, task_args]() { return run_command(*o, given, task_args); };
  });
}

}  // namespace kope::cli
