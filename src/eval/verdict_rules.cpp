#include "eval/verdict_rules.h"

#include <fmt/format.h>

#include "util/strings.h"

namespace kope::eval {

std::optional<RuleVerdict> rule_cpu_fallback(std::string_view label, double device_s, double wall_s) {
  if (!(wall_s > 1e-3 && device_s < 0.001 * wall_s)) return std::nullopt;
  return RuleVerdict{Verdict::rejected,
                     fmt::format("case {}: the device ran kernels for {:.3g} µs of a {:.3g} µs call: the work is not being done "
                                 "on the device (CPU fallback)", label, device_s * 1e6, wall_s * 1e6)};
}

std::optional<RuleVerdict> rule_below_floor(std::string_view label, double median_us, double floor_us, double floor_margin,
                                            double flops, double bytes) {
  if (!(floor_us > 0 && median_us < floor_margin * floor_us)) return std::nullopt;
  return RuleVerdict{Verdict::rejected,
                     fmt::format("case {}: {:.3g} µs per call is below the hardware floor of {:.3g} µs for {:.3g} flop and "
                                 "{} (x{} margin): not physically possible here, so the work is not being done",
                                 label, median_us, floor_us, flops, util::human_bytes(bytes), floor_margin)};
}

LoweredFloor lower_floor_to_baselines(std::string_view label, double floor_us, const std::vector<double>& baselines_us) {
  LoweredFloor r{floor_us, {}};
  for (double trusted : baselines_us) {
    if (trusted > 0 && trusted < r.floor_us) {
      r.notes.push_back(fmt::format("case {}: a baseline ran in {:.3g} µs, below the hardware profile's floor of {:.3g} µs; the profile looks "
                                    "pessimistic (re-measure with `kope hw --refresh` on an idle machine)",
                                    label, trusted, r.floor_us));
      r.floor_us = trusted;
    }
  }
  return r;
}

}  // namespace kope::eval
