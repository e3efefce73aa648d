#include "agent/run.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <set>
#include <ctime>
#include <random>
#include <thread>

#include <fmt/format.h>

#include "run/results.h"
#include "run/tasks.h"
#include "util/fs.h"
#include "util/time.h"

#ifndef KOPE_VERSION
#define KOPE_VERSION "0"
#endif

namespace kope::agent {

using nlohmann::json;

namespace {

// What a run's lock file says about its holder: " (pid N)", or "" when it has not written its
// pid yet (it has just started).
std::string lock_holder(int fd) {
  char buf[32] = {};
  ssize_t n = ::pread(fd, buf, sizeof buf - 1, 0);
  if (n <= 0) return "";
  std::string text(buf, static_cast<size_t>(n));
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  if (text.empty() || text.find_first_not_of("0123456789") != std::string::npos) return "";
  return " (pid " + text + ")";
}

// Locks the run directory for this process for as long as the Run lives: flock on DIR/.lock
// (the kernel drops it when the process dies, so a killed run never stays locked), then this
// process's pid into the file, so that a second kope can say who holds it.
Result<int> lock_dir(const fs::path& dir) {
  fs::path p = dir / ".lock";
  int fd = ::open(p.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return fail(ErrorKind::io, "cannot open {}: {}", p.string(), std::strerror(errno));
  int rc;
  do {
    rc = ::flock(fd, LOCK_EX | LOCK_NB);
  } while (rc != 0 && errno == EINTR);
  if (rc != 0) {
    int saved = errno;
    std::string holder = lock_holder(fd);
    ::close(fd);
    if (saved != EWOULDBLOCK) return fail(ErrorKind::io, "cannot lock {}: {}", p.string(), std::strerror(saved));
    return fail(ErrorKind::usage,
                "the run directory {} is in use by another kope process{}; wait for it to end (or stop it), or choose "
                "another --run-dir",
                dir.string(), holder);
  }
  std::string pid = fmt::format("{}\n", ::getpid());
  if (::ftruncate(fd, 0) != 0 || ::pwrite(fd, pid.data(), pid.size(), 0) != static_cast<ssize_t>(pid.size())) {
    int saved = errno;
    ::close(fd);
    return fail(ErrorKind::io, "cannot write {}: {}", p.string(), std::strerror(saved));
  }
  return fd;
}

}  // namespace

Result<std::unique_ptr<Run>> Run::create(RunConfig config, std::vector<spec::OpSpec> ops, const fs::path& dir) {
  // The lock first: a run that another process is creating in `dir` right now is in use, not free.
  KOPE_TRY(util::make_dirs(dir));
  std::unique_ptr<Run> run(new Run());
  run->m_dir = dir;
  KOPE_ASSIGN(run->m_lock_fd, lock_dir(dir));
  std::error_code ec;
  if (fs::exists(dir / "config.json", ec)) {
    return fail(ErrorKind::usage, "{} already holds a run (resume it with --resume {})", dir.string(), dir.string());
  }
  config.ops.clear();
  std::set<std::string> names;
  for (const auto& op : ops) {
    if (!names.insert(op.name).second) {
      return fail(ErrorKind::usage, "two selected operators are both named '{}' ({}); select one of them", op.name,
                  op.dir.string());
    }
    config.ops.push_back({op.name, fs::absolute(op.dir).lexically_normal().string(), op.spec_hash});
  }
  if (config.created_at.empty()) config.created_at = util::now_iso8601();
  KOPE_TRY(util::write_file_atomic(dir / "config.json", config_to_json(config).dump(2) + "\n"));
  KOPE_ASSIGN(run->m_events, EventLog::open(dir / "events.jsonl"));
  run->m_config = std::move(config);
  run->m_ops = std::move(ops);
  return run;
}

Result<std::unique_ptr<Run>> Run::open(const fs::path& dir) {
  std::error_code ec;
  if (!fs::exists(dir / "config.json", ec)) {
    return fail(ErrorKind::not_found, "{} is not a run directory (no config.json)", dir.string());
  }
  std::unique_ptr<Run> run(new Run());
  run->m_dir = dir;
  run->m_resumed = true;
  KOPE_ASSIGN(run->m_lock_fd, lock_dir(dir));
  KOPE_ASSIGN(std::string text, util::read_file(dir / "config.json"));
  json j = json::parse(text, nullptr, false);
  if (j.is_discarded()) return fail(ErrorKind::corrupt, "{}: not valid JSON", (dir / "config.json").string());
  auto cfg = config_from_json(j);
  if (!cfg) return std::unexpected(std::move(cfg.error()).with_context((dir / "config.json").string() + ": "));
  run->m_config = std::move(*cfg);
  for (const auto& ref : run->m_config.ops) {
    auto op = spec::load_op(ref.dir);
    if (!op) return std::unexpected(std::move(op.error()).with_context("resuming " + dir.string() + ": "));
    if (!ref.spec_hash.empty() && op->spec_hash != ref.spec_hash) {
      return fail(ErrorKind::config, "operator {} ({}) changed since the run started (its spec hash differs); start a new run",
                  ref.name, ref.dir);
    }
    run->m_ops.push_back(std::move(*op));
  }
  fs::path events = dir / "events.jsonl";
  if (fs::exists(events, ec)) {
    KOPE_ASSIGN(auto list, read_events(events));
    KOPE_ASSIGN(run->m_states, restore_states(list));
  }
  KOPE_ASSIGN(run->m_events, EventLog::open(events));
  return run;
}

Status Run::set_jobs(int jobs) {
  m_config.jobs = std::max(1, jobs);
  return util::write_file_atomic(m_dir / "config.json", config_to_json(m_config).dump(2) + "\n");
}

Status Run::set_machine(const std::string& target, const std::string& toolchain) {
  m_config.target = target;
  m_config.toolchain = toolchain;
  return util::write_file_atomic(m_dir / "config.json", config_to_json(m_config).dump(2) + "\n");
}

Run::~Run() {
  if (m_lock_fd >= 0) ::close(m_lock_fd);
}

json Run::results(bool complete) const {
  json header{{"kope_version", KOPE_VERSION},
              {"run_id", m_config.run_id},
              {"run_dir", fs::absolute(m_dir).string()},
              {"created_at", m_config.created_at},
              {"complete", complete},
              {"policy", std::string(run::policy_name(m_config.loop.policy))},
              {"context_mode", std::string(context::mode_name(m_config.loop.mode))},
              {"backend", m_config.backend},
              {"target", m_config.target},
              {"toolchain", m_config.toolchain},
              {"model", m_config.model},
              {"seed", m_config.seed},
              {"memory", m_config.memory_path},
              {"selection", {{"selectors", m_config.selectors}, {"level", m_config.level}}},
              {"settings", loop_config_to_json(m_config.loop)}};
  std::lock_guard lock(m_mutex);
  return compute_results(header, m_ops, m_states);
}

namespace {

// The distinct values of `key` in the tasks' config.json, joined by "," in task order.
std::string tasks_config_value(const std::vector<fs::path>& tasks, const char* key) {
  std::vector<std::string> seen;
  for (const auto& dir : tasks) {
    auto text = util::read_file(dir / "config.json");
    if (!text) continue;
    json j = json::parse(*text, nullptr, false);
    std::string v = j.is_object() ? j.value(key, std::string()) : std::string();
    if (!v.empty() && std::find(seen.begin(), seen.end(), v) == seen.end()) seen.push_back(v);
  }
  std::string joined;
  for (const auto& v : seen) joined += (joined.empty() ? "" : ",") + v;
  return joined;
}

}  // namespace

Result<RunReport> Run::collect_tasks(bool cancelled) {
  std::vector<fs::path> tasks = run::task_dirs(m_dir);
  KOPE_ASSIGN(auto events, run::task_op_events(m_dir));
  KOPE_ASSIGN(auto states, restore_states(events));
  KOPE_TRY(set_machine(tasks_config_value(tasks, "target"), tasks_config_value(tasks, "toolchain")));
  bool complete = true;
  {
    std::lock_guard lock(m_mutex);
    m_states.clear();
    for (const auto& op : m_ops) {
      m_states[op.name] = states[op.name];
      complete = complete && m_states[op.name].done;
    }
  }
  RunReport report;
  run::RunEndedEvent end;
  end.tasks = static_cast<int64_t>(tasks.size());
  KOPE_TRY(finish(report, complete, cancelled, std::move(end)));
  return report;
}

Status Run::log_started(const std::string& executor, std::optional<int64_t> tasks) {
  run::RunStartedEvent e;
  e.resumed = m_resumed;
  e.run_id = m_config.run_id;
  e.ops = static_cast<int64_t>(m_ops.size());
  if (executor.empty()) e.jobs = m_config.jobs;
  e.executor = executor;
  e.tasks = tasks;
  return m_events->append(e);
}

Status Run::finish(RunReport& report, bool complete, bool cancelled, run::RunEndedEvent end) {
  report.complete = complete;
  report.cancelled = !complete && cancelled;
  KOPE_TRY(write_results(complete));
  report.results = results(complete);
  report.results_path = m_dir / "results.json";
  end.complete = complete;
  end.cancelled = report.cancelled;
  return m_events->append(end);
}

Status Run::write_results(bool complete) {
  json r = results(complete);
  return util::write_file_atomic(m_dir / "results.json", r.dump(2) + "\n");
}

namespace {

// What the loops of one execute() share besides the run's services.
struct Shared {
  SharedEstimator estimator;
  HardwareGuide guide;
  std::atomic<bool> abort{false};  // an op hit an error the run cannot go on from
  std::atomic<bool> never{false};  // the cancel flag without a user's
};

OpEnvironment op_environment(RunServices& services, Shared& shared, const std::vector<const spec::OpSpec*>& known) {
  OpEnvironment env;
  env.evaluator = services.evaluator;
  env.store = services.store;
  env.llm = services.llm;
  env.hw = &services.evaluator->hardware();  // one hardware: what the evaluator judges on (a GPU's for CUDA)
  shared.guide = services.guide ? *services.guide : describe_hardware_guide(services.evaluator->backend());
  env.guide = &shared.guide;
  env.prompts = services.prompts;
  env.estimator = &shared.estimator;
  env.cancel = services.cancel ? services.cancel : &shared.never;
  env.abort = &shared.abort;
  env.progress = services.progress;
  env.known_ops = known;
  return env;
}

// The contamination guard over the run's ops: their names and spec hashes, the run's own
// experience excepted.
memory::Holdout holdout_of(const RunConfig& config) {
  memory::Holdout h;
  h.run_id = config.run_id;
  for (const auto& op : config.ops) {
    h.ops.insert(op.name);
    if (!op.spec_hash.empty()) h.spec_hashes.insert(op.spec_hash);
  }
  return h;
}

// Notes how an op's loop ended in the report (the caller holds the report's lock).
void note_op_end(const spec::OpSpec& op, const Result<OpEnd>& end, const OpState& st, RunReport& report,
                 std::atomic<bool>& abort, EventLog& events) {
  if (!end) {
    report.errors.push_back(op.name + ": " + end.error().message);
    // A problem of this op alone (its spec or reference) leaves the others running; anything
    // else (evaluator, memory, model credentials, disk) stops the run.
    ErrorKind kind = end.error().kind;
    if (kind != ErrorKind::config && kind != ErrorKind::not_found) abort = true;
    (void)events.append(run::OpErrorEvent{end.error().message}, op.name);
  } else if (*end == OpEnd::llm_unavailable) {
    for (const auto& e : st.errors) report.errors.push_back(op.name + ": " + e);
  }
}

}  // namespace

Result<RunReport> Run::execute(RunServices& services) {
  Shared shared;
  std::vector<const spec::OpSpec*> known;
  for (const auto& op : services.known_ops) known.push_back(&op);
  for (const auto& op : m_ops) known.push_back(&op);
  OpEnvironment env = op_environment(services, shared, known);
  env.events = m_events.get();
  env.run_dir = m_dir;
  env.run_id = m_config.run_id;
  env.config = &m_config.loop;
  if (m_config.holdout) env.holdout = holdout_of(m_config);
  const std::atomic<bool>* user_cancel = env.cancel;

  KOPE_TRY(log_started());
  std::vector<size_t> todo;
  {
    std::lock_guard lock(m_mutex);
    for (size_t i = 0; i < m_ops.size(); ++i) {
      OpState& st = m_states[m_ops[i].name];  // create entries before threads start
      if (!st.done) todo.push_back(i);
    }
  }
  std::atomic<size_t> next{0};
  std::mutex report_mutex;
  RunReport report;
  auto worker = [&] {
    for (;;) {
      size_t i = next.fetch_add(1);
      if (i >= todo.size() || user_cancel->load() || shared.abort.load()) return;
      const spec::OpSpec& op = m_ops[todo[i]];
      OpState* st;
      {
        std::lock_guard lock(m_mutex);
        st = &m_states[op.name];
      }
      auto end = run_op(env, op, *st);
      std::lock_guard lock(report_mutex);
      note_op_end(op, end, *st, report, shared.abort, *m_events);
      (void)write_results(false);
    }
  };
  int n = std::max(1, std::min<int>(m_config.jobs, static_cast<int>(todo.size())));
  std::vector<std::thread> threads;
  for (int t = 1; t < n; ++t) threads.emplace_back(worker);
  worker();
  for (auto& t : threads) t.join();

  bool complete = true;
  for (const auto& op : m_ops) complete = complete && m_states[op.name].done;
  run::RunEndedEvent end;
  end.errors = report.errors;
  KOPE_TRY(finish(report, complete, user_cancel->load(), std::move(end)));
  return report;
}

}  // namespace kope::agent
