// report/figures.h — the figures of one or several runs over one stated set of operators
// (docs/design.md §6), and the paired comparison of runs.
//
// The set: the operators named by --ops (selectors resolved against the suite), else the union
// of the runs' selections. Every figure is over that set: an operator of the set that a run did
// not select, or never started, counts as unsolved with all its cases failed. Per-operator and
// run-level figures are the agent's own (run::op_result, run::compute_results) so a report
// and results.json never disagree for the same set; the report adds breakdowns by level and
// category, means over explicitly named sets (e.g. "the 31 operators solved in every run"),
// the fast_p curve, per-iteration series and paired bootstrap comparisons.
// analyse() is pure given its inputs and deterministic (the bootstrap is seeded).
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "kope/spec.h"
#include "report/memory_view.h"
#include "report/run_data.h"
#include "report/stats.h"

namespace kope::report {

struct ReportOptions {
  std::vector<std::string> op_selectors;  // --ops; empty: the union of the runs' selections
  fs::path suite_root;              // for selectors; empty: the first run's suite, else the default
  std::vector<std::string> labels;  // one per run; empty: derived from what differs between runs
  std::string baseline;             // label of the run others are compared with; empty: the first
  BootstrapOptions bootstrap;
};

// The report's operator set.
struct OpSet {
  std::vector<spec::OpSpec> ops;  // sorted by (category, name)
  std::map<std::string, bool> has_library;
  int64_t cases_total = 0;
  int with_library = 0;
  std::string origin;               // how the set was chosen, in words
  std::string description() const;  // "the 39 operators of <origin> (812 cases)"
};

// One attempt as the plots need it.
struct IterationPoint {
  int iteration = 0;
  std::optional<double> best_speedup;  // incumbent's speedup vs the reference after this attempt
  std::map<std::string, int64_t> tier_tokens;
  // This attempt's own speedup vs the reference when it counts for tokens to target: correct,
  // and not held in quarantine (unless its re-verification confirmed it).
  std::optional<double> speedup;
  // Every token the op spent up to and including this attempt (reflections before it included).
  int64_t tokens_so_far = 0;
};

// One operator in one run.
struct OpFigures {
  std::string name;
  std::string category;
  int level = 1;
  bool selected = false;  // the run selected it
  bool started = false;
  bool done = false;
  bool solved = false;
  bool has_library = false;
  int cases_passed = 0;
  int cases_total = 0;
  int attempts = 0;
  std::optional<double> speedup_vs_reference;
  std::optional<double> speedup_vs_library;
  std::optional<double> fraction_of_roofline;
  // The library baseline's configuration in words (results.json library_config), and whether
  // the environment forced it: a speedup vs the library is then vs a handicapped one.
  std::string library_config;
  bool library_forced = false;
  std::string library_forced_by;
  std::optional<int> attempts_to_first_correct;
  std::optional<int> attempts_to_best;
  int64_t tokens_prompt = 0;
  int64_t tokens_completion = 0;
  int64_t tokens_cached = 0;             // results.json tokens_cached
  int64_t tokens_billed_equivalent = 0;  // results.json tokens_billed_equivalent
  // Tokens to target (tokens_to_target()): the target speed, and the tokens and attempts this
  // run spent up to and including its first attempt that reached it (nullopt: never reached).
  std::optional<double> target_speedup;
  std::optional<int64_t> tokens_to_target;
  std::optional<int> attempts_to_target;
  double cost_usd = 0;
  std::string stop_reason;
  std::string best_optimisation;
  std::string experience;  // "held-out", "seen", "unseen" (run::OpState::experience); "" when unknown
  std::vector<IterationPoint> iterations;
  int64_t tokens() const { return tokens_prompt + tokens_completion; }
};

// A group's figures (the agent's compute_results "figures" object) with what it is over.
struct GroupFigures {
  std::string key;  // "level 2", "normalization"
  int ops = 0;
  nlohmann::json figures;
};

// A run's tokens to target over the set's operators that have a target.
struct TargetFigures {
  int ops = 0;      // operators with a target (some compared run solved them)
  int reached = 0;  // of those, the ones this run reached
  std::optional<double> geomean;  // tokens to target over the operators reached
  std::optional<double> median;
  std::optional<double> attempts_mean;  // attempts to target over the same operators
  std::string over;  // the operators, in words
};

struct RunFigures {
  std::string label;
  const RunData* run = nullptr;
  nlohmann::json figures;      // over the whole set
  std::vector<OpFigures> ops;  // in set order
  std::vector<GroupFigures> by_level;
  std::vector<GroupFigures> by_category;
  std::vector<GroupFigures> by_experience;  // "held-out", "seen", "unseen": the ops the run started so
  std::vector<std::string> stream;  // set ops in the order the run started them
  TargetFigures tokens_to_target;
  int solved() const;
  const OpFigures* op(const std::string& name) const;
};

// A paired difference between two runs over a named set of operators.
struct PairedMetric {
  std::string key;  // "pass_rate", "geomean_speedup_vs_reference", ...
  std::string title;
  std::string kind;  // "difference" (b − a) or "ratio" (b / a)
  std::string unit;  // "points" (shares), "speedup", "attempts", "tokens"
  std::string set;   // the set in words
  int n = 0;         // operators in it
  std::optional<double> baseline_value;
  std::optional<double> value;
  std::optional<Interval> interval;  // estimate with its bootstrap interval
};

struct OpPair {
  std::string op;
  const OpFigures* a = nullptr;
  const OpFigures* b = nullptr;
  std::optional<double> speedup_ratio;  // b / a, both solved
};

struct Comparison {
  std::string baseline;  // label
  std::string other;
  std::vector<PairedMetric> metrics;
  std::vector<OpPair> ops;  // every op of the set
};

// Holds pointers into itself (figures -> runs, comparisons -> figures): movable, not copyable.
struct Analysis {
  Analysis() = default;
  Analysis(Analysis&&) = default;
  Analysis& operator=(Analysis&&) = default;
  Analysis(const Analysis&) = delete;
  Analysis& operator=(const Analysis&) = delete;

