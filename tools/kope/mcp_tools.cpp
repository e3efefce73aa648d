#include "mcp_tools.h"

#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstring>
#include <fstream>
#include <future>
#include <random>
#include <thread>
#include <variant>

#include <fmt/format.h>

#include "agent/loop.h"
#include "child_run.h"
#include "cli_json.h"
#include "eval/registry.h"
#include "kope/eval.h"
#include "kope/hw.h"
#include "kope/memory.h"
#include "kope/spec.h"
#include "kope/verdict.h"
#include "memory/json_io.h"
#include "run/events.h"
#include "util/fs.h"
#include "util/strings.h"
#include "util/subprocess.h"
#include "util/time.h"

namespace kope::cli {

namespace fs = std::filesystem;
namespace mem = kope::memory;
using nlohmann::json;
using mcp::ToolContext;
using mcp::ToolOutcome;

// A run started by start_run: its child `kope run`, and the thread that copies the child's output
// into the run's log and reaps it.
struct McpKope::StartedRun {
  std::string name;
  fs::path dir;
  fs::path log;
  std::vector<std::string> argv;
  std::optional<util::Process> process;
  std::thread drain;
  std::atomic<bool> finished{false};
  util::ExitStatus status;  // valid once finished
};

namespace {

constexpr size_t k_child_output_cap = 32u << 20;
constexpr auto k_poll_interval = std::chrono::milliseconds(100);
constexpr auto k_progress_interval = std::chrono::seconds(1);
// How long stopping the server waits for a started run to stop after SIGINT before killing it.
constexpr auto k_run_stop_grace = std::chrono::seconds(5);

// --- JSON Schema helpers

json str(std::string_view description) { return {{"type", "string"}, {"description", description}}; }
json num(std::string_view description) { return {{"type", "number"}, {"description", description}}; }
json integer(std::string_view description) { return {{"type", "integer"}, {"description", description}}; }
json boolean(std::string_view description) { return {{"type", "boolean"}, {"description", description}}; }
json nullable(std::string_view type, std::string_view description) {
  return {{"type", json::array({type, "null"})}, {"description", description}};
}
json array_of(json items, std::string_view description) { return {{"type", "array"}, {"items", std::move(items)}, {"description", description}}; }
json one_of(const std::vector<std::string>& values, std::string_view description) {
  return {{"type", "string"}, {"enum", values}, {"description", description}};
}
json object(json properties, std::vector<std::string> required = {}, bool closed = true) {
  json o{{"type", "object"}, {"properties", std::move(properties)}};
  if (!required.empty()) o["required"] = required;
  if (closed) o["additionalProperties"] = false;
  return o;
}

const json k_suite_property = str("Suite root that op names are looked up in (default: the server's --suite, else the built-in ops/)");
const json k_memory_property = str("Memory database: a file or a postgresql:// URL (default: the server's --memory, else $KOPE_MEMORY, "
                                   "else <data dir>/memory.db)");

json eval_result_schema() {
  return object({{"verdict", one_of(eval::verdict_name_list(), "kope's verdict on the kernel")},
                 {"message", str("One line a person (and a model) can act on")},
                 {"diagnostics", str("Trimmed compiler errors or stderr")},
                 {"op", str("The op")},
                 {"target", str("The target it ran on, e.g. x86_64-avx2-fma")},
                 {"toolchain", str("Compiler version and flags")},
                 {"code_hash", str("SHA-256 of the source")},
                 {"seed", integer("The data seed")},
                 {"cases", array_of(json{{"type", "object"}}, "Per-case verification: ok, max_abs_err, first_mismatch")},
                 {"timing", array_of(json{{"type", "object"}}, "Per timed case: median_us, ci95_us, reference_us, library_us, "
                                                               "roofline_us, fraction_of_roofline")},
                 {"speedup_vs_reference", nullable("number", "Geometric mean over the timed cases")},
                 {"speedup_vs_library", nullable("number", "Geometric mean over the timed cases with a library time")},
                 {"fraction_of_roofline", nullable("number", "Geometric mean share of the working-set roofline")}},
                {"verdict", "message", "op"}, false);
}

std::string first_line(std::string_view s) { return std::string(util::trim(s.substr(0, s.find('\n')))); }

// --- child processes of this executable (`kope eval`, `kope bench`)

struct ChildResult {
  util::ExitStatus status;
  std::string out, err;
};

// Runs `kope ARGS...`, passing each line it writes to stderr to `on_line` and calling `tick`
// about once a second with the seconds elapsed. Cancelled (ctx.cancelled()): kills the child's
// process group (its sandboxed processes die with it) and fails.
Result<ChildResult> run_kope(const std::vector<std::string>& args, ToolContext& ctx, const std::function<void(const std::string&)>& on_line,
                             const std::function<void(double)>& tick) {
  util::SpawnOptions so;
  so.argv = {self_exe().string()};
  so.argv.insert(so.argv.end(), args.begin(), args.end());
  KOPE_ASSIGN(util::Process p, util::Process::spawn(so));
  ChildResult r;
  pollfd fds[2] = {{p.stdout_fd(), POLLIN, 0}, {p.stderr_fd(), POLLIN, 0}};
  std::string* sinks[2] = {&r.out, &r.err};
  size_t line_start = 0;
  const auto start = std::chrono::steady_clock::now();
  auto last_tick = start;
  char buf[65536];
  while (fds[0].fd >= 0 || fds[1].fd >= 0) {
    int n = ::poll(fds, 2, static_cast<int>(k_poll_interval.count()));
    if (n < 0 && errno != EINTR) return fail(ErrorKind::io, "poll: {}", std::strerror(errno));
    for (int i = 0; i < 2 && n > 0; ++i) {
      if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      ssize_t got = ::read(fds[i].fd, buf, sizeof buf);
      if (got < 0 && errno == EINTR) continue;
      if (got <= 0) {
        fds[i].fd = -1;
        continue;
      }
      if (sinks[i]->size() < k_child_output_cap) sinks[i]->append(buf, static_cast<size_t>(got));
    }
    for (size_t nl; (nl = r.err.find('\n', line_start)) != std::string::npos; line_start = nl + 1) {
      if (on_line) on_line(r.err.substr(line_start, nl - line_start));
    }
    if (ctx.cancelled()) {
      p.kill_group(SIGKILL);
      p.wait();
      return fail(ErrorKind::io, "cancelled: `kope {}` was stopped", args.empty() ? "" : args.front());
    }
    auto now = std::chrono::steady_clock::now();
    if (tick && now - last_tick >= k_progress_interval) {
      last_tick = now;
      tick(std::chrono::duration<double>(now - start).count());
    }
  }
  r.status = p.wait();
  return r;
}

// Why a child failed: its "kope: error: ..." line(s), else how it ended.
std::string child_error(const ChildResult& r) {
  std::string err(util::trim(r.err));
  size_t at = err.rfind("kope: error: ");
  if (at != std::string::npos) return std::string(util::trim(std::string_view(err).substr(at + 13)));
  if (!err.empty()) return util::truncate_text(err, 4000, 40);
  return "kope " + r.status.describe();
}

std::string arg(const json& a, const char* key, const std::string& fallback = "") {
  return a.contains(key) && a[key].is_string() ? a[key].get<std::string>() : fallback;
}

// "--name=value": a value that begins with '-' is never read as an option.
std::string opt(std::string_view name, std::string_view value) { return fmt::format("--{}={}", name, value); }
std::string number(double v) { return fmt::format("{}", v); }

fs::path resolve_suite(const json& a, const McpSettings& s) {
  std::string suite = arg(a, "suite", s.suite);
  return suite.empty() ? spec::default_ops_dir() : fs::path(suite);
}

std::string memory_of(const json& a, const McpSettings& s) { return arg(a, "memory", s.memory); }

std::string kernel_file_name(const std::string& backend) {
  if (backend == "opencl") return "kernel.cl";
  if (backend == "cuda") return "kernel.cu";
  return "kernel.cpp";
}

// `kope eval ... --json` of `source` for the arguments of eval_kernel / record_attempt.
Result<json> evaluate(const json& a, const McpSettings& s, ToolContext& ctx, std::string_view what, ChildResult* raw = nullptr) {
  KOPE_ASSIGN(util::TempDir dir, util::TempDir::create("kope-mcp-kernel"));
  std::string backend = arg(a, "backend", std::string(eval::default_backend_name()));
  fs::path kernel = dir.path() / kernel_file_name(backend);
  KOPE_TRY(util::write_file_atomic(kernel, a["source"].get<std::string>()));
  std::vector<std::string> args = {"eval", kernel.string(), opt("op", a["op"].get<std::string>()), "--json", opt("backend", backend)};
  args.push_back(opt("suite", resolve_suite(a, s).string()));
  if (a.value("no_time", false)) args.push_back("--no-time");
  if (a.contains("seed")) args.push_back(opt("seed", std::to_string(a["seed"].get<uint64_t>())));
  double max_seconds = a.value("max_seconds", s.eval_max_seconds);
  if (max_seconds > 0) args.push_back(opt("max-seconds", number(max_seconds)));
  double target_ci = a.value("target_ci", s.eval_ci);
  if (target_ci > 0) args.push_back(opt("target-ci", number(target_ci)));
  for (const auto& f : a.value("flags", json::array())) args.push_back(opt("flag", f.get<std::string>()));
  if (a.contains("threads")) args.push_back(opt("threads", std::to_string(a["threads"].get<int>())));
  if (a.contains("library_config")) args.push_back(opt("library-config", a["library_config"].get<std::string>()));
  if (a.contains("incumbent_source")) {
    fs::path incumbent = dir.path() / ("incumbent-" + kernel_file_name(backend));
    KOPE_TRY(util::write_file_atomic(incumbent, a["incumbent_source"].get<std::string>()));
    args.push_back(opt("incumbent", incumbent.string()));
  }
  ctx.progress(0, std::nullopt, fmt::format("{}: compiling and verifying in the sandbox", what));
  KOPE_ASSIGN(ChildResult r, run_kope(args, ctx, [&](const std::string& line) {
    if (!util::trim(line).empty()) ctx.progress(0.5, std::nullopt, first_line(line));
  }, [&](double seconds) { ctx.progress(seconds, std::nullopt, fmt::format("{}: {:.0f} s", what, seconds)); }));
  json j = json::parse(r.out, nullptr, false);
  if (raw) *raw = r;
  if (!j.is_object() || !j.contains("verdict")) return fail(ErrorKind::usage, "{}", child_error(r));
  return j;
}

// --- run directories

std::string random_suffix() {
  std::random_device rd;
  return fmt::format("{:04x}", rd() & 0xffff);
}

struct RunEvents {
  int64_t ops_total = -1;
  std::string run_id;
  struct Op {
    bool started = false, done = false;
    int attempts = 0, correct = 0;
    std::string stop_reason;
    std::optional<double> best_speedup;
  };
  std::map<std::string, Op> ops;
  int64_t events = 0;
};

// The run's progress from its event log, read leniently (the run may be writing it): a line
// that is not JSON, or an event run::parse_event cannot read, is counted and otherwise skipped.
RunEvents read_events(const fs::path& dir) {
  RunEvents ev;
  auto text = util::read_file(dir / "events.jsonl");
  if (!text) return ev;
  for (const auto& line : util::split(*text, '\n')) {
    json j = json::parse(line, nullptr, false);
    if (!j.is_object()) continue;  // a line being written
    ++ev.events;
    auto e = run::parse_event(j);
    if (!e) continue;
    if (const auto* s = std::get_if<run::RunStartedEvent>(&e->event)) {
      if (s->ops) ev.ops_total = *s->ops;
      ev.run_id = s->run_id;
      continue;
    }
    if (e->op.empty()) continue;
    auto& op = ev.ops[e->op];
    if (std::holds_alternative<run::OpStartedEvent>(e->event)) {
      op.started = true;
    } else if (const auto* at = std::get_if<run::AttemptEvent>(&e->event)) {
      ++op.attempts;
      if (at->attempt.correct()) {
        ++op.correct;
        if (const auto& v = at->attempt.speedup_vs_reference; v && (!op.best_speedup || *v > *op.best_speedup)) {
          op.best_speedup = *v;
        }
      }
    } else if (const auto* d = std::get_if<run::OpDoneEvent>(&e->event)) {
      op.done = true;
      op.stop_reason = d->stop_reason;
    }
  }
  return ev;
}

// Why `arguments` name a file, for a server that accepts no paths from its clients; nullopt when
// they name none.
std::optional<std::string> path_argument(const json& arguments) {
  for (const char* key : {"memory", "suite"}) {
    if (arguments.contains(key)) return fmt::format("\"{}\"", key);
  }
  for (const char* key : {"op", "run", "ops"}) {
    if (!arguments.contains(key)) continue;
    const json& v = arguments[key];
    for (const json& item : v.is_array() ? v : json::array({v})) {
      if (item.is_string() && item.get<std::string>().find('/') != std::string::npos) {
        return fmt::format("\"{}\": {}", key, item.get<std::string>());
      }
    }
  }
  return std::nullopt;
}

bool safe_name(std::string_view name) {
  return !name.empty() && name != "." && name != ".." && name.find('/') == std::string_view::npos && name.find('\0') == std::string_view::npos;
}

std::string tail_of(const fs::path& file, size_t bytes) {
  auto text = util::read_file(file);
  if (!text) return "";
  return text->size() <= bytes ? *text : text->substr(text->size() - bytes);
}

}  // namespace

// The tools' code, with access to the server's state.
struct McpTools {
  McpKope& k;
  const McpSettings& s() const { return k.m_settings; }

