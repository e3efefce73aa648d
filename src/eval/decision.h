// eval/decision.h — the sequential rule that decides "is the candidate faster than the incumbent?"
//
// The candidate and the incumbent are timed in alternating batches (CaseTimer, one batch each in
// turn), so batch i of each saw the same machine conditions; pair i gives the paired ratio
// incumbent_i / candidate_i (> 1: the candidate is faster). Per timed case c the parameter is
// θ_c, the median of that ratio; over the op it is the geometric mean of the θ_c. "Faster" means
// geomean θ > 1 + margin (the agent's min_improvement), exactly the agent's incumbent rule.
//
// The rule (stated here and in README "Faster timed verdicts"):
//   - Each case is sampled in pairs and looked at after n_0, ⌈1.5 n_0⌉, ⌈1.5² n_0⌉, ... pairs up
//     to max_pairs (the schedule is fixed in advance), plus once when its time is up (but not
//     before the second scheduled look: the first interval is the pairs' range). At each look
//     the case's interval for log θ_c is the distribution-free order-statistic interval of the
//     median of the paired log ratios (stats.h, the sign-test interval) at a level fixed in
//     advance: the first look α_1 = s·α/K (s = first_look_share, ½), each of the L − 1 later
//     looks α' = (1 − s)·α / (K·(L − 1)), K timed cases, L looks per case. The levels of all the
//     looks of all the cases add up to α (a weighted Bonferroni), so all the intervals the rule
//     ever computes hold at once with probability ≥ 1 − α, whatever the stopping times. n_0 is
//     the smallest n for which the first look's interval exists: most comparisons are clear and
//     settle there, so the first look gets the larger share (8 pairs per case with K = 3, where
//     an equal split needs 11).
//   - A case stops at the first look where it is settled: when its interval lies wholly above or
//     wholly below log(1 + margin) and every case compared before it lay wholly on that same side
//     (so with one timed case, and for the first of several); otherwise when its interval is
//     narrower than ±precision (±decided_precision once it lies on one side), so that a geometric
//     mean over cases that disagree can be formed tightly. Cases on one side all move the op's
//     interval to that side, however wide they are: a wide one costs only where a later case
//     lies on the other side, and then the op is undecided (the incumbent stays), never wrong.
//   - The op's interval is [exp(mean_c log lower_c), exp(mean_c log upper_c)]. Decision:
//     lower > 1 + margin: faster_than_incumbent; upper < 1: slower_than_incumbent;
//     upper ≤ 1 + margin: not_faster_than_incumbent; otherwise undecided (a tie: the incumbent
//     stays). The probability of a wrong decision (faster when geomean θ ≤ 1 + margin, or
//     slower / not faster when it is above) is at most α (default 0.05); Bonferroni makes the
//     real rate far lower (the simulation in decision_test.cpp measures it).
//   - When enough pairs have both batches undisturbed (contention < k_clean_contention), a look
//     uses those pairs only (as CaseTimer does for medians).
// Assumption: within a case the pairs are exchangeable (no trend the alternation does not cancel).
// Pure functions and a driver over a sampling callback; thread-compatible.
#pragma once

#include <cstddef>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kope/eval.h"