  OpSet set;
  std::vector<RunData> runs;
  std::vector<RunFigures> figures;  // one per run, same order
  std::vector<std::string> solved_in_every_run;
  std::string common_set;               // "the 31 operators solved in every run"
  std::vector<Comparison> comparisons;  // baseline vs each other run
  BootstrapOptions bootstrap;
  std::optional<MemoryOverview> memory;
  std::vector<std::string> notes;  // warnings and caveats to print with the report
  // Geometric means over the common set (solved in every run), per run label.
  std::map<std::string, std::optional<double>> common_geomean_reference;
  std::map<std::string, std::optional<double>> common_geomean_library;
  int common_with_library = 0;
};

// Loads nothing: builds the analysis of already loaded runs. Fails with usage for duplicate
// labels, an unknown baseline or selectors that match nothing.
Result<Analysis> analyse(std::vector<RunData> runs, const ReportOptions& options);

// Labels for runs: what differs between them (context mode, policy, model, ...), else the run
// ids; unique.
std::vector<std::string> derive_labels(const std::vector<RunData>& runs);

// Tokens to target (docs/design.md §6). An operator's target is k_target_fraction of the best
// speedup vs the reference that any of `runs` reached on it (IterationPoint::speedup); each
// run's tokens to target on it is the tokens_so_far of its first attempt at or above the target.
// Fills OpFigures::target_speedup / tokens_to_target / attempts_to_target and
// RunFigures::tokens_to_target (geomean and median over the operators the run reached; a target
// reached with no tokens, as a replay can, counts as 1 token in the geomean). analyse() calls it
// over all its runs.
inline constexpr double k_target_fraction = 0.9;  // "within 10% of the best speed"
void compute_tokens_to_target(std::vector<RunFigures>& runs);

// fast_p as a step curve: the share of the set's operators faster than p, at every p where it
// changes, from 0 to `p_max`. Library variant over the operators with a library baseline.
std::vector<std::pair<double, double>> fast_p_curve(const RunFigures& r, int n_ops, bool vs_library,
                                                    double p_max);

}  // namespace kope::report
