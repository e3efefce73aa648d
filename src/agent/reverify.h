// agent/reverify.h — re-verification of a quarantined win (docs/design.md §4).
//
// The memory quarantines a correct case whose speed is implausible (below a hardware floor,
// beyond the roofline, a jump of more than 10x over its parent, more than 1000x over the
// reference). Such a case is evaluated again in a separate evaluation, on fresh inputs (a new
// seed), and re-timed; judge_reverification decides from that evaluation alone:
//
//   refuted    not correct on the fresh inputs; a timed case still below its floor; beyond the
//              roofline (a result without floors); no case timed; or the re-timed speed fell
//              below k_reverify_speed_kept of the recorded one (the win did not hold: a speed
//              that came from inputs the kernel had seen, or from the timing)
//   confirmed  otherwise: correct, above every floor, and the recorded speed held
//
// The loop re-verifies the quarantined wins of each op at its end (loop.h); `kope memory
// verify --recheck` re-verifies one case by hand. Both record the outcome with
// Store::verify_case and the reason as its note. Pure except reverify(), which evaluates.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kope/verdict.h"
#include "kope/eval.h"
#include "kope/memory.h"
#include "kope/spec.h"

namespace kope::agent {

// The share of its recorded speed a re-timed win must keep to be confirmed (the geometric mean
// over the timed cases of recorded time / re-timed time). Generous for timing noise on a shared
// machine; a cache or timing artefact loses far more.
inline constexpr double k_reverify_speed_kept = 0.67;

struct Reverification {
  bool confirmed = false;
  std::string reason;  // why it was confirmed or refuted, for the event log and the memory's note
  uint64_t seed = 0;   // the fresh inputs' seed
  eval::Verdict verdict = eval::Verdict::correct;  // on the fresh inputs
  std::optional<double> speedup_vs_reference;   // re-timed
  std::optional<double> speed_kept;             // re-timed speed / recorded speed
};

// The decision over `fresh`, the separate evaluation on fresh inputs, against the case's
// recorded timings (see the header comment).
Reverification judge_reverification(const eval::EvalResult& fresh, const std::vector<memory::CaseTimingRecord>& recorded);

// Evaluates `code` for `op` afresh with `options` (seed: the fresh inputs'; timing on; never
// against an incumbent) and judges it. Fails only when the evaluator fails.
Result<Reverification> reverify(eval::Evaluator& evaluator, const spec::OpSpec& op, std::string_view code,
                                const std::vector<memory::CaseTimingRecord>& recorded, eval::EvalOptions options);

}  // namespace kope::agent