  Result<ToolOutcome> list_ops(const json& a) {
    KOPE_ASSIGN(spec::Suite suite, spec::load_suite(resolve_suite(a, s())));
    json ops = json::array();
    for (const auto& op : suite.ops) ops.push_back(op_summary_json(op));
    return ToolOutcome{json{{"ops", ops}}};
  }

  Result<ToolOutcome> show_op(const json& a) {
    KOPE_ASSIGN(spec::OpSpec op, spec::resolve_op(a["op"].get<std::string>(), resolve_suite(a, s())));
    json j = op_json(op);
    KOPE_ASSIGN(std::string spec_text, util::read_file(op.dir / "op.toml"));
    KOPE_ASSIGN(std::string reference, util::read_file(op.reference_path));
    j["spec_toml"] = spec_text;
    j["reference_source"] = reference;
    return ToolOutcome{j};
  }

  Result<ToolOutcome> hardware(const json& a) {
    KOPE_ASSIGN(json j, hardware_json(a.value("refresh", false)));
    return ToolOutcome{j};
  }

  Result<ToolOutcome> eval_kernel(const json& a, ToolContext& ctx) {
    KOPE_ASSIGN(json j, evaluate(a, s(), ctx, "eval_kernel"));
    return ToolOutcome{j, j["verdict"] != "correct"};
  }

