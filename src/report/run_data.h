// report/run_data.h — a run directory (src/run/) read back for reporting.
//
// Reads config.json (run::config_from_json), the event log (run::read_events and
// run::restore_states, so every attempt is exactly what the agent recorded) and, when present,
// results.json. Operator specs come from the folders config.json names (a relative folder is
// taken relative to the run directory, so a run directory can be moved with its ops); when a
// folder is gone or its spec changed since the run, the op's entry in results.json stands in
// (name, category, level, case count) and a warning says so. Reading never writes to the run
// directory and never takes its lock, so a run in progress can be reported on.
#pragma once

#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "kope/error.h"
#include "kope/spec.h"
#include "run/config.h"
#include "run/op_state.h"

namespace kope::report {

namespace fs = std::filesystem;

struct RunData {
  fs::path dir;
  run::RunConfig config;
  nlohmann::json results;                        // results.json, or null when absent
  std::vector<std::string> op_names;             // the run's selection, in config order
  std::map<std::string, spec::OpSpec> specs;     // every selected op, by name
  std::map<std::string, bool> has_library;       // op -> a library baseline exists
  std::map<std::string, run::OpState> states;  // from the event log (ops never started: absent)
  std::map<std::string, int64_t> started_seq;    // op -> sequence number of its first op_started
  std::vector<std::string> warnings;             // things the report should mention

  bool selected(const std::string& op) const { return specs.contains(op); }
  // Every selected op finished (op_done logged).
  bool complete() const;
  std::string context_mode() const;  // "active", "passive", "none"
  std::string model_name() const;    // the model, or the policy when there is none
  // A candidate's source, from its path relative to the run directory; nullopt when missing.
  std::optional<std::string> candidate(const std::string& code_file) const;
};

// Loads the run in `dir`. Fails with not_found when `dir` holds no config.json or no
// events.jsonl, corrupt when either is malformed (naming the file and line), config when an
// op's spec can be found neither in its folder nor in results.json.
Result<RunData> load_run(const fs::path& dir);

}  // namespace kope::report
