#include "agent/reverify.h"

#include <cmath>

#include <fmt/format.h>

#include "util/strings.h"

namespace kope::agent {

namespace {

// Geometric mean over the cases both have of recorded / re-timed median: how much of its
// recorded speed the kernel kept; nullopt when they share no timed case.
std::optional<double> speed_kept(const std::vector<memory::CaseTimingRecord>& recorded,
                                 const std::vector<eval::CaseTiming>& fresh) {
  double log_sum = 0;
  int n = 0;
  for (const auto& f : fresh) {
    for (const auto& r : recorded) {
      if (r.case_index != f.case_index || !(r.median_us > 0) || !(f.median_us > 0)) continue;
      log_sum += std::log(r.median_us / f.median_us);
      ++n;
    }
  }
  if (n == 0) return std::nullopt;
  return std::exp(log_sum / n);
}

// Why the fresh timings are still implausible ("" when they are not): a case below its floor,
// or, without floors, beyond the roofline (the memory's own quarantine rules).
std::string still_implausible(const eval::EvalResult& fresh) {
  bool has_floors = false;
  for (const auto& t : fresh.timing) {
    if (!(t.floor_us > 0)) continue;
    has_floors = true;
    if (t.median_us > 0 && t.median_us < t.floor_us) {
      return fmt::format("case {} still ran in {:.3g} µs, below its floor of {:.3g} µs",
                         t.label.empty() ? std::to_string(t.case_index) : t.label, t.median_us, t.floor_us);
    }
  }
  if (!has_floors && fresh.fraction_of_roofline && *fresh.fraction_of_roofline > memory::k_quarantine_roofline_fraction) {
    return fmt::format("it is still beyond the roofline (fraction {:.3g})", *fresh.fraction_of_roofline);
  }
  return {};
}

}  // namespace

Reverification judge_reverification(const eval::EvalResult& fresh, const std::vector<memory::CaseTimingRecord>& recorded) {
  Reverification v;
  v.seed = fresh.seed;
  v.verdict = fresh.verdict;
  v.speedup_vs_reference = fresh.speedup_vs_reference;
  const std::string where = fmt::format("re-verified on fresh inputs (seed {}) in a separate evaluation", fresh.seed);
  if (fresh.verdict != eval::Verdict::correct) {
    v.reason = fmt::format("refuted: {}, it is {}{}{}", where, eval::verdict_name(v.verdict), fresh.message.empty() ? "" : ": ",
                           util::truncate_text(fresh.message, 300, 2));
    return v;
  }
  if (std::string why = still_implausible(fresh); !why.empty()) {
    v.reason = fmt::format("refuted: {}, {}", where, why);
    return v;
  }
  v.speed_kept = speed_kept(recorded, fresh.timing);
  if (!v.speed_kept) {
    v.reason = fmt::format("refuted: {}, no timed case matches its recorded timings", where);
    return v;
  }
  if (*v.speed_kept < k_reverify_speed_kept) {
    v.reason = fmt::format("refuted: {}, it ran {:.3g}x slower than recorded (kept {:.0f}% of its speed, less than {:.0f}%): "
                           "the win did not hold",
                           where, 1 / *v.speed_kept, 100 * *v.speed_kept, 100 * k_reverify_speed_kept);
    return v;
  }
  v.confirmed = true;
  v.reason = fmt::format("confirmed: {}, correct on every case and re-timed at {:.0f}% of its recorded speed{}, above "
                         "every floor",
                         where, 100 * *v.speed_kept,
                         fresh.speedup_vs_reference ? fmt::format(" ({:.3g}x vs the reference)", *fresh.speedup_vs_reference)
                                                    : std::string());
  return v;
}

Result<Reverification> reverify(eval::Evaluator& evaluator, const spec::OpSpec& op, std::string_view code,
                                const std::vector<memory::CaseTimingRecord>& recorded, eval::EvalOptions options) {
  options.time = true;
  options.incumbent_source.reset();  // a separate evaluation, judged on its own
  KOPE_ASSIGN(eval::EvalResult fresh, evaluator.evaluate(op, code, options));
  return judge_reverification(fresh, recorded);
}

}  // namespace kope::agent