  Result<ToolOutcome> bench_op(const json& a, ToolContext& ctx) {
    std::vector<std::string> args = {"bench", "--json", opt("suite", resolve_suite(a, s()).string())};
    if (a.contains("backend")) args.push_back(opt("backend", a["backend"].get<std::string>()));
    if (a.contains("max_seconds")) args.push_back(opt("max-seconds", number(a["max_seconds"].get<double>())));
    if (a.contains("target_ci")) args.push_back(opt("target-ci", number(a["target_ci"].get<double>())));
    if (a.value("refresh", false)) args.push_back("--refresh");
    if (a.contains("library_config")) args.push_back(opt("library-config", a["library_config"].get<std::string>()));
    args.push_back("--");
    for (const auto& op : a["ops"]) args.push_back(op.get<std::string>());
    double step = 0;
    KOPE_ASSIGN(ChildResult r, run_kope(args, ctx, [&](const std::string& line) {
      // "[i/n] ...": measuring op i of n.
      int i = 0, n = 0;
      if (std::sscanf(line.c_str(), "[%d/%d]", &i, &n) == 2 && n > 0) {
        step += 0.001;  // progress must grow with every line
        ctx.progress(i - 1 + std::min(step, 0.99), n, first_line(line));
      }
    }, {}));
    json j = json::parse(r.out, nullptr, false);
    if (!j.is_object() || !j.contains("rows")) return fail(ErrorKind::usage, "{}", child_error(r));
    return ToolOutcome{j, !r.status.success()};
  }

  Result<ToolOutcome> retrieve_experience(const json& a) {
    RetrieveOptions o;
    o.op = a["op"].get<std::string>();
    o.admit = true;
    o.stage = arg(a, "stage", "draft");
    o.suite = resolve_suite(a, s()).string();
    o.backend = arg(a, "backend");
    o.mode = arg(a, "mode", "active");
    o.target = arg(a, "target");
    o.text = arg(a, "text");
    o.error = arg(a, "error");
    o.bottleneck = arg(a, "bottleneck");
    if (a.contains("window")) o.window = a["window"].get<int64_t>();
    if (a.contains("generation")) o.generation = a["generation"].get<int64_t>();
    if (a.contains("incumbent_case")) o.incumbent = a["incumbent_case"].get<int64_t>();
    KOPE_ASSIGN(json j, memory_retrieve_json(memory_of(a, s()), o));
    return ToolOutcome{j};
  }

