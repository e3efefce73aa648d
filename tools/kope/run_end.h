// tools/kope/run_end.h — what `kope run` adds around the agent: the starter experience before a
// run, the HTML report and the one-screen summary after it.
#pragma once

#include <filesystem>
#include <optional>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "kope/error.h"
#include "kope/memory.h"

namespace kope::cli {

// Writes `run_dir`/report.html (the `kope report RUN_DIR --memory MEMORY --html ...` page).
// Returns its path.
Result<std::filesystem::path> write_run_report(const std::filesystem::path& run_dir, const std::string& memory_path);

// Where an op's best kernel came from, in words: "model gpt-4o (this run)", "starter (relu,
// re-verified here)", "foreign experience (...)", "this machine's memory (...)", or "" when the
// op has no correct kernel. `op` is one entry of results.json's `ops`.
std::string kernel_source(const nlohmann::json& op, const nlohmann::json& run_model, memory::Store& store,
                          const std::set<std::string>& starter_origins, const std::string& here);

// The per-op table printed at the end of a run: op, best speedup vs reference and vs library,
// fraction of the roofline, where the kernel came from. Unsolved ops share one line at the end.
std::string run_summary_table(const nlohmann::json& results, memory::Database& store, const std::string& here);

}  // namespace kope::cli
