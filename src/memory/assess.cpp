// memory/assess.cpp — the rules the store applies to a new case (kope/memory.h, docs/design.md
// §4): r, the outcome, the error signature and quarantine. One function, so every store kind
// (and every caller asking before it records) applies the same rules.
#include <cmath>

#include <fmt/format.h>

#include "kope/memory.h"

namespace kope::memory {

namespace {

bool positive(std::optional<double> v) { return v && std::isfinite(*v) && *v > 0; }

// Why a correct case is implausibly fast ("" when it is plausible): below a case's hardware
// floor, beyond the roofline (records without floors only), too far over a correct, timed
// parent or over the reference, or quarantined by the caller.
std::string quarantine_reason(const CaseRecord& c, double r, bool parent_correct_timed) {
  const CaseTimingRecord* below_floor = nullptr;
  bool has_floors = false;
  for (const auto& t : c.timings) {
    if (!t.floor_us || !(*t.floor_us > 0)) continue;
    has_floors = true;
    if (t.median_us > 0 && t.median_us < *t.floor_us && !below_floor) below_floor = &t;
  }
  if (below_floor) {
    return fmt::format(
        "faster than the hardware allows: case {} ran in {:.3g} µs, below its floor of {:.3g} µs (the fastest measured "
        "cache bandwidth and the FP32 peak; no roofline allows that)",
        below_floor->case_index, below_floor->median_us, *below_floor->floor_us);
  }
  if (!has_floors && c.fraction_of_roofline && *c.fraction_of_roofline > k_quarantine_roofline_fraction) {
    // A record without floors (an older kope, an import): only its roofline fraction is known.
    return fmt::format("faster than the roofline allows (fraction {:.3g} > {:.3g})", *c.fraction_of_roofline,
                       k_quarantine_roofline_fraction);
  }
  if (parent_correct_timed && r > k_quarantine_jump) {
    return fmt::format("{:.3g}x over its parent (more than {:.3g}x)", r, k_quarantine_jump);
  }
  if (!parent_correct_timed && positive(c.speedup_vs_reference) && *c.speedup_vs_reference > k_quarantine_root_speedup) {
    return fmt::format("{:.3g}x over the reference (more than {:.3g}x)", *c.speedup_vs_reference,
                       k_quarantine_root_speedup);
  }
  if (c.quarantined) return "quarantined by the caller";
  return {};
}

}  // namespace

CaseAssessment assess_case(const CaseRecord& c, const ParentFacts* parent) {
  CaseAssessment a;
  a.error_signature = c.error_signature.empty() ? error_signature(c.verdict, c.message, c.diagnostics) : c.error_signature;
  if (c.verdict != eval::Verdict::correct) return a;  // r = 0: negative
  const bool parent_correct_timed =
      parent && parent->verdict == eval::Verdict::correct && positive(parent->speedup_vs_reference);
  const double parent_speed = parent_correct_timed ? *parent->speedup_vs_reference : 1.0;  // else the reference
  if (positive(c.speedup_vs_reference)) {
    a.ratio = *c.speedup_vs_reference / parent_speed;
  } else if (positive(c.speedup_vs_parent)) {
    a.ratio = *c.speedup_vs_parent;
  } else {
    a.ratio = 1.0;  // correct but untimed: as good as its baseline
  }
  a.outcome = outcome_for_ratio(a.ratio);
  a.quarantine_reason = quarantine_reason(c, a.ratio, parent_correct_timed);
  return a;
}

}  // namespace kope::memory
