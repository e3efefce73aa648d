#include "run_slurm.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <set>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "child_run.h"
#include "cluster/slurm.h"
#include "run/events.h"
#include "util/fs.h"
#include "util/strings.h"
#include "util/time.h"

namespace kope::cli {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

constexpr int k_plan_version = 1;
// How often squeue is asked (the scheduler's own state changes at this pace, not faster).
constexpr auto k_poll_interval = std::chrono::seconds(2);
// Consecutive failed squeue calls after which the coordinator gives up watching (the array
// keeps running; --resume watches it again).
constexpr int k_max_query_failures = 30;
// After scancel: how long to wait for the tasks to end (Slurm signals them, then kills them
// after its KillWait).
constexpr auto k_cancel_wait = std::chrono::seconds(120);
constexpr size_t k_log_tail_lines = 15;

// One array task: its operators, the job it last ran in, the state it ended in.
struct Task {
  int index = 0;
  std::vector<std::string> ops;      // names
  std::vector<std::string> op_dirs;  // folders, what its `kope run --ops` gets
  std::string job_id;                // "" until submitted
  std::string state;                 // Slurm's, once ended ("" while not)
  std::string reason;
};

// slurm.json: how the run was dispatched, so that --resume can dispatch it again.
struct Plan {
  SlurmSettings settings;
  std::string kope;                    // the executable every task runs
  std::string cwd;                     // the tasks' working directory
  std::vector<std::string> task_args;  // every task's `kope run` options besides --ops and --run-dir
  std::vector<Task> tasks;
  json submissions = json::array();
};

fs::path plan_path(const fs::path& run_dir) { return run_dir / "slurm.json"; }
fs::path task_dir(const fs::path& run_dir, int index) { return run_dir / "tasks" / std::to_string(index); }

json plan_to_json(const Plan& p) {
  json tasks = json::array();
  for (const auto& t : p.tasks) {
    tasks.push_back({{"index", t.index}, {"ops", t.ops}, {"op_dirs", t.op_dirs}, {"job_id", t.job_id}, {"state", t.state},
                     {"reason", t.reason}});
  }
  return {{"version", k_plan_version},     {"partition", p.settings.partition}, {"slurm_args", p.settings.slurm_args},
          {"chunk", p.settings.chunk},     {"kope", p.kope},                    {"cwd", p.cwd},
          {"task_args", p.task_args},      {"tasks", tasks},                    {"submissions", p.submissions}};
}

Result<Plan> read_plan(const fs::path& run_dir) {
  fs::path path = plan_path(run_dir);
  KOPE_ASSIGN(std::string text, util::read_file(path));
  try {
    json j = json::parse(text);
    if (j.at("version").get<int>() != k_plan_version) {
      return fail(ErrorKind::corrupt, "{}: version {} is not the one this kope writes ({})", path.string(),
                  j["version"].dump(), k_plan_version);
    }
    Plan p;
    p.settings.partition = j.at("partition").get<std::string>();
    p.settings.slurm_args = j.at("slurm_args").get<std::string>();
    p.settings.chunk = j.at("chunk").get<int>();
    p.kope = j.at("kope").get<std::string>();
    p.cwd = j.at("cwd").get<std::string>();
    p.task_args = j.at("task_args").get<std::vector<std::string>>();
    for (const auto& t : j.at("tasks")) {
      p.tasks.push_back({t.at("index").get<int>(), t.at("ops").get<std::vector<std::string>>(),
                         t.at("op_dirs").get<std::vector<std::string>>(), t.at("job_id").get<std::string>(),
                         t.value("state", ""), t.value("reason", "")});
    }
    p.submissions = j.value("submissions", json::array());
    return p;
  } catch (const json::exception& e) {
    return fail(ErrorKind::corrupt, "{}: {}", path.string(), e.what());
  }
}

Status write_plan(const fs::path& run_dir, const Plan& p) {
  return util::write_file_atomic(plan_path(run_dir), plan_to_json(p).dump(2) + "\n");
}

// The batch script: array task i runs its operators in RUN_DIR/tasks/<i>/, or resumes that run
// when an earlier submission started it. Every word is quoted; nothing is expanded but the
// task's index.
std::string array_script(const agent::Run& run, const Plan& p) {
  std::string s = fmt::format(
      "#!/bin/sh\n"
      "# kope run {} through Slurm, written by `kope run --executor slurm`;\n"
      "# `kope run --resume {}` submits it again.\n"
      "# Array task i runs its operators (slurm.json) in its own run directory tasks/<i>/,\n"
      "# or resumes that run when an earlier submission started it.\n"
      "kope={}\n"
      "case \"${{SLURM_ARRAY_TASK_ID:-}}\" in\n",
      run.config().run_id, util::shell_quote(run.dir().string()), util::shell_quote(p.kope));
  for (const auto& t : p.tasks) {
    s += fmt::format("  {}) dir={}; ops={} ;;\n", t.index, util::shell_quote(task_dir(run.dir(), t.index).string()),
                     util::shell_quote(util::join(t.op_dirs, ",")));
  }
  s += "  *) echo \"kope: this run has no array task '${SLURM_ARRAY_TASK_ID:-}'\" >&2; exit 2 ;;\n"
       "esac\n"
       "if [ -f \"$dir/config.json\" ]; then exec \"$kope\" run --resume \"$dir\" --quiet; fi\n"
       "exec \"$kope\" run --ops \"$ops\" --run-dir \"$dir\"";
  for (const auto& a : p.task_args) s += " " + util::shell_quote(a);
  return s + "\n";
}

// The operators split into tasks of `chunk`, in the run's order.
std::vector<Task> plan_tasks(const agent::Run& run, int chunk) {
  std::vector<Task> tasks;
  const auto& ops = run.config().ops;
  for (size_t i = 0; i < ops.size(); i += static_cast<size_t>(chunk)) {
    Task t;
    t.index = static_cast<int>(tasks.size());
    for (size_t k = i; k < std::min(ops.size(), i + static_cast<size_t>(chunk)); ++k) {
      t.ops.push_back(ops[k].name);
      t.op_dirs.push_back(ops[k].dir);
    }
    tasks.push_back(std::move(t));
  }
  return tasks;
}

// True when the task's own run finished every operator.
bool task_finished(const fs::path& run_dir, int index) {
  auto r = read_results(task_dir(run_dir, index));
  return r && r->value("complete", false);
}

// Submits `indices` as one array and records the job in the plan and the run's log.
Status submit(agent::Run& run, Plan& p, const std::vector<int>& indices, const SlurmConsole& console) {
  for (int i : indices) KOPE_TRY(util::make_dirs(task_dir(run.dir(), i)));  // Slurm opens the logs there
  fs::path script = run.dir() / "slurm" / "array.sh";
  KOPE_TRY(util::make_dirs(script.parent_path()));
  KOPE_TRY(util::write_file_atomic(script, array_script(run, p)));
  std::error_code ec;
  fs::permissions(script, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec, fs::perm_options::replace, ec);
  if (ec) return fail(ErrorKind::io, "cannot make {} executable: {}", script.string(), ec.message());
  cluster::ArrayJob job;
  job.script = script;
  job.indices = indices;
  job.name = "kope-" + run.config().run_id;
  job.output = (run.dir() / "tasks" / "%a" / "slurm-%A.log").string();
  job.chdir = p.cwd;
  job.partition = p.settings.partition;
  KOPE_ASSIGN(job.extra_args, cluster::split_shell_words(p.settings.slurm_args));
  KOPE_ASSIGN(std::string job_id, cluster::submit_array(job));
  for (auto& t : p.tasks) {
    if (std::find(indices.begin(), indices.end(), t.index) == indices.end()) continue;
    t.job_id = job_id;
    t.state.clear();
    t.reason.clear();
  }
  p.submissions.push_back({{"job_id", job_id}, {"indices", indices}, {"time", util::now_iso8601()}});
  KOPE_TRY(write_plan(run.dir(), p));
  KOPE_TRY(run.log(run::SlurmSubmittedEvent{job_id, indices}));
  console.say(fmt::format("kope run: submitted Slurm job array {} ({} task{}: {}); cancel the run with Ctrl-C", job_id,
                          indices.size(), indices.size() == 1 ? "" : "s", cluster::index_list(indices)));
  return {};
}

// A task's progress from its event log: attempts so far and operators done.
std::string task_progress(const fs::path& run_dir, const Task& t) {
  int attempts = 0, done = 0;
  if (auto events = run::read_log(task_dir(run_dir, t.index) / "events.jsonl")) {
    for (const auto& e : *events) {
      attempts += std::holds_alternative<run::AttemptEvent>(e.event);
      done += std::holds_alternative<run::OpDoneEvent>(e.event);
    }
  }
  return fmt::format("{} attempt{}, {}/{} op{} done", attempts, attempts == 1 ? "" : "s", done, t.ops.size(),
                     t.ops.size() == 1 ? "" : "s");
}

// The last lines of the task's Slurm log (the newest submission's), or why there are none.
std::string task_log_tail(const fs::path& run_dir, const Task& t, fs::path& log) {
  log = task_dir(run_dir, t.index) / fmt::format("slurm-{}.log", t.job_id);
  auto text = util::read_file(log);
  if (!text) return "(no log: the task did not start)";
  std::vector<std::string> lines = util::split(util::trim(*text), '\n');
  size_t from = lines.size() > k_log_tail_lines ? lines.size() - k_log_tail_lines : 0;
  return util::join(std::vector<std::string>(lines.begin() + static_cast<std::ptrdiff_t>(from), lines.end()), "\n");
}

// Watches the tasks not yet ended until each has (a final Slurm state, or gone from Slurm), or
// until Ctrl-C, which cancels their jobs and waits for them to end. Returns whether it cancelled.
Result<bool> watch(agent::Run& run, Plan& p, const SlurmConsole& console) {
  std::map<int, std::string> shown;
  bool cancelled = false;
  Clock::time_point cancel_deadline{};
  Clock::time_point next_query = Clock::now();
  int failures = 0;
  for (;;) {
    std::vector<Task*> open;
    for (auto& t : p.tasks) {
      if (t.state.empty() && !t.job_id.empty()) open.push_back(&t);
    }
    if (open.empty()) return cancelled;
    std::set<std::string> jobs;
    for (const Task* t : open) jobs.insert(t->job_id);
    if (!cancelled && console.cancel && console.cancel->load()) {
      cancelled = true;
      cancel_deadline = Clock::now() + k_cancel_wait;
      for (const auto& job : jobs) {
        auto st = cluster::cancel_array(job);
        console.say(st ? fmt::format("kope run: cancelled Slurm job array {} (scancel); waiting for its tasks to end", job)
                       : "kope run: " + st.error().message);
      }
    }
    if (cancelled && Clock::now() > cancel_deadline) {
      console.say("kope run: tasks still running after scancel; the run's results cover what they finished");
      return cancelled;
    }
    if (Clock::now() >= next_query) {
      next_query = Clock::now() + k_poll_interval;
      std::map<std::string, std::map<int, cluster::TaskState>> states;
      bool asked = true;
      for (const auto& job : jobs) {
        auto q = cluster::query_array(job);
        if (!q) {
          asked = false;
          if (++failures >= k_max_query_failures) {
            return fail(ErrorKind::unavailable, "{} (the array goes on; `kope run --resume {}` watches it again)",
                        q.error().message, run.dir().string());
          }
          break;
        }
        states[job] = std::move(*q);
      }
      if (!asked) continue;
      failures = 0;
      bool changed = false;
      for (Task* t : open) {
        auto it = states[t->job_id].find(t->index);
        bool gone = it == states[t->job_id].end();  // left the queue (and no accounting)
        std::string state = gone ? "ENDED" : it->second.state;
        std::string line = fmt::format("task {} [{}]: {}, {}", t->index, util::join(t->ops, ","), state, task_progress(run.dir(), *t));
        if (shown[t->index] != line) console.say("  " + line);
        shown[t->index] = line;
        if (gone || cluster::is_final_state(state)) {
          t->state = gone ? (task_finished(run.dir(), t->index) ? "COMPLETED" : "UNKNOWN") : state;
          t->reason = gone ? "no longer known to Slurm" : it->second.reason;
          KOPE_TRY(run.log(run::SlurmTaskEndedEvent{t->index, t->job_id, t->state, t->reason}));
          changed = true;
        }
      }
      if (changed) KOPE_TRY(write_plan(run.dir(), p));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
}

// The merged report, with an error per task whose run did not finish.
Result<agent::RunReport> collect(agent::Run& run, const Plan& p, bool cancelled) {
  KOPE_ASSIGN(agent::RunReport report, run.collect_tasks(cancelled));
  for (const auto& t : p.tasks) {
    if (task_finished(run.dir(), t.index)) continue;
    fs::path log;
    std::string tail = task_log_tail(run.dir(), t, log);
    std::string reason = t.reason.empty() || t.reason == "None" ? "" : fmt::format(" ({})", t.reason);
    report.errors.push_back(fmt::format("task {} [{}] did not finish: Slurm job {}_{} {}{}; the last lines of {}:\n{}", t.index,
                                        util::join(t.ops, ","), t.job_id, t.index, t.state.empty() ? "still running" : t.state,
                                        reason, log.string(), tail));
  }
  return report;
}

}  // namespace

bool is_slurm_run(const fs::path& run_dir) {
  std::error_code ec;
  return fs::exists(plan_path(run_dir), ec);
}

Result<agent::RunReport> dispatch_to_slurm(agent::Run& run, const SlurmSettings& settings,
                                           const std::vector<std::string>& task_args, const SlurmConsole& console) {
  if (settings.chunk < 1) return fail(ErrorKind::usage, "--chunk must be at least 1 (got {})", settings.chunk);
  KOPE_TRY(cluster::split_shell_words(settings.slurm_args));  // refuse a bad --slurm-args before anything is written
  Plan p;
  p.settings = settings;
  p.kope = self_exe().string();
  p.cwd = fs::current_path().string();
  p.task_args = task_args;
  p.tasks = plan_tasks(run, settings.chunk);
  KOPE_TRY(run.log_started("slurm", static_cast<int64_t>(p.tasks.size())));
  std::vector<int> all;
  for (const auto& t : p.tasks) all.push_back(t.index);
  KOPE_TRY(submit(run, p, all, console));
  KOPE_ASSIGN(bool cancelled, watch(run, p, console));
  return collect(run, p, cancelled);
}

Result<agent::RunReport> resume_on_slurm(agent::Run& run, const SlurmConsole& console) {
  KOPE_ASSIGN(Plan p, read_plan(run.dir()));
  KOPE_TRY(run.log_started("slurm", static_cast<int64_t>(p.tasks.size())));
  std::map<std::string, std::map<int, cluster::TaskState>> states;
  std::vector<int> again;
  for (auto& t : p.tasks) {
    if (task_finished(run.dir(), t.index)) continue;
    std::optional<cluster::TaskState> now;
    if (!t.job_id.empty()) {
      if (!states.contains(t.job_id)) {
        KOPE_ASSIGN(states[t.job_id], cluster::query_array(t.job_id));
      }
      const auto& known = states[t.job_id];
      if (auto it = known.find(t.index); it != known.end()) now = it->second;
    }
    if (now && !cluster::is_final_state(now->state)) {
      t.state.clear();  // still pending or running: watched, not submitted twice
      console.say(fmt::format("kope run: task {} is still {} in Slurm job {}; watching it", t.index, now->state, t.job_id));
      continue;
    }
    again.push_back(t.index);
  }
  KOPE_TRY(write_plan(run.dir(), p));
  if (!again.empty()) {
    KOPE_TRY(submit(run, p, again, console));
  } else {
    console.say("kope run: no task needs submitting again");
  }
  KOPE_ASSIGN(bool cancelled, watch(run, p, console));
  return collect(run, p, cancelled);
}

}  // namespace kope::cli
