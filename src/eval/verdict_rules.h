// eval/verdict_rules.h — the rules that judge a timed case by its figures alone: a kernel that
// verified on every case is still rejected when its timing shows the work is not being done.
// Pure functions of the figures (the evaluator applies them, evaluator.cpp), so each rule is
// tested without a sandbox (verdict_rules_test.cpp).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kope/verdict.h"

namespace kope::eval {

// A rule's failure verdict and its message ("case <label>: ...").
struct RuleVerdict {
  Verdict verdict = Verdict::rejected;
  std::string message;
};

// The CPU fallback: a device kernel whose device time (`device_s`, the median per call) is under
// 0.1% of a call's wall time (`wall_s`, the median) when that exceeds 1 ms leaves the work to
// the host. The bound is loose on purpose: the wall time includes downloading the outputs, which
// for a memory-bound kernel on a fast GPU is 100x its device time. `wall_s` 0: no wall time (a
// host kernel), never a failure. Returns the failure, or nothing.
std::optional<RuleVerdict> rule_cpu_fallback(std::string_view label, double device_s, double wall_s);

// The floor: a median per call (`median_us`) below `floor_margin` x the case's hardware floor
// (`floor_us`, 0 when unknown: never a failure) is not physically possible, so the work is not
// being done. `flops` and `bytes` are the case's counts, for the message. Returns the failure,
// or nothing.
std::optional<RuleVerdict> rule_below_floor(std::string_view label, double median_us, double floor_us, double floor_margin,
                                            double flops, double bytes);

// The case's floor after the trusted baselines: a baseline faster than the hardware profile's
// floor means the profile underestimates this machine (e.g. it was measured under load), so the
// floor drops to that baseline's time, with a note saying so. `baselines_us`: the reference's
// and the library's median (0: none), in that order.
struct LoweredFloor {
  double floor_us = 0;
  std::vector<std::string> notes;
};
LoweredFloor lower_floor_to_baselines(std::string_view label, double floor_us, const std::vector<double>& baselines_us);

}  // namespace kope::eval