  Result<ToolOutcome> record_attempt(const json& a, ToolContext& ctx) {
    // The memory and the op first: a store that cannot be opened fails before any evaluation.
    std::string memory = memory_of(a, s());
    fs::path memory_path = memory.empty() ? mem::default_store_path() : fs::path(memory);
    KOPE_ASSIGN(auto store, mem::open_store(memory_path));
    KOPE_ASSIGN(spec::OpSpec op, spec::resolve_op(a["op"].get<std::string>(), resolve_suite(a, s())));
    auto stage = mem::parse_stage(arg(a, "stage", "draft"));
    std::optional<int64_t> parent;
    if (a.contains("parent_case")) {
      parent = a["parent_case"].get<int64_t>();
      KOPE_ASSIGN(auto found, store->get_case(*parent));
      if (!found) return fail(ErrorKind::not_found, "parent_case {}: no such case in {}", *parent, memory_path.string());
    }
    // kope's own verdict: the source is judged exactly as `kope eval` judges it.
    KOPE_ASSIGN(json evaluation, evaluate(a, s(), ctx, "record_attempt"));
    KOPE_ASSIGN(eval::EvalResult r, eval::EvalResult::from_json(evaluation.dump()));
    // The backend's hardware, as the agent records it: the device's for a device backend.
    const std::string backend = arg(a, "backend", std::string(eval::default_backend_name()));
    KOPE_ASSIGN(HardwareProfile host, load_hardware_profile());
    KOPE_ASSIGN(HardwareProfile hw, eval::backend_profile(backend, host, eval::EvaluatorOptions{}));
    mem::CaseRecord c;
    std::string stamp = util::now_compact_utc() + "-" + random_suffix();
    c.run_id = "mcp-" + stamp;
    c.natural_key = fmt::format("{}/{}/1", c.run_id, op.name);
    c.task = agent::task_info(op);
    c.hardware = {r.target, hw.cpu_model, hw.cores, hw.peak_gflops, hw.peak_gbps};
    c.toolchain = {r.toolchain, backend};
    c.parent_id = parent;
    c.stage = stage.value_or(mem::Stage::draft);
    c.optimisation = arg(a, "optimisation", "(an outside agent's kernel, recorded through kope mcp)");
    c.code = a["source"].get<std::string>();
    c.verdict = r.verdict;
    c.message = r.message;
    c.diagnostics = r.diagnostics;
    for (const auto& t : r.timing) {
      c.timings.push_back({t.case_index, t.median_us, t.ci95_us, t.reference_us, t.library_us, t.disturbed, t.contention,
                           t.floor_us > 0 ? std::optional<double>(t.floor_us) : std::nullopt});
    }
    c.speedup_vs_reference = r.speedup_vs_reference;
    c.speedup_vs_library = r.speedup_vs_library;
    c.fraction_of_roofline = r.fraction_of_roofline;
    c.wall_seconds = r.wall_seconds;
    c.journal = fmt::format("Strategy: {} attempt on {} ({}), written by an outside agent and recorded through kope mcp.\n"
                            "Change: {}\nStatus: {}{}{}\n",
                            mem::stage_name(c.stage), op.name, op.category, c.optimisation, eval::verdict_name(r.verdict),
                            r.message.empty() ? "" : " — ", util::truncate_text(r.message, 1200, 4));
    if (ctx.cancelled()) return fail(ErrorKind::io, "cancelled before recording: nothing was written");
    // One transaction: the case is in memory whole, or not at all.
    KOPE_ASSIGN(mem::RecordedCase recorded, store->record_attempt(c));
    json claimed = a.contains("verdict") ? a["verdict"] : json(nullptr);
    json out{{"case_id", recorded.id},
             {"natural_key", c.natural_key},
             {"op", op.name},
             {"memory", memory_path.string()},
             {"verdict", std::string(eval::verdict_name(r.verdict))},
             {"outcome", std::string(mem::outcome_name(recorded.assessment.outcome))},
             {"claimed_verdict", claimed},
             {"claimed_verdict_ignored", !claimed.is_null()},
             {"note", "recorded with the verdict kope's evaluator gave; a verdict the caller claims is never recorded"},
             {"evaluation", evaluation}};
    return ToolOutcome{out};
  }

  Result<ToolOutcome> start_run(const json& a) {
    fs::path runs = s().runs_dir;
    KOPE_TRY(util::make_dirs(runs));
    std::string name = "mcp-" + util::now_compact_utc() + "-" + random_suffix();
    auto run = std::make_shared<McpKope::StartedRun>();
    run->name = name;
    run->dir = runs / name;
    run->log = runs / (name + ".log");
    std::string ops = a["ops"].is_array() ? [&] {
      std::vector<std::string> v;
      for (const auto& o : a["ops"]) v.push_back(o.get<std::string>());
      return util::join(v, ",");
    }() : a["ops"].get<std::string>();
    std::vector<std::string> args = {"run", opt("ops", ops), opt("run-dir", run->dir.string()), "--quiet",
                                     opt("suite", resolve_suite(a, s()).string())};
    std::string memory = memory_of(a, s());
    if (!memory.empty()) args.push_back(opt("memory", memory));
    for (const char* key : {"llm", "policy", "context", "backend"}) {
      if (a.contains(key)) args.push_back(opt(key, a[key].get<std::string>()));
    }
    for (const char* key : {"iterations", "seed", "jobs", "patience", "token_budget"}) {
      if (a.contains(key)) args.push_back(opt(util::replace_all(key, "_", "-"), std::to_string(a[key].get<int64_t>())));
    }
    auto add_number = [&](const char* key, double fallback) {
      std::string option = util::replace_all(key, "_", "-");
      if (a.contains(key)) {
        args.push_back(opt(option, number(a[key].get<double>())));
      } else if (fallback > 0) {
        args.push_back(opt(option, number(fallback)));
      }
    };
    add_number("roofline_target", 0);
    add_number("library_target", 0);
    add_number("eval_ci", s().eval_ci);
    add_number("eval_max_seconds", s().eval_max_seconds);
    if (a.value("no_starter", false)) args.push_back("--no-starter");
    if (a.value("no_reflect", false)) args.push_back("--no-reflect");
    run->argv = {self_exe().string()};
    run->argv.insert(run->argv.end(), args.begin(), args.end());
    KOPE_ASSIGN(const int pid, start_child(run));
    {
      std::lock_guard lock(k.m_mutex);
      k.m_runs[name] = run;
    }
    return ToolOutcome{json{{"run", name},
                            {"run_dir", run->dir.string()},
                            {"log", run->log.string()},
                            {"pid", pid},
                            {"command", run->argv},
                            {"note", "follow it with run_status; run_report gives results.json once it ends. A run started "
                                     "here stops when the server stops (resume it with `kope run --resume DIR`)."}}};
  }

