#include "report/run_data.h"

#include <fmt/format.h>

#include "run/events.h"
#include "run/tasks.h"
#include "util/fs.h"

namespace kope::report {

using nlohmann::json;

namespace {

// The op as results.json describes it: enough for figures (cases count, category, level).
std::optional<spec::OpSpec> spec_from_results(const json& results, const std::string& name,
                                              bool& library) {
  if (!results.is_object() || !results.contains("ops")) return std::nullopt;
  for (const auto& o : results["ops"]) {
    if (o.value("name", "") != name) continue;
    spec::OpSpec op;
    op.name = name;
    op.category = o.value("category", "");
    op.level = o.value("level", 1);
    int n = o.value("cases_total", 0);
    for (int i = 0; i < n; ++i) {
      spec::Case c;
      c.index = i;
      op.cases.push_back(c);
    }
    if (o.contains("dir") && o["dir"].is_string()) op.dir = o["dir"].get<std::string>();
    library = o.contains("best_speedup_vs_library") && o["best_speedup_vs_library"].is_number();
    if (library) op.library_path = op.dir / "library.cpp";
    return op;
  }
  return std::nullopt;
}

}  // namespace

bool RunData::complete() const {
  for (const auto& name : op_names) {
    auto it = states.find(name);
    if (it == states.end() || !it->second.done) return false;
  }
  return true;
}

std::string RunData::context_mode() const {
  return std::string(context::mode_name(config.loop.mode));
}

std::string RunData::model_name() const {
  if (config.loop.policy == run::Policy::replay) return std::string(run::policy_name(run::Policy::replay));
  if (config.model.is_object()) {
    std::string m = config.model.value("model", "");
    if (!m.empty()) return m;
  }
  return config.llm_profile.empty() ? std::string(run::policy_name(config.loop.policy)) : config.llm_profile;
}

std::optional<std::string> RunData::candidate(const std::string& code_file) const {
  if (code_file.empty()) return std::nullopt;
  fs::path p = fs::path(code_file).is_absolute() ? fs::path(code_file) : dir / code_file;
  auto text = util::read_file(p);
  if (!text) return std::nullopt;
  return std::move(*text);
}

namespace {

Status load_config(RunData& run, const fs::path& config_path) {
  KOPE_ASSIGN(std::string config_text, util::read_file(config_path));
  json cj = json::parse(config_text, nullptr, false);
  if (cj.is_discarded() || !cj.is_object())
    return fail(ErrorKind::corrupt, "{}: not valid JSON", config_path.string());
  auto cfg = run::config_from_json(cj);
  if (!cfg)
    return std::unexpected(std::move(cfg.error()).with_context(config_path.string() + ": "));
  run.config = std::move(*cfg);
  return {};
}

// results.json, when present (a damaged one is a warning: the figures come from the log).
Status load_results(RunData& run) {
  std::error_code ec;
  fs::path results_path = run.dir / "results.json";
  if (fs::exists(results_path, ec)) {
    KOPE_ASSIGN(std::string text, util::read_file(results_path));
    run.results = json::parse(text, nullptr, false);
    if (run.results.is_discarded()) {
      run.warnings.push_back(fmt::format(
          "{} is not valid JSON; figures come from the event log alone", results_path.string()));
      run.results = nullptr;
    }
  }
  return {};
}

// The event log: every op's state and the order the ops started in. A run whose ops ran as
// task runs (run/tasks.h) is read with its tasks' operator events.
Status load_events(RunData& run) {
  std::error_code ec;
  fs::path events_path = run.dir / "events.jsonl";
  if (!fs::exists(events_path, ec)) {
    return fail(ErrorKind::not_found, "{} has no events.jsonl (the run's event log)", run.dir.string());
  }
  KOPE_ASSIGN(auto lines, run::read_events(events_path));
  KOPE_ASSIGN(auto task_lines, run::task_op_events(run.dir));
  lines.insert(lines.end(), std::make_move_iterator(task_lines.begin()), std::make_move_iterator(task_lines.end()));
  auto events = run::parse_events(lines);
  if (!events) return std::unexpected(std::move(events.error()).with_context(events_path.string() + ": "));
  auto states = run::restore_states(*events);
  if (!states)
    return std::unexpected(std::move(states.error()).with_context(events_path.string() + ": "));
  run.states = std::move(*states);
  for (const auto& e : *events) {
    if (!std::holds_alternative<run::OpStartedEvent>(e.event) || e.op.empty()) continue;
    run.started_seq.try_emplace(e.op, e.seq);
  }
  return {};
}

// Every selected op's spec: from its folder, else (gone or changed) from results.json.
Status load_specs(RunData& run, const fs::path& config_path) {
  for (const auto& ref : run.config.ops) {
    run.op_names.push_back(ref.name);
    fs::path op_dir = ref.dir;
    if (op_dir.is_relative()) op_dir = run.dir / op_dir;
    auto op = spec::load_op(op_dir);
    bool library = false;
    if (op && (ref.spec_hash.empty() || op->spec_hash == ref.spec_hash)) {
      library = op->library_path.has_value();
      run.has_library[ref.name] = library;
      run.specs.emplace(ref.name, std::move(*op));
      continue;
    }
    std::string why =
        op ? "its spec changed since the run (the spec hash differs)" : op.error().message;
    if (auto stand_in = spec_from_results(run.results, ref.name, library)) {
      run.warnings.push_back(fmt::format(
          "operator {} of run {}: {}; its case count and category come from results.json", ref.name,
          run.config.run_id, why));
      run.has_library[ref.name] = library;
      run.specs.emplace(ref.name, std::move(*stand_in));
    } else if (op) {
      run.warnings.push_back(fmt::format("operator {} of run {}: {}; the current spec is used",
                                         ref.name, run.config.run_id, why));
      run.has_library[ref.name] = op->library_path.has_value();
      run.specs.emplace(ref.name, std::move(*op));
    } else {
      return fail(ErrorKind::config,
                  "{}: operator {} cannot be found ({}) and results.json does not describe it",
                  config_path.string(), ref.name, why);
    }
  }
  for (const auto& [name, st] : run.states) {
    if (!run.specs.contains(name)) {
      run.warnings.push_back(
          fmt::format("run {}: the event log names operator {}, which config.json does not select; "
                      "it is left out",
                      run.config.run_id, name));
    }
  }
  return {};
}

}  // namespace

Result<RunData> load_run(const fs::path& dir) {
  RunData run;
  run.dir = dir;
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    return fail(ErrorKind::not_found, "{}: no such run directory", dir.string());
  fs::path config_path = dir / "config.json";
  if (!fs::exists(config_path, ec)) {
    return fail(ErrorKind::not_found,
                "{} is not a run directory (no config.json; `kope run` writes one)", dir.string());
  }
  KOPE_TRY(load_config(run, config_path));
  KOPE_TRY(load_results(run));
  KOPE_TRY(load_events(run));
  KOPE_TRY(load_specs(run, config_path));
  return run;
}

}  // namespace kope::report
