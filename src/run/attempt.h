// run/attempt.h — one iteration's record as the run directory keeps it (event log, results, resume).
//
// An Attempt holds everything the loop decided and measured for one candidate: its stage and
// lineage, what the model said it applied and its source, the evaluator's verdict and timings,
// whether it became the incumbent, the tokens its prompt used per tier. It round-trips through
// JSON (all but the source, which the run directory keeps beside the log) so a killed run can be
// rebuilt from its event log exactly as it was. Plain values; thread-compatible.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "kope/eval.h"
#include "eval/decision.h"
#include "kope/memory.h"
#include "run/policy.h"

namespace kope::run {

// Verdict recorded for an answer that held no usable code (never produced by the evaluator):
// the attempt counts, the memory records it as `compile_error` with this message prefix.
inline constexpr std::string_view k_no_code_message = "no code in answer";

// How a correct attempt was compared with the incumbent (Attempt::decision): timed beside it by
// the evaluator, keeping that comparison's decision (faster ... undecided), or compared with the
// incumbent's recorded timings (recorded_timings); none without an incumbent to beat.
enum class Decision { none, faster, slower, not_faster, undecided, recorded_timings };

// The JSON spelling, from one table: a side-by-side decision as eval::incumbent_decision_name
// spells it ("faster_than_incumbent", ...), "recorded_timings", and "" for none.
std::string_view decision_name(Decision d);
// The decision named `name` (decision_name's spelling, "" for none); nullopt for any other string.
std::optional<Decision> parse_decision(std::string_view name);
// The side-by-side comparison's decision `d` as an attempt keeps it (unavailable: none).
Decision decision_of(eval::IncumbentDecision d);
// The evaluator's decision behind a side-by-side Decision; nullopt for none and recorded_timings.
std::optional<eval::IncumbentDecision> incumbent_decision(Decision d);

// The outcome as an attempt's "label" spells it: memory::outcome_name's, "" for none.
std::string_view label_name(std::optional<memory::Outcome> o);
// The outcome `label` names (label_name's spelling, "" for none). Fails with corrupt naming any
// other string and the ones it may be.
Result<std::optional<memory::Outcome>> parse_label(std::string_view label);
// The replacement rule as an attempt's "decided_by" spells it: eval::replacement_rule_name's,
// "" for none.
std::string_view decided_by_name(std::optional<eval::ReplacementRule> r);
// The rule `name` names (decided_by_name's spelling, "" for none). Fails with corrupt naming any
// other string and the ones it may be.
Result<std::optional<eval::ReplacementRule>> parse_decided_by(std::string_view name);

// How the model gave its kernel: one whole translation unit, or search/replace edits against
// the incumbent (docs/design.md §3, "edit answers").
enum class AnswerForm { whole, edits };
// The form as an attempt's "answer_form" spells it: "whole", "edits"; "" for none (no model
// answered, or a run written before the field).
std::string_view answer_form_name(std::optional<AnswerForm> f);
// The form `name` names (answer_form_name's spelling). Fails with corrupt naming any other
// string and the ones it may be.
Result<std::optional<AnswerForm>> parse_answer_form(std::string_view name);

// What memory held, when an op pack was fixed (OpPackRecord::evidence), about refinements of
// operators of the op's category on this machine (the evidence stop rule's input,
// agent/plan.h); absent in runs from before it and where memory held no such refinement.
struct RefineEvidence {
  std::string category;
  int refinements = 0;  // correct or not, native to this target, other ops (or this one, not held out)
  int wins = 0;         // of them, correct and at least 1.05x their parent (outcome effective)
  bool operator==(const RefineEvidence&) const = default;
};

// Why one knowledge item entered a prompt: its tier and section, its tokens, the value the
// selection ranked it by, the score parts behind that value (relevance, learned, similarity,
// recency, ... as the scorer produced them) and a short reason. The prompt event's
// "admission" array, carried to the answer event and the attempt (the lineage view shows it).
struct Admission {
  std::string id;
  std::string tier;      // "warm", "cold"
  std::string section;   // "kernels", "cases", "lessons", "feasibility", "unverified", "notes"
  int64_t tokens = 0;
  double value = 0;
  std::map<std::string, double> parts;
  std::string reason;
  std::string category;  // the op category the item is about ("" for general items)
};

nlohmann::json admission_json(const std::vector<Admission>& list);
// Lenient: a missing or malformed array reads as empty (runs written before it existed).
std::vector<Admission> admission_from_json(const nlohmann::json& list);

// What an attempt keeps of one timed case: the evaluation's figures, taken over whole, and how
// the case fared side by side with the incumbent.
struct TimingSummary : eval::CaseFigures {
  // Feedback the model can act on (issue 29): this case timed side by side with the incumbent in
  // the same comparison (eval::CaseComparison): the median per-call time of each kernel's batches
  // there and the median of the paired ratios incumbent / candidate (> 1: this attempt faster);
  // the wait shares of both kernels there. Unset without a comparison (runs written before them).
  std::optional<double> side_candidate_us = {};
  std::optional<double> side_incumbent_us = {};
  std::optional<double> side_ratio = {};
  std::optional<double> side_candidate_contention = {};
  std::optional<double> side_incumbent_contention = {};
};

// The wrong cases an attempt keeps, for feedback that shows which shapes fail.
inline constexpr size_t k_wrong_cases_kept = 4;

// The facts of the prompt a model call answered: made once when the prompt is assembled, logged
// with the answer (AnswerEvent) and carried by the attempt, as this one part.
struct PromptFacts {
  std::string prompt_id;
  int64_t prompt_tokens_estimated = 0;
  std::map<std::string, int64_t> tier_tokens;  // system, hot, warm, cold
  int64_t knowledge_budget = 0;
  std::vector<std::pair<std::string, double>> memory_items;  // admitted memory items and scores
  std::vector<Admission> admission;     // why each knowledge item of the prompt was admitted
  // kope's estimate of the prompt's cacheable prefix (the system and per-op parts) and its hash.
  int64_t prefix_tokens = 0;
  std::string prefix_hash;
};

// What a model call cost, as the provider reported it (or kope estimated it): made once when the
// reply arrives, logged with the answer and carried by the attempt, as this one part.
struct ModelUsage {
  int64_t tokens_prompt = 0;            // reported by the provider (or estimated)
  int64_t tokens_completion = 0;
  double cost_usd = 0;
  // Prompt caching (docs/design.md §6): the part of tokens_prompt served from the provider's
  // cache and the part written to it, as the provider reported them (tokens_cached_estimated:
  // the provider reported no usage and tokens_cached is kope's estimate, the cacheable prefix
  // of a call whose prefix repeated the previous call's); the cached-token price ratio of the
  // profile that answered.
  int64_t tokens_cached = 0;
  int64_t tokens_cache_write = 0;
  bool tokens_cached_estimated = false;
  std::optional<double> cached_price_ratio;  // nullopt: no model call (replay) or an older run
  double llm_seconds = 0;
};

// One attempt of an op. Its JSON (to_json) is flat; in memory the prompt's facts and the call's
// usage are the parts above, taken over whole from the answer (AnswerEvent) that produced it.
struct Attempt : PromptFacts, ModelUsage {
  int iteration = 0;                    // 1-based within the op's task
  memory::Stage stage = memory::Stage::draft;
  Policy policy = Policy::llm;
  std::optional<int> parent_iteration;  // the attempt in this task it began from
  std::optional<int64_t> parent_case_id;
  std::optional<int64_t> source_case_id;  // replay: the memory case the kernel came from
  std::string optimisation;
  bool header_found = false;
  bool has_code = false;
  std::string code_file;                // relative to the run directory
  std::string code_hash;                // SHA-256 of the source ("" without code)
  // The source itself, as the policy proposed it (the judge writes it to code_file). It travels
  // with the attempt in memory (into OpState by its attempt event) and is never in its JSON:
  // nullopt for an attempt read back from the log (agent::OpContext::code_of reads code_file
  // then) and for an answer without code.
  std::optional<std::string> code;
  // Set by the judge (an answer without code: compile_error, see k_no_code_message).
  eval::Verdict verdict = eval::Verdict::compile_error;
  std::string message;
  std::string diagnostics;              // trimmed
  std::string first_mismatch;
  // wrong_result: the first k_wrong_cases_kept wrong cases, each "case <label>: <its first
  // mismatching element>" (first_mismatch is the first of them); empty in older runs.
  std::vector<std::string> wrong_cases;
  int cases_passed = 0;
  int cases_total = 0;
  std::vector<TimingSummary> timings;
  std::optional<double> speedup_vs_reference;
  std::optional<double> speedup_vs_library;
  std::optional<double> speedup_vs_parent;     // r: vs the parent kernel (or the baseline, see loop.h)
  std::optional<double> speedup_vs_incumbent;  // vs the incumbent at the time
  std::optional<double> fraction_of_roofline;
  // The library baseline's configuration, and whether the environment forced it.
  std::optional<eval::LibraryConfig> library_config;
  bool improved = false;                // became the incumbent
  // Why the memory quarantined this correct attempt ("" when it did not): an implausible win is
  // held back from the incumbent until re-verified at the end of the op (OpState::reverified).
  std::string quarantine_reason;
  // How the incumbent decision was reached (none without an incumbent to beat).
  Decision decision = Decision::none;
  std::optional<double> decision_lower;  // the interval of speedup_vs_incumbent, when measured
  std::optional<double> decision_upper;
  int decision_pairs = 0;               // pairs of batches the comparison timed
  bool early_figures = false;           // timings are the comparison's early figures, not the full CI
  double contention = 0;                // the largest median contention of its timings / the comparison
  double decision_contention = 0;       // the comparison's contention (the evidence a fast verdict rests on)
  bool evidence_disturbed = false;      // the evidence the decision rested on was disturbed
  bool retimed = false;                 // evaluated once more because the first evidence was disturbed
  std::optional<double> margin_demanded;  // still disturbed: speedup_vs_incumbent had to exceed this
  // Which rule decided whether it replaced the incumbent, and a sentence saying why (none and ""
  // in runs written before it, and without an incumbent to beat). JSON: the rule's name
  // (eval::replacement_rule_name: "side_by_side", "own_waits", ...), "" for none.
  std::optional<eval::ReplacementRule> decided_by;
  std::string decided_by_reason;
  double decision_outside_load = 0;     // the comparison's outside load (eval::IncumbentComparison::outside_load)
  // The memory's outcome for it (Store::assess_attempt; none until the judge decided). JSON
  // "label": memory::outcome_name's spelling ("effective", "partial", ...), "" for none.
  std::optional<memory::Outcome> outcome;
  uint64_t eval_seed = 0;
  double eval_seconds = 0;
  double wall_seconds = 0;              // the whole iteration
  bool notable = false;                 // triggers a reflection
  std::string notable_reason;
  std::string journal;
  // How the model gave its kernel: whole, or edits against the incumbent (answer_edits of them);
  // none when no model answered (replay) or the run predates the field. JSON "answer_form":
  // answer_form_name's spelling. Its output tokens are tokens_completion.
  std::optional<AnswerForm> answer_form;
  int answer_edits = 0;

  bool correct() const { return verdict == eval::Verdict::correct; }
  // Some timed case was measured under outside load (eval::EvalResult::disturbed).
  bool timing_disturbed() const {
    for (const auto& t : timings) {
      if (t.disturbed) return true;
    }
    return false;
  }
};

nlohmann::json to_json(const Attempt& a);
Result<Attempt> attempt_from_json(const nlohmann::json& j);

// Geometric mean over the timed cases both have of before.median_us / after.median_us (how much
// faster `after` is); nullopt when they share no timed case.
std::optional<double> relative_speed(const std::vector<TimingSummary>& before, const std::vector<TimingSummary>& after);

}  // namespace kope::run