  // Starts the run's child on a thread of its own that lives as long as the child: the child dies
  // with the thread that started it (PR_SET_PDEATHSIG), and that thread copies its output into
  // the run's log and reaps it. Returns the child's pid, or why it could not start.
  static Result<int> start_child(const std::shared_ptr<McpKope::StartedRun>& run) {
    std::promise<Result<int>> started;
    std::future<Result<int>> pid = started.get_future();
    run->drain = std::thread([run, started = std::move(started)]() mutable {
      util::SpawnOptions so;
      so.argv = run->argv;
      auto spawned = util::Process::spawn(so);
      if (!spawned) {
        started.set_value(std::unexpected(spawned.error()));
        run->finished.store(true);
        return;
      }
      run->process.emplace(std::move(*spawned));
      util::Process& p = *run->process;
      started.set_value(p.pid());
      std::ofstream log(run->log, std::ios::app);
      log << "$ " << util::join(run->argv, " ") << "\n";
      log.flush();
      pollfd fds[2] = {{p.stdout_fd(), POLLIN, 0}, {p.stderr_fd(), POLLIN, 0}};
      char buf[65536];
      while (fds[0].fd >= 0 || fds[1].fd >= 0) {
        int n = ::poll(fds, 2, -1);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) break;
        for (auto& f : fds) {
          if (f.fd < 0 || !(f.revents & (POLLIN | POLLHUP | POLLERR))) continue;
          ssize_t got = ::read(f.fd, buf, sizeof buf);
          if (got < 0 && errno == EINTR) continue;
          if (got <= 0) {
            f.fd = -1;
            continue;
          }
          log.write(buf, got);
          log.flush();
        }
      }
      run->status = p.wait();
      log << "kope mcp: the run " << run->status.describe() << "\n";
      run->finished.store(true);
    });
    Result<int> r = pid.get();
    if (!r && run->drain.joinable()) run->drain.join();
    return r;
  }

  Result<std::pair<fs::path, std::shared_ptr<McpKope::StartedRun>>> find_run(const json& a) {
    std::string name = a["run"].get<std::string>();
    {
      std::lock_guard lock(k.m_mutex);
      auto it = k.m_runs.find(name);
      if (it != k.m_runs.end()) return std::pair{it->second->dir, it->second};
    }
    fs::path dir = name.find('/') != std::string::npos ? fs::path(name) : s().runs_dir / name;
    std::error_code ec;
    if (!safe_name(fs::path(name).filename().string()) || !fs::is_directory(dir, ec) ||
        !(fs::exists(dir / "config.json", ec) || fs::exists(dir / "events.jsonl", ec))) {
      return fail(ErrorKind::not_found, "no run '{}' (give the run name start_run returned, a run directory's name under {}, or "
                  "a run directory's path)", name, s().runs_dir.string());
    }
    return std::pair{dir, std::shared_ptr<McpKope::StartedRun>()};
  }

  Result<ToolOutcome> run_status(const json& a) {
    KOPE_ASSIGN(auto found, find_run(a));
    auto& [dir, started] = found;
    RunEvents ev = read_events(dir);
    std::error_code ec;
    bool results = fs::exists(dir / "results.json", ec);
    bool complete = false;
    if (results) {
      if (auto r = read_results(dir)) complete = r->value("complete", false);
    }
    std::string state;
    json exit_code = nullptr;
    if (started) {
      if (!started->finished.load()) {
        state = "running";
      } else {
        exit_code = started->status.exited ? json(started->status.code) : json(128 + started->status.signal);
        state = started->status.success() ? "finished" : "failed";
      }
    } else {
      state = results ? "finished" : "not_running_here";
    }
    json ops = json::array();
    int attempts = 0, done = 0, started_ops = 0;
    for (const auto& [name, op] : ev.ops) {
      attempts += op.attempts;
      done += op.done;
      started_ops += op.started;
      ops.push_back({{"op", name},
                     {"started", op.started},
                     {"attempts", op.attempts},
                     {"correct_attempts", op.correct},
                     {"best_speedup_vs_reference", op.best_speedup ? json(*op.best_speedup) : json(nullptr)},
                     {"done", op.done},
                     {"stop_reason", op.stop_reason}});
    }
    json out{{"run", fs::path(dir).filename().string()},
             {"run_dir", dir.string()},
             {"run_id", ev.run_id},
             {"state", state},
             {"started_by_server", static_cast<bool>(started)},
             {"exit_code", exit_code},
             {"ops_total", ev.ops_total >= 0 ? json(ev.ops_total) : json(nullptr)},
             {"ops_started", started_ops},
             {"ops_done", done},
             {"attempts", attempts},
             {"events", ev.events},
             {"ops", ops},
             {"results_ready", results},
             {"complete", complete},
             {"report_ready", fs::exists(dir / "report.html", ec)}};
    if (started) out["log_tail"] = tail_of(started->log, 2000);
    return ToolOutcome{out, state == "failed"};
  }

  Result<ToolOutcome> run_report(const json& a) {
    KOPE_ASSIGN(auto found, find_run(a));
    auto& [dir, started] = found;
    if (started && !started->finished.load()) {
      return fail(ErrorKind::not_found, "run {} is still running: results.json is written when it ends (follow it with run_status)",
                  a["run"].get<std::string>());
    }
    KOPE_ASSIGN(json results, read_results(dir));
    std::error_code ec;
    json report = fs::exists(dir / "report.html", ec) ? json((dir / "report.html").string()) : json(nullptr);
    std::string name = dir.filename().string();
    return ToolOutcome{json{{"run", name},
                            {"run_dir", dir.string()},
                            {"results_path", (dir / "results.json").string()},
                            {"report_path", report},
                            {"results_uri", "kope://runs/" + name + "/results.json"},
                            {"report_uri", report.is_null() ? json(nullptr) : json("kope://runs/" + name + "/report.html")},
                            {"results", results}}};
  }

  // --- resources

