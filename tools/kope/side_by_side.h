// tools/kope/side_by_side.h — the best kernels of compared runs timed against each other.
//
// A run's recorded speedups come from its own timings, each taken when the attempt ran: under
// whatever else the machine did then (other operators of the same run, the model's clients),
// and against the reference timed at another moment. Two context modes' speed figures are then
// two noisy measurements taken apart. `kope ablate --side-by-side` settles it the way the
// evaluator settles a candidate against its incumbent: per operator, a mode's best kernel and
// the baseline's best kernel are timed in alternating batches on the same data, in one process
// holding the machine's timing lock, and the paired ratio comes with its interval
// (eval/decision.h). Over the operators, the geometric mean of the ratios gets a seeded
// bootstrap interval, for all of them and per level group.
#pragma once

#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kope/error.h"

namespace kope::cli {

struct SideBySideRun {
  std::string label;               // the mode ("none", "active", ...)
  std::filesystem::path run_dir;   // its complete run directory
};

struct SideBySideOptions {
  double seconds = 30;             // the comparison's budget per operator (all its timed cases)
  std::string backend = "cpu";
  std::string suite;               // the operators' suite root; "" = the built-in one
  int resamples = 10000;
  uint64_t seed = 1;               // the bootstrap's and the timing data's seed
};

// Compares every run after the first (the baseline) with it, operator by operator, over the
// operators both solved. Rows already in `cache` for the same operator, mode and kernels are
// reused (the comparison is resumable); `cache` is rewritten after every operator. Returns
// {"rows": [...], "summary": [...]} (docs/design.md §10 documents the fields).
Result<nlohmann::json> side_by_side(const std::vector<SideBySideRun>& runs, const std::filesystem::path& cache,
                                    const SideBySideOptions& options, const std::function<void(const std::string&)>& say);

// The comparison as text: one line per operator and mode, then each mode's geometric means.
std::string side_by_side_text(const nlohmann::json& result);

}  // namespace kope::cli
