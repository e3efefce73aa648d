#include "agent/run.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <set>
#include <ctime>
#include <random>
#include <thread>

#include <fmt/format.h>

#include "agent/results.h"
#include "util/fs.h"

#ifndef KOPE_VERSION
#define KOPE_VERSION "0"
#endif

namespace kope::agent {

using nlohmann::json;

namespace {

constexpr int k_config_version = 1;

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

std::string new_run_id() {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  std::random_device rd;
  return fmt::format("{:04}{:02}{:02}-{:02}{:02}{:02}-{:04x}", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour,
                     tm.tm_min, tm.tm_sec, rd() & 0xffff);
}

json loop_config_to_json(const LoopConfig& c) {
  return json{{"policy", c.policy},
              {"max_iterations", c.max_iterations},
              {"token_budget", c.token_budget},
              {"time_limit_seconds", c.time_limit_seconds},
              {"roofline_target", c.roofline_target},
              {"patience", c.patience},
              {"min_improvement", c.min_improvement},
              {"max_consecutive_repairs", c.max_consecutive_repairs},
              {"notable_speedup", c.notable_speedup},
              {"reflect", c.reflect},
              {"context_mode", std::string(context::mode_name(c.mode))},
              {"budget",
               {{"window", c.budget.window},
                {"generation", c.budget.generation},
                {"recency_reserve", c.budget.recency_reserve},
                {"warm_cap", c.budget.warm_cap},
                {"cold_cap", c.budget.cold_cap}}},
              {"retrieval_limit", c.retrieval_limit},
              {"passive_retrieval_limit", c.passive_retrieval_limit},
              {"replay_limit", c.replay_limit},
              {"replay_all", c.replay_all},
              {"seed", c.seed ? json(*c.seed) : json(nullptr)},
              {"eval", {{"target_ci", c.eval_options.target_ci}, {"max_seconds_per_case", c.eval_options.max_seconds_per_case},
                        {"fast_verdict", c.fast_verdict}}},
              {"backoff_seconds", c.backoff_seconds},
              {"context_shrink_retries", c.context_shrink_retries}};
}

Result<LoopConfig> loop_config_from_json(const json& j) {
  try {
    LoopConfig c;
    c.policy = j.at("policy").get<std::string>();
    c.max_iterations = j.at("max_iterations").get<int>();
    c.token_budget = j.at("token_budget").get<int64_t>();
    c.time_limit_seconds = j.at("time_limit_seconds").get<double>();
    c.roofline_target = j.at("roofline_target").get<double>();
    c.patience = j.at("patience").get<int>();
    c.min_improvement = j.at("min_improvement").get<double>();
    c.max_consecutive_repairs = j.at("max_consecutive_repairs").get<int>();
    c.notable_speedup = j.at("notable_speedup").get<double>();
    c.reflect = j.at("reflect").get<bool>();
    auto mode = context::parse_mode(j.at("context_mode").get<std::string>());
    if (!mode) return fail(ErrorKind::corrupt, "unknown context mode {}", j.at("context_mode").dump());
    c.mode = *mode;
    const json& b = j.at("budget");
    c.budget.window = b.at("window").get<int64_t>();
    c.budget.generation = b.at("generation").get<int64_t>();
    c.budget.recency_reserve = b.at("recency_reserve").get<int64_t>();
    c.budget.warm_cap = b.at("warm_cap").get<double>();
    c.budget.cold_cap = b.at("cold_cap").get<double>();
    c.retrieval_limit = j.at("retrieval_limit").get<int>();
    c.passive_retrieval_limit = j.at("passive_retrieval_limit").get<int>();
    c.replay_limit = j.at("replay_limit").get<int>();
    c.replay_all = j.value("replay_all", true);  // runs made before the setting tried every kernel
    if (!j.at("seed").is_null()) c.seed = j.at("seed").get<uint64_t>();
    c.eval_options.target_ci = j.at("eval").at("target_ci").get<double>();
    c.eval_options.max_seconds_per_case = j.at("eval").at("max_seconds_per_case").get<double>();
    c.fast_verdict = j.at("eval").value("fast_verdict", true);
    c.backoff_seconds = j.at("backoff_seconds").get<std::vector<double>>();
    c.context_shrink_retries = j.at("context_shrink_retries").get<int>();
    return c;
  } catch (const json::exception& e) {
    return fail(ErrorKind::corrupt, "malformed loop settings: {}", e.what());
  }
}

json config_to_json(const RunConfig& c) {
  json ops = json::array();
  for (const auto& o : c.ops) ops.push_back({{"name", o.name}, {"dir", o.dir}, {"spec_hash", o.spec_hash}});
  return json{{"version", k_config_version},
              {"kope_version", KOPE_VERSION},
              {"run_id", c.run_id},
              {"created_at", c.created_at},
              {"selectors", c.selectors},
              {"level", c.level},
              {"backend", c.backend},
              {"suite_root", c.suite_root},
              {"loop", loop_config_to_json(c.loop)},
              {"jobs", c.jobs},
              {"seed", c.seed},
              {"memory", c.memory_path},
              {"library_config", c.library_config},
              {"llm_profile", c.llm_profile},
              {"model", c.model},
              {"target", c.target},
              {"toolchain", c.toolchain},
              {"ops", ops}};
}

Result<RunConfig> config_from_json(const json& j) {
  try {
    if (j.value("version", 0) != k_config_version) {
      return fail(ErrorKind::corrupt, "config.json has format version {} (this kope reads {})", j.value("version", 0),
                  k_config_version);
    }
    RunConfig c;
    c.run_id = j.at("run_id").get<std::string>();
    c.created_at = j.value("created_at", "");
    c.selectors = j.value("selectors", std::vector<std::string>{});
    c.level = j.value("level", 0);
    c.backend = j.value("backend", "cpu");
    c.suite_root = j.value("suite_root", "");
    KOPE_ASSIGN(c.loop, loop_config_from_json(j.at("loop")));
    c.jobs = j.value("jobs", 1);
    c.seed = j.value("seed", uint64_t{0});
    c.memory_path = j.value("memory", "");
    c.library_config = j.value("library_config", "environment");
    c.llm_profile = j.value("llm_profile", "");
    c.model = j.value("model", json::object());
    c.target = j.value("target", "");
    c.toolchain = j.value("toolchain", "");
    for (const auto& o : j.at("ops")) {
      c.ops.push_back({o.at("name").get<std::string>(), o.at("dir").get<std::string>(), o.value("spec_hash", "")});
    }
    return c;
  } catch (const json::exception& e) {
    return fail(ErrorKind::corrupt, "malformed config.json: {}", e.what());
  }
}

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
  if (config.created_at.empty()) config.created_at = now_iso8601();
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
              {"policy", m_config.loop.policy},
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

Status Run::write_results(bool complete) {
  json r = results(complete);
  return util::write_file_atomic(m_dir / "results.json", r.dump(2) + "\n");
}

Result<RunReport> Run::execute(RunServices& services) {
  SharedEstimator estimator;
  std::atomic<bool> abort{false};
  std::atomic<bool> never{false};
  std::atomic<bool>* user_cancel = services.cancel ? services.cancel : &never;
  std::vector<const spec::OpSpec*> known;
  for (const auto& op : services.known_ops) known.push_back(&op);
  for (const auto& op : m_ops) known.push_back(&op);

  OpEnvironment env;
  env.evaluator = services.evaluator;
  env.store = services.store;
  env.llm = services.llm;
  env.hw = services.hw;
  HardwareGuide guide = services.guide ? *services.guide : describe_hardware_guide(services.evaluator->backend());
  env.guide = &guide;
  env.prompts = services.prompts;
  env.estimator = &estimator;
  env.events = m_events.get();
  env.run_dir = m_dir;
  env.run_id = m_config.run_id;
  env.config = &m_config.loop;
  env.cancel = user_cancel;
  env.abort = &abort;
  env.progress = services.progress;
  env.known_ops = known;

  KOPE_TRY(m_events->append({{"type", m_resumed ? "run_resumed" : "run_started"},
                             {"run_id", m_config.run_id},
                             {"ops", m_ops.size()},
                             {"jobs", m_config.jobs}}));
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
      if (i >= todo.size() || user_cancel->load() || abort.load()) return;
      const spec::OpSpec& op = m_ops[todo[i]];
      OpState* st;
      {
        std::lock_guard lock(m_mutex);
        st = &m_states[op.name];
      }
      auto end = run_op(env, op, *st);
      if (!end) {
        std::lock_guard lock(report_mutex);
        report.errors.push_back(op.name + ": " + end.error().message);
        // A problem of this op alone (its spec or reference) leaves the others running; anything
        // else (evaluator, memory, model credentials, disk) stops the run.
        ErrorKind kind = end.error().kind;
        if (kind != ErrorKind::config && kind != ErrorKind::not_found) abort = true;
        (void)m_events->append({{"type", "op_error"}, {"op", op.name}, {"message", end.error().message}});
      } else if (*end != OpEnd::finished) {
        if (*end == OpEnd::llm_unavailable) {
          std::lock_guard lock(report_mutex);
          for (const auto& e : st->errors) report.errors.push_back(op.name + ": " + e);
        }
      }
      std::lock_guard lock(report_mutex);
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
  report.complete = complete;
  report.cancelled = !complete && user_cancel->load();
  KOPE_TRY(write_results(complete));
  report.results = results(complete);
  report.results_path = m_dir / "results.json";
  KOPE_TRY(m_events->append({{"type", complete ? "run_finished" : "run_stopped"},
                             {"complete", complete},
                             {"cancelled", report.cancelled},
                             {"errors", report.errors}}));
  return report;
}

}  // namespace kope::agent