namespace kope::eval {

struct DecisionRule {
  double alpha = 0.05;            // total error rate of the decision
  double margin = 0.01;           // faster means geomean ratio > 1 + margin
  int cases = 1;                  // K: the timed cases combined
  size_t max_pairs = 200;         // the last scheduled look
  double precision = 0.01;        // several cases: settled when the log interval is within ±this
  double decided_precision = 0.05;  // ... or within ±this when it lies wholly on one side of 1 + margin
  double clean_contention = 0.02; // a pair is clean when both batches waited less than this share
  double promising = 0.03;        // an estimate above (1 + margin)(1 + this) is not cut short by the budget
  double first_look_share = 0.5;  // the share of a case's α/K its first look spends (0 or 1: equal shares)
};

// The looks (pair counts) of the schedule, increasing; the last is max_pairs.
std::vector<size_t> decision_looks(const DecisionRule& rule);
// The level of every look after the first: α' = (1 − s)·α / (K · (L − 1)), L = looks + 1 (the
// look when the time is up); and the first look's, s·α/K. With s = 0 or 1, both α / (K · L).
double per_look_alpha(const DecisionRule& rule);
double first_look_alpha(const DecisionRule& rule);

struct PairSample {
  double candidate = 0;   // seconds per call of the candidate's batch
  double incumbent = 0;   // ... and of the incumbent's batch that followed it
  double contention = 0;  // the larger of the two batches' contention
  double outside = 0;     // the larger of the two timings' outside load so far (TimingOutcome::outside_load)
};

// The paired estimate of one case at a look.
struct CaseRatio {
  double ratio = 1;       // θ_c: median of incumbent / candidate
  double lower = 0;       // its interval at the look's level; 0 / inf when it does not exist yet
  double upper = std::numeric_limits<double>::infinity();
  size_t pairs = 0;       // pairs the estimate used
  size_t pairs_total = 0; // pairs sampled
  double contention = 0;  // median pair contention over all pairs
  bool disturbed = false; // waits_disturbed over the pairs' contention
  int looks = 0;          // looks taken
};

// The estimate from `pairs` at level `alpha` (clean pairs only when at least `min_clean` exist).
CaseRatio paired_ratio(const std::vector<PairSample>& pairs, double alpha, double clean_contention, size_t min_clean);

// Where the intervals of the cases compared so far lie: none compared yet, all wholly above
// 1 + margin, all wholly at or below it, or some elsewhere (on both sides, or straddling it).
enum class CaseSides { none, faster, not_faster, mixed };
CaseSides add_case_side(CaseSides so_far, const CaseRatio& c, const DecisionRule& rule);

// Whether a case's estimate lets it stop, after cases that lay on `earlier` (see the header comment).
bool case_settled(const CaseRatio& c, const DecisionRule& rule, CaseSides earlier = CaseSides::none);

// The op's decision from its cases' final estimates.
struct CombinedRatio {
  IncumbentDecision decision = IncumbentDecision::undecided;
  double ratio = 1, lower = 0, upper = std::numeric_limits<double>::infinity();
};
CombinedRatio combine_cases(const std::vector<CaseRatio>& cases, const DecisionRule& rule);

// What the sampling callback reports for one pair.
enum class PairStatus {
  ok,       // a pair was added
  time_up,  // a pair was added and the case's time is up (stops at the next chance once the
            // second scheduled look's pairs exist)
  budget_spent,  // a pair was added and the case's share of the comparison budget is spent:
                 // stops at the next scheduled look (the first at the earliest) unless the
                 // estimate there clears the margin by DecisionRule::promising while its interval
                 // does not yet (a candidate that may replace the incumbent is timed until the
                 // case settles or its time is up)
  failed,   // no pair: a kernel failed; the driver returns at once
};

// Runs the rule on one case: calls `next` for each pair, looks at the schedule, and returns the
// estimate at the look where the case settled, its time ran out, or max_pairs was reached.
// `earlier`: where the cases compared before this one lay (add_case_side over them). `failed` is
// set when `next` reported a failure (the estimate is then whatever was there).
CaseRatio run_case(const DecisionRule& rule, const std::function<PairStatus(PairSample&)>& next, CaseSides earlier = CaseSides::none,
                   bool* failed = nullptr);

// --- Whether a correct candidate replaces the incumbent (the judge's incumbent rule) ----------
//
// The comparison above decides at its error rate; what remains is whether waiting for a CPU
// may have biased the evidence. The rule, in order (the first that applies decides):
//   - recorded_timings: no side-by-side comparison: the ratio of the recorded timings must
//     exceed 1 + margin; when either timing was disturbed by other load, it is re-timed once
//     (retime_when_quiet) and then must exceed the raised margin (raised_margin, below).
//   - side_by_side: the comparison's decision stands when it is not `faster`, or when its
//     pairs were not disturbed.
//   - own_waits: the comparison found the candidate faster (its interval wholly above
//     1 + margin) and the only disturbance is waiting the kernels did on their own (no outside
//     load measured beside it: outside_load_seen false): such waits are part of each kernel's
//     time, counted alike in both batches of every pair, so the raised margin does not apply
//     and the candidate replaces the incumbent.
//   - retime_when_quiet: found faster while other work ran beside it: evaluated once more, after
//     waiting for the machine to be quiet (EvalOptions::quiet_wait_seconds), before deciding.
//   - raised_margin: still disturbed by other load after re-timing: the estimate must exceed
//     (1 + margin) / (1 − c), c the evidence's contention (clamped to 0.9).
enum class ReplacementRule { side_by_side, own_waits, retime_when_quiet, raised_margin, recorded_timings };
std::string_view replacement_rule_name(ReplacementRule r);
// The rule replacement_rule_name spells `name`; nullopt for any other string.
std::optional<ReplacementRule> parse_replacement_rule(std::string_view name);
// Every rule's name, in the enum's order, comma-separated (for messages).
std::string replacement_rule_names();

struct ReplacementEvidence {
  bool compared = false;          // a side-by-side comparison decided (else the recorded timings)
  IncumbentDecision decision = IncumbentDecision::undecided;  // compared: its decision
  double ratio = 1;               // incumbent time / candidate time: the comparison's, or the recorded timings'
  double lower = 0;               // compared: its interval (0 / inf: none)
  double upper = std::numeric_limits<double>::infinity();
  double margin = 0.01;           // the agent's min_improvement
  bool disturbed = false;         // the evidence was marked disturbed (its waits may have moved it)
  double contention = 0;          // the evidence's waits: the comparison's, or the larger recorded one
  double outside_load = 0;        // the largest outside load measured beside the evidence
  bool retimed = false;           // this evidence is already the re-timing
};

struct ReplacementDecision {
  bool replaces = false;
  bool retime = false;            // evaluate once more, when the machine is quiet, then decide again
  ReplacementRule rule = ReplacementRule::side_by_side;
  std::optional<double> margin_demanded;  // raised_margin: what the ratio had to exceed
  std::string reason;             // one sentence naming the rule and the figures it used
};

ReplacementDecision decide_replacement(const ReplacementEvidence& e);

}  // namespace kope::eval
