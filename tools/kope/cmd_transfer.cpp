// `kope transfer`: the paper's cross-hardware experiment (docs/design.md §4, issue 8). On the same
// operators, budget and seed, the agent runs on the target backend in four settings that differ
// only in the memory it starts from:
//
//   cold     an empty memory
//   foreign  memory gathered on the source backend only (feasibility evidence, never speed)
//   native   memory gathered on the target only (the cold run's own memory)
//   both     the two merged
//
// The source memory comes from --foreign-memory or from a source run this command makes first;
// the native memory from --native-memory or the cold run. Each setting is an ordinary `kope run`
// (a child process of this executable) with its own run directory and memory database under
// --dir, so `kope report DIR/cold DIR/foreign DIR/native DIR/both` compares them; the command
// prints pass rate and geomean speedup per setting and writes DIR/transfer.json.
#include <unistd.h>

#include <ctime>

#include <nlohmann/json.hpp>

#include "child_run.h"
#include "cli.h"
#include "eval/registry.h"
#include "kope/eval.h"
#include "kope/hw.h"
#include "kope/memory.h"
#include "util/fs.h"
#include "util/strings.h"
#include "util/time.h"

namespace kope::cli {

namespace {

using nlohmann::json;
namespace fs = std::filesystem;

struct TransferOptions {
  std::string from = std::string(eval::default_backend_name());
  std::string to = "opencl";
  std::vector<std::string> ops;
  std::string foreign_memory;
  std::string native_memory;
  ChildRunOptions run;  // --no-holdout: the paper's setting
};

const char* const k_settings[] = {"cold", "foreign", "native", "both"};

// One `kope run`; its output goes to DIR/<name>.log. Fails naming the log when it fails.
Status run_agent(const TransferOptions& o, const std::string& backend, const fs::path& run_dir, const fs::path& memory,
                 const fs::path& log) {
  std::vector<std::string> args = {"run", "--backend", backend, "--iterations", std::to_string(o.run.iterations), "--memory",
                                   memory.string(), "--run-dir", run_dir.string(), "--seed", std::to_string(o.run.seed), "--quiet",
                                   "--no-starter"};  // each setting's memory is exactly what the experiment says
  if (!o.ops.empty()) {
    args.emplace_back("--ops");
    args.push_back(util::join(o.ops, ","));
  }
  if (!o.run.llm.empty()) args.insert(args.end(), {"--llm", o.run.llm});
  if (!o.run.policy.empty()) args.insert(args.end(), {"--policy", o.run.policy});
  if (!o.run.suite.empty()) args.insert(args.end(), {"--suite", o.run.suite});
  if (o.run.holdout) args.emplace_back("--holdout");
  for (const auto& a : o.run.run_args) args.push_back(a);
  return run_kope_child(args, log);
}

// A fresh memory database holding the given databases merged (each keeps its hardware and
// toolchain, so retrieval on the target tells foreign items from native ones).
Status merged_memory(const fs::path& out, const std::vector<fs::path>& sources) {
  std::error_code ec;
  for (const char* suffix : {"", "-wal", "-shm"}) fs::remove(out.string() + suffix, ec);
  KOPE_ASSIGN(auto store, memory::open_store(out));
  for (const auto& s : sources) {
    memory::ImportOptions io;
    io.source = s.string();
    KOPE_ASSIGN(auto report, store->merge_from(s, io));
    (void)report;
  }
  return {};
}

std::string pct(const json& v) { return v.is_number() ? fmt::format("{:.1f}%", 100 * v.get<double>()) : "-"; }
std::string times(const json& v) { return v.is_number() ? fmt::format("{:.2f}x", v.get<double>()) : "-"; }

// The memory a setting starts from: the foreign one, the native one, both, or (cold) none.
Status memory_for_setting(const std::string& s, const fs::path& mem, const fs::path& foreign_db, const fs::path& native_db) {
  if (s == "foreign") return merged_memory(mem, {foreign_db});
  if (s == "native") return merged_memory(mem, {native_db});
  if (s == "both") return merged_memory(mem, {foreign_db, native_db});
  return merged_memory(mem, {});
}

// A setting's row of transfer.json: where it ran and its figures from results.json.
json setting_json(const std::string& s, const fs::path& dir, const fs::path& mem, const json& results) {
  const json& f = results.at("figures");
  return {{"setting", s},
          {"run_dir", (dir / s).string()},
          {"memory", mem.string()},
          {"pass_rate", f.value("pass_rate", json(nullptr))},
          {"cases_passed", f.value("cases_passed", json(nullptr))},
          {"cases_total", f.value("cases_total", json(nullptr))},
          {"solved", f.value("solved", json(nullptr))},
          {"ops", f.value("ops", json(nullptr))},
          {"geomean_speedup_vs_reference", f.value("geomean_speedup_vs_reference", json(nullptr))},
          {"geomean_speedup_vs_reference_over", f.value("geomean_speedup_vs_reference_over", json(nullptr))},
          {"geomean_speedup_vs_library", f.value("geomean_speedup_vs_library", json(nullptr))}};
}

// The experiment as the console shows it: a row per setting and the `kope report` that compares them.
std::string transfer_text(const TransferOptions& o, const fs::path& dir, const json& settings) {
  std::string t = fmt::format("transfer {} -> {} ({} iterations per op, seed {}): {}\n", o.from, o.to, o.run.iterations, o.run.seed, dir.string());
  t += fmt::format("{:<9} {:>10} {:>14} {:>9} {:>20}\n", "setting", "pass rate", "cases", "solved", "geomean vs ref");
  for (const auto& s : settings) {
    t += fmt::format("{:<9} {:>10} {:>14} {:>9} {:>20}\n", s["setting"].get<std::string>(), pct(s["pass_rate"]),
                     fmt::format("{}/{}", s["cases_passed"].dump(), s["cases_total"].dump()),
                     fmt::format("{}/{}", s["solved"].dump(), s["ops"].dump()), times(s["geomean_speedup_vs_reference"]));
  }
  t += fmt::format("compare: kope report {0}/cold {0}/foreign {0}/native {0}/both --labels cold,foreign,native,both\n", dir.string());
  return t;
}

Result<int> transfer_command(const TransferOptions& o) {
  if (o.from == o.to) return fail(ErrorKind::usage, "--from and --to name the same backend ({})", o.from);
  if (o.run.iterations < 1) return fail(ErrorKind::usage, "--iterations must be at least 1");
  // Both backends must be able to run here before any run is spent.
  for (const auto& b : eval::list_backends(describe_host())) {
    bool needed = b.name == o.to || (b.name == o.from && o.foreign_memory.empty());
    if (needed && !b.usable) return fail(ErrorKind::unavailable, "backend {} cannot run here: {}", b.name, b.detail);
  }
  for (const auto& name : {o.from, o.to}) {
    if (!eval::find_backend_row(name)) return fail(ErrorKind::usage, "unknown backend '{}' (known: {})", name, eval::backend_names());
  }
  fs::path dir = o.run.dir.empty() ? util::data_dir() / "transfer" / fmt::format("{}-{}-to-{}", util::now_compact_utc(), o.from, o.to) : fs::absolute(o.run.dir);
  std::error_code ec;
  if (fs::exists(dir / "transfer.json", ec)) return fail(ErrorKind::usage, "{} already holds a transfer experiment", dir.string());
  KOPE_TRY(util::make_dirs(dir / "memory"));
  auto say = [&](const std::string& s) {
    if (!o.run.json_out) std::fprintf(stderr, "kope transfer: %s\n", s.c_str());
  };

  // The source backend's memory.
  fs::path foreign_db = dir / "memory" / fmt::format("{}.db", o.from);
  if (!o.foreign_memory.empty()) {
    if (!fs::exists(o.foreign_memory, ec)) return fail(ErrorKind::not_found, "--foreign-memory {} does not exist", o.foreign_memory);
    KOPE_TRY(merged_memory(foreign_db, {fs::absolute(o.foreign_memory)}));
    say(fmt::format("foreign memory: {} (copied)", o.foreign_memory));
  } else {
    say(fmt::format("gathering foreign memory: the agent on {} ({} iterations per op)", o.from, o.run.iterations));
    KOPE_TRY(run_agent(o, o.from, dir / fmt::format("source-{}", o.from), foreign_db, dir / fmt::format("source-{}.log", o.from)));
  }

  json settings = json::array();
  fs::path native_db;
  for (const char* setting : k_settings) {
    std::string s = setting;
    fs::path mem = dir / "memory" / fmt::format("{}.db", s);
    KOPE_TRY(memory_for_setting(s, mem, foreign_db, native_db));
    say(fmt::format("setting {}: the agent on {} from {} memory", s, o.to, s == "cold" ? "an empty" : s));
    KOPE_TRY(run_agent(o, o.to, dir / s, mem, dir / (s + ".log")));
    if (s == "cold") {
      // The native memory: given, or what the cold run gathered on the target (a snapshot, so
      // later settings never see each other's attempts).
      native_db = dir / "memory" / fmt::format("{}-native.db", o.to);
      std::vector<fs::path> from = {o.native_memory.empty() ? mem : fs::absolute(o.native_memory)};
      KOPE_TRY(merged_memory(native_db, from));
    }
    KOPE_ASSIGN(json r, read_results(dir / s));
    settings.push_back(setting_json(s, dir, mem, r));
  }
  json out = {{"experiment", "transfer"},
              {"from", o.from},
              {"to", o.to},
              {"ops", o.ops},
              {"iterations", o.run.iterations},
              {"seed", o.run.seed},
              {"dir", dir.string()},
              {"foreign_memory", o.foreign_memory.empty() ? (dir / fmt::format("source-{}", o.from)).string() : o.foreign_memory},
              {"native_memory", o.native_memory.empty() ? "the cold run's memory" : o.native_memory},
              {"settings", settings}};
  KOPE_TRY(util::write_file_atomic(dir / "transfer.json", out.dump(2) + "\n"));
  if (o.run.json_out) {
    print(out.dump(2) + "\n");
    return 0;
  }
  print(transfer_text(o, dir, settings));
  return 0;
}

}  // namespace

void register_transfer(CLI::App& app, Action& action) {
  auto o = std::make_shared<TransferOptions>();
  auto* cmd = app.add_subcommand("transfer",
                                 "Cross-hardware transfer: the agent on --to from cold, foreign-only, native-only and both "
                                 "memories (same ops, budget, seed); pass rate and speedup per setting");
  cmd->add_option("--from", o->from, "The backend experience comes from")->default_val(std::string(eval::default_backend_name()));
  cmd->add_option("--to", o->to, "The backend the four settings run on")->default_val("opencl");
  cmd->add_option("--ops", o->ops, "Operators (names, globs, category:x, level:n)")->delimiter(',');
  cmd->add_option("--foreign-memory", o->foreign_memory, "Use this database as the source backend's memory instead of a source run");
  cmd->add_option("--native-memory", o->native_memory, "Use this database as the target's memory instead of the cold run's");
  add_child_run_options(cmd, o->run,
                        {"run", "Experiment directory (default: <data dir>/transfer/<time>-<from>-to-<to>)", "Print transfer.json",
                         "Let each setting use memory's experience of the operators it runs (by default every run holds it out: "
                         "--holdout, so a setting measures what experience of other operators brings, uncontaminated)"});
  cmd->callback([&action, o] { action = [o]() -> Result<int> { return transfer_command(*o); }; });
}

}  // namespace kope::cli