  Result<std::vector<mcp::Resource>> list_resources() {
    std::vector<mcp::Resource> out;
    KOPE_ASSIGN(spec::Suite suite, spec::load_suite(s().suite.empty() ? spec::default_ops_dir() : fs::path(s().suite)));
    for (const auto& op : suite.ops) {
      out.push_back({"kope://ops/" + op.name + "/spec", op.name + " spec", op.name + " (op.toml)", op.summary, "application/toml"});
      out.push_back({"kope://ops/" + op.name + "/reference", op.name + " reference", op.name + " reference (" +
                     op.reference_path.filename().string() + ")", "The reference implementation kernels are checked against",
                     op.reference_path.extension() == ".py" ? "text/x-python" : "text/x-c++src"});
    }
    std::error_code ec;
    if (fs::is_directory(s().runs_dir, ec)) {
      std::vector<fs::path> dirs;
      for (const auto& e : fs::directory_iterator(s().runs_dir, ec)) {
        if (e.is_directory(ec) && fs::exists(e.path() / "results.json", ec)) dirs.push_back(e.path());
      }
      std::sort(dirs.begin(), dirs.end());
      for (const auto& d : dirs) {
        std::string name = d.filename().string();
        out.push_back({"kope://runs/" + name + "/results.json", name + " results", "Run " + name + ": results.json",
                       "The run's figures", "application/json"});
        if (fs::exists(d / "report.html", ec)) {
          out.push_back({"kope://runs/" + name + "/report.html", name + " report", "Run " + name + ": report.html",
                         "The run's HTML report", "text/html"});
        }
      }
    }
    return out;
  }

  Result<mcp::ResourceContents> read_resource(const std::string& uri) {
    constexpr std::string_view k_scheme = "kope://";
    if (!uri.starts_with(k_scheme)) return fail(ErrorKind::not_found, "resource not found: {} (kope's URIs begin kope://)", uri);
    auto parts = util::split(std::string_view(uri).substr(k_scheme.size()), '/');
    if (parts.size() == 3 && parts[0] == "ops" && (parts[2] == "spec" || parts[2] == "reference")) {
      auto op = spec::resolve_op(parts[1], s().suite.empty() ? spec::default_ops_dir() : fs::path(s().suite));
      if (!op || !safe_name(parts[1])) return fail(ErrorKind::not_found, "resource not found: {} (no op '{}')", uri, parts[1]);
      if (parts[2] == "spec") {
        KOPE_ASSIGN(std::string text, util::read_file(op->dir / "op.toml"));
        return mcp::ResourceContents{uri, "application/toml", text};
      }
      KOPE_ASSIGN(std::string text, util::read_file(op->reference_path));
      return mcp::ResourceContents{uri, op->reference_path.extension() == ".py" ? "text/x-python" : "text/x-c++src", text};
    }
    if (parts.size() == 3 && parts[0] == "runs" && safe_name(parts[1]) && (parts[2] == "results.json" || parts[2] == "report.html")) {
      fs::path file = s().runs_dir / parts[1] / parts[2];
      auto text = util::read_file(file);
      if (!text) return fail(ErrorKind::not_found, "resource not found: {} ({} does not exist yet)", uri, file.string());
      return mcp::ResourceContents{uri, parts[2] == "report.html" ? "text/html" : "application/json", *text};
    }
    if (parts.size() == 3 && parts[0] == "memory" && parts[1] == "cases") {
      int64_t id = 0;
      if (std::sscanf(parts[2].c_str(), "%ld", &id) != 1 || std::to_string(id) != parts[2]) {
        return fail(ErrorKind::not_found, "resource not found: {} (a case id is a number)", uri);
      }
      KOPE_ASSIGN(auto store, mem::open_store(s().memory.empty() ? mem::default_store_path() : fs::path(s().memory)));
      KOPE_ASSIGN(auto c, store->get_case(id));
      if (!c) return fail(ErrorKind::not_found, "resource not found: {} (no case {} in the memory)", uri, id);
      return mcp::ResourceContents{uri, "application/json", mem::case_json(*c, true).dump(2)};
    }
    return fail(ErrorKind::not_found, "resource not found: {}", uri);
  }
};

McpKope::McpKope(McpSettings settings) : m_settings(std::move(settings)) {
  if (m_settings.runs_dir.empty()) m_settings.runs_dir = util::data_dir() / "runs";
}

