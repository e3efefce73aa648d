// run/results.h — the figures of a run (docs/design.md §6), computed from the ops' attempts.
//
// results.json holds run-level figures and an `ops` array with one entry per selected op:
// name, solved, attempts, best_speedup_vs_reference, best_speedup_vs_library, tokens_prompt,
// tokens_completion, attempts_to_first_correct, attempts_to_best, fraction_of_roofline,
// cases_passed/cases_total, per-tier tokens, best_timing_disturbed / disturbed_attempts (timings
// taken under outside load), where the best kernel came from (best_policy "llm" or "replay",
// best_source_case: the replayed memory case), prompt caching (tokens_cached, tokens_cache_write,
// tokens_billed_equivalent: uncached prompt + cached x cached_price_ratio + completion) and more.
// Every aggregate names the set it is over.
// Figures depend only on the attempts, so a resumed run reports what an uninterrupted one would.
// Pure and thread-safe.
#pragma once

#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "run/op_state.h"
#include "kope/spec.h"

namespace kope::run {

// One op's entry of the `ops` array.
nlohmann::json op_result(const spec::OpSpec& op, const OpState& state);

// The whole results object: `header` (run id, config summary...) merged with "figures" and "ops".
// An op without a state counts as attempted zero times, all its cases failed.
nlohmann::json compute_results(const nlohmann::json& header, const std::vector<spec::OpSpec>& ops,
                               const std::map<std::string, OpState>& states);

// A few lines for the terminal: solved, pass rate, geomean speedups, fast_p, tokens.
std::string results_summary(const nlohmann::json& results);

}  // namespace kope::run