McpKope::~McpKope() {
  std::map<std::string, std::shared_ptr<StartedRun>> runs;
  {
    std::lock_guard lock(m_mutex);
    runs.swap(m_runs);
  }
  // Stop what is still running: SIGINT first (the run stops after its current step and can be
  // resumed), then SIGKILL for one that does not stop in time.
  for (auto& [name, run] : runs) {
    if (!run->finished.load() && run->process) run->process->kill_group(SIGINT);
  }
  auto deadline = std::chrono::steady_clock::now() + k_run_stop_grace;
  for (auto& [name, run] : runs) {
    while (!run->finished.load() && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(k_poll_interval);
    if (!run->finished.load() && run->process) run->process->kill_group(SIGKILL);
    if (run->drain.joinable()) run->drain.join();
  }
}

std::vector<mcp::Tool> McpKope::tools() {
  auto t = std::make_shared<McpTools>(McpTools{*this});
  const json read_only{{"readOnlyHint", true}, {"openWorldHint", false}};
  std::vector<mcp::Tool> out;
  const bool paths = m_settings.path_arguments;
  auto add = [&](std::string name, std::string title, std::string description, json input, json output, json annotations,
                 std::function<Result<ToolOutcome>(const json&, ToolContext&)> run) {
    auto guarded = [paths, run = std::move(run)](const json& a, ToolContext& ctx) -> Result<ToolOutcome> {
      if (!paths) {
        if (auto what = path_argument(a)) {
          return fail(ErrorKind::usage, "{}: this server takes no file paths from its clients (it serves remote ones); name ops "
                      "and runs by name, the memory and suite are the server's", *what);
        }
      }
      return run(a, ctx);
    };
    out.push_back(mcp::Tool{std::move(name), std::move(title), std::move(description), std::move(input), std::move(output),
                            std::move(annotations), std::move(guarded)});
  };
  const json op_summary = object({{"name", str("")}, {"category", str("")}, {"level", integer("")}, {"summary", str("")},
                                  {"cases", integer("")}, {"timed_cases", integer("")}, {"library", nullable("string", "")},
                                  {"dir", str("")}, {"reference", str("")}},
                                 {"name"}, false);
  add("list_ops", "List operators", "The operators of the suite (as `kope ops list --json`, wrapped as {\"ops\": [...]}).",
      object({{"suite", k_suite_property}}), object({{"ops", array_of(op_summary, "One entry per op")}}, {"ops"}, false), read_only,
      [t](const json& a, ToolContext&) { return t->list_ops(a); });
  add("show_op", "Show an operator",
      "One operator's spec, cases, kernel signature and reference (as `kope ops show OP --json`, plus its op.toml as spec_toml "
      "and its reference's source as reference_source).",
      object({{"op", str("Op name in the suite, or an op folder's path")}, {"suite", k_suite_property}}, {"op"}),
      object({{"name", str("")}, {"signature", str("The kernel's C ABI signature")}, {"spec_toml", str("op.toml")},
              {"reference_source", str("The reference implementation")}, {"case_list", array_of(json{{"type", "object"}}, "")}},
             {"name", "signature", "spec_toml", "reference_source"}, false),
      read_only, [t](const json& a, ToolContext&) { return t->show_op(a); });
  add("hardware", "Hardware profile",
      "This machine's profile and measured roofline, with the kernel backends it offers (as `kope hw --json`). Measured "
      "once and cached.",
      object({{"refresh", boolean("Measure again instead of using the cached profile (takes a while)")}}),
      object({{"target", str("")}, {"cores", integer("")}, {"peak_gflops", num("")}, {"peak_gbps", num("")},
              {"backends", array_of(json{{"type", "object"}}, "")}},
             {"target"}, false),
      read_only, [t](const json& a, ToolContext&) { return t->hardware(a); });
  const json eval_input = object(
      {{"op", str("Op name in the suite, or an op folder's path")},
       {"source", json{{"type", "string"}, {"minLength", 1}, {"description", "The kernel's source (C++ with extern \"C\" kope_kernel for the cpu backend)"}}},
       {"suite", k_suite_property},
       {"backend", one_of(eval::backend_name_list(), "Kernel backend (default cpu)")},
       {"no_time", boolean("Verify only; do not time")},
       {"seed", json{{"type", "integer"}, {"minimum", 0}, {"description", "Data seed (default: fresh)"}}},
       {"max_seconds", json{{"type", "number"}, {"minimum", 0.01}, {"description", "Timing cap per timed case, seconds"}}},
       {"target_ci", json{{"type", "number"}, {"minimum", 0.001}, {"maximum", 0.5}, {"description", "Stop timing when the 95% CI is within this fraction"}}},
       {"flags", array_of(json{{"type", "string"}}, "Extra compile flags (-O, -f, -m, -D, -U, -W, -g)")},
       {"threads", json{{"type", "integer"}, {"minimum", 0}, {"description", "OpenMP threads (default: all cores)"}}},
       {"library_config", one_of({"environment", "best"}, "Library baseline configuration")},
       {"incumbent_source", str("A kernel to beat: timed against the candidate in alternating batches")}},
      {"op", "source"});
  add("eval_kernel", "Evaluate a kernel",
      "Judges a kernel exactly as `kope eval --json` does: sandboxed compile, verification on every case, timing with the "
      "reference, the library baseline and the working-set roofline. isError is set when the verdict is not `correct`. "
      "Sends progress notifications while it runs; cancelling it stops the evaluation and its sandboxed processes.",
      eval_input, eval_result_schema(), json{{"readOnlyHint", true}, {"openWorldHint", false}},
      [t](const json& a, ToolContext& ctx) { return t->eval_kernel(a, ctx); });
  add("bench_op", "Benchmark baselines",
      "Times the references and library baselines of ops against the roofline (as `kope bench OPS --json`).",
      object({{"ops", json{{"type", "array"}, {"items", {{"type", "string"}}}, {"minItems", 1},
                           {"description", "Op names, globs, category:x, level:n or op folders"}}},
              {"suite", k_suite_property},
              {"backend", one_of({"cpu", "cuda"}, "Whose baselines (default cpu)")},
              {"max_seconds", json{{"type", "number"}, {"minimum", 0.01}, {"description", "Timing cap per case and kernel"}}},
              {"target_ci", json{{"type", "number"}, {"minimum", 0.001}, {"maximum", 0.5}, {"description", "Target CI"}}},
              {"refresh", boolean("Measure again instead of using cached times")},
              {"library_config", one_of({"environment", "best"}, "Library baseline configuration")}},
             {"ops"}),
      object({{"target", str("")}, {"rows", array_of(json{{"type", "object"}}, "One row per op and timed case")}}, {"rows"}, false),
      json{{"readOnlyHint", true}, {"openWorldHint", false}}, [t](const json& a, ToolContext& ctx) { return t->bench_op(a, ctx); });
  const json stage = one_of({"draft", "repair", "refine"}, "The agent's stage (default draft)");
  add("retrieve_experience", "Retrieve experience",
      "What kope's memory knows for an op at a stage: the items the agent's prompt would admit, each with its tier, tokens, "
      "value and the reason it was admitted, and the candidates left out (as `kope memory retrieve OP --admit --json`).",
      object({{"op", str("Op name")}, {"stage", stage}, {"suite", k_suite_property}, {"memory", k_memory_property},
              {"backend", str("Backend (default cpu)")}, {"mode", one_of({"active", "passive", "random", "none"}, "Context mode")},
              {"target", str("Target (default: this host)")}, {"text", str("Free text for lexical search")},
              {"error", str("The last error signature (repair)")}, {"bottleneck", one_of({"memory", "compute", "latency"}, "")},
              {"incumbent_case", integer("Incumbent case id (lineage signals)")},
              {"window", json{{"type", "integer"}, {"minimum", 1000}, {"description", "Model window, tokens"}}},
              {"generation", json{{"type", "integer"}, {"minimum", 1}, {"description", "Generation allowance, tokens"}}}},
             {"op"}),
      object({{"op", str("")}, {"stage", str("")}, {"admitted", array_of(json{{"type", "object"}}, "Admitted items with their reason")},
              {"left_out", array_of(json{{"type", "object"}}, "")}},
             {"admitted"}, false),
      read_only, [t](const json& a, ToolContext&) { return t->retrieve_experience(a); });
  json record_input = eval_input;
  record_input["properties"]["memory"] = k_memory_property;
  record_input["properties"]["stage"] = stage;
  record_input["properties"]["optimisation"] = str("What the attempt changed or applied (kept in memory with the case)");
  record_input["properties"]["parent_case"] = integer("The memory case this attempt began from");
  record_input["properties"]["verdict"] = json{
      {"description", "IGNORED. A verdict the caller claims is never recorded: kope evaluates the source itself and records its "
                      "own verdict (the result says claimed_verdict_ignored)."}};
  add("record_attempt", "Record an attempt",
      "Puts an outside agent's kernel into kope's memory with the verdict kope's evaluator gives it: the source is evaluated "
      "first, exactly as eval_kernel does, and recorded with that verdict, its timings and speedups. A verdict the caller "
      "claims is ignored. Nothing is recorded when the call is cancelled.",
      record_input,
      object({{"case_id", integer("The memory case")}, {"natural_key", str("")}, {"verdict", str("kope's verdict (recorded)")},
              {"outcome", str("")}, {"claimed_verdict", json{{"description", "What the caller claimed (not recorded)"}}},
              {"claimed_verdict_ignored", boolean("")}, {"evaluation", eval_result_schema()}},
             {"case_id", "verdict", "evaluation"}, false),
      json{{"readOnlyHint", false}, {"destructiveHint", false}, {"idempotentHint", false}, {"openWorldHint", false}},
      [t](const json& a, ToolContext& ctx) { return t->record_attempt(a, ctx); });
  add("start_run", "Start a kope run",
      "Starts `kope run` in the background on a selection of ops (a child process; its run directory goes under the data "
      "directory's runs/). Returns at once with the run's name: follow it with run_status, read it with run_report.",
      object({{"ops", json{{"type", json::array({"string", "array"})}, {"items", {{"type", "string"}}},
                           {"description", "Selector as for `kope run --ops`: names, globs, category:x, op folders (comma-separated or an array)"}}},
              {"suite", k_suite_property}, {"memory", k_memory_property},
              {"llm", str("Model profile (default: the configured one)")}, {"policy", one_of({"llm", "replay"}, "")},
              {"context", one_of({"active", "passive", "random", "none"}, "Context mode")}, {"backend", str("Kernel backend")},
              {"iterations", json{{"type", "integer"}, {"minimum", 1}, {"description", "Attempts per op"}}},
              {"seed", json{{"type", "integer"}, {"minimum", 0}, {"description", ""}}},
              {"jobs", json{{"type", "integer"}, {"minimum", 1}, {"description", "Ops in parallel"}}},
              {"patience", json{{"type", "integer"}, {"minimum", 0}, {"description", "As kope run --patience"}}},
              {"token_budget", json{{"type", "integer"}, {"minimum", 0}, {"description", ""}}},
              {"roofline_target", json{{"type", "number"}, {"minimum", 0}, {"description", "As kope run --roofline-target"}}},
              {"library_target", json{{"type", "number"}, {"minimum", 0}, {"description", "As kope run --library-target"}}},
              {"eval_ci", json{{"type", "number"}, {"minimum", 0}, {"description", "As kope run --eval-ci"}}},
              {"eval_max_seconds", json{{"type", "number"}, {"minimum", 0}, {"description", "As kope run --eval-max-seconds"}}},
              {"no_starter", boolean("Do not import the starter experience")}, {"no_reflect", boolean("No reflection")}},
             {"ops"}),
      object({{"run", str("The run's name (for run_status and run_report)")}, {"run_dir", str("")}, {"pid", integer("")}}, {"run", "run_dir"}, false),
      json{{"readOnlyHint", false}, {"destructiveHint", false}, {"openWorldHint", true}},
      [t](const json& a, ToolContext&) { return t->start_run(a); });
  const json run_input = object({{"run", str("The name start_run returned, a run directory's name under the data directory's runs/, or a run directory's path")}}, {"run"});
  add("run_status", "Run progress",
      "A run's progress from its run directory: state (running, finished, failed), ops started and done, attempts and "
      "correct attempts per op, whether results.json and report.html are written.",
      run_input,
      object({{"run", str("")}, {"state", one_of({"running", "finished", "failed", "not_running_here"}, "")},
              {"ops_done", integer("")}, {"attempts", integer("")}, {"ops", array_of(json{{"type", "object"}}, "")},
              {"results_ready", boolean("")}, {"complete", boolean("")}},
             {"run", "state"}, false),
      read_only, [t](const json& a, ToolContext&) { return t->run_status(a); });
  add("run_report", "Run report", "A finished run's results.json (as `kope run --json` prints it) and the path of its report.html.",
      run_input,
      object({{"run", str("")}, {"results_path", str("")}, {"report_path", nullable("string", "")}, {"results", json{{"type", "object"}}}},
             {"run", "results"}, false),
      read_only, [t](const json& a, ToolContext&) { return t->run_report(a); });
  return out;
}

mcp::ResourceSource McpKope::resources() {
  auto t = std::make_shared<McpTools>(McpTools{*this});
  mcp::ResourceSource r;
  r.list = [t] { return t->list_resources(); };
  r.read = [t](const std::string& uri) { return t->read_resource(uri); };
  r.templates = {
      {"kope://ops/{name}/spec", "op spec", "An op's spec (op.toml)", "", "application/toml"},
      {"kope://ops/{name}/reference", "op reference", "An op's reference implementation", "", "text/plain"},
      {"kope://runs/{run}/results.json", "run results", "A run's results.json", "", "application/json"},
      {"kope://runs/{run}/report.html", "run report", "A run's HTML report", "", "text/html"},
      {"kope://memory/cases/{id}", "memory case", "A memory case with its code and journal (as `kope memory show ID --json`)", "",
       "application/json"},
  };
  return r;
}

}  // namespace kope::cli
