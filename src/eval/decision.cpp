#include "eval/decision.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include <fmt/format.h>

#include "eval/stats.h"

namespace kope::eval {

namespace {

struct Schedule {
  std::vector<size_t> looks;
  double first_alpha = 0;  // the first look's level
  double alpha = 0;        // every later look's level (the look when the time is up included)
};

// The smallest n for which the order-statistic interval of the median exists at level `alpha`.
size_t first_look(double alpha) {
  size_t n = 6;
  while (median_ci_rank(n, alpha) == 0 && n < 4096) ++n;
  return n;
}

Schedule schedule(const DecisionRule& rule) {
  const double k = std::max(1, rule.cases);
  const double share = std::clamp(rule.first_look_share, 0.0, 1.0);
  // The first look spends `share` of a case's α/K, the later ones the rest in equal parts. n_0
  // depends only on the first look's level; L on n_0 and max_pairs.
  // A share of 0 or 1 means the equal split of α/K over the L looks.
  const bool equal = share <= 0 || share >= 1;
  Schedule s;
  size_t looks = 2;
  for (int iter = 0; iter < 32; ++iter) {
    s.alpha = equal ? rule.alpha / (k * static_cast<double>(looks)) : rule.alpha / k * (1 - share) / static_cast<double>(looks - 1);
    s.first_alpha = equal ? s.alpha : rule.alpha / k * share;
    s.looks.clear();
    size_t n0 = first_look(s.first_alpha);
    size_t last = std::max(rule.max_pairs, n0);
    for (size_t n = n0; n < last; n = std::max(n + 1, static_cast<size_t>(std::ceil(static_cast<double>(n) * 1.5)))) {
      s.looks.push_back(n);
    }
    s.looks.push_back(last);
    size_t needed = s.looks.size() + 1;  // + the look when the time is up
    if (needed <= looks) break;
    looks = needed;
  }
  return s;
}

}  // namespace

std::string_view incumbent_decision_name(IncumbentDecision d) {
  switch (d) {
    case IncumbentDecision::faster: return "faster_than_incumbent";
    case IncumbentDecision::slower: return "slower_than_incumbent";
    case IncumbentDecision::not_faster: return "not_faster_than_incumbent";
    case IncumbentDecision::undecided: return "undecided";
    case IncumbentDecision::unavailable: return "unavailable";
  }
  return "undecided";
}

std::optional<IncumbentDecision> parse_incumbent_decision(std::string_view s) {
  for (auto d : {IncumbentDecision::faster, IncumbentDecision::slower, IncumbentDecision::not_faster, IncumbentDecision::undecided,
                 IncumbentDecision::unavailable}) {
    if (incumbent_decision_name(d) == s) return d;
  }
  return std::nullopt;
}

IncumbentDecision classify_ratio_interval(double lower, double upper, double margin) {
  if (lower > 1 + margin) return IncumbentDecision::faster;
  if (upper < 1) return IncumbentDecision::slower;
  if (upper <= 1 + margin) return IncumbentDecision::not_faster;
  return IncumbentDecision::undecided;
}

std::vector<size_t> decision_looks(const DecisionRule& rule) { return schedule(rule).looks; }

double per_look_alpha(const DecisionRule& rule) { return schedule(rule).alpha; }

double first_look_alpha(const DecisionRule& rule) { return schedule(rule).first_alpha; }

CaseRatio paired_ratio(const std::vector<PairSample>& pairs, double alpha, double clean_contention, size_t min_clean) {
  CaseRatio r;
  r.pairs_total = pairs.size();
  std::vector<double> all, clean, contention;
  // The outside load is each timing's estimate over all its batches so far: the latest pair's
  // is the one over the most batches. An early one rests on a batch or two read in whole clock
  // ticks of /proc/stat, and is noise (a 10 ms batch reads 0 or 10 ms of someone's time).
  double outside_share = pairs.empty() ? 0.0 : pairs.back().outside;
  for (const PairSample& p : pairs) {
    contention.push_back(p.contention);
    if (!(p.candidate > 0) || !(p.incumbent > 0)) continue;
    double d = std::log(p.incumbent / p.candidate);
    all.push_back(d);
    if (p.contention < clean_contention) clean.push_back(d);
  }
  // As for one timing (CaseTimer::sample): waits count against the figures only while other
  // work ran beside the pairs; without it they are the kernels' own, and every pair counts.
  bool outside = outside_load_seen(outside_share);
  bool clean_only = outside && clean.size() >= min_clean;
  r.contention = median(contention);
  r.disturbed = outside && waits_disturbed(contention, clean_only);
  const std::vector<double>& used = clean_only ? clean : all;
  r.pairs = used.size();
  if (used.empty()) return r;
  MedianCi ci = median_ci(used, alpha);
  r.ratio = std::exp(ci.median);
  if (median_ci_rank(used.size(), alpha) >= 1) {
    r.lower = std::exp(ci.lower);
    r.upper = std::exp(ci.upper);
  }
  return r;
}

namespace {

// The side of 1 + margin a case's interval lies wholly on, or mixed when it straddles it (or
// there is no interval yet).
CaseSides side_of(const CaseRatio& c, const DecisionRule& rule) {
  switch (classify_ratio_interval(c.lower, c.upper, rule.margin)) {
    case IncumbentDecision::faster: return CaseSides::faster;
    case IncumbentDecision::slower:
    case IncumbentDecision::not_faster: return CaseSides::not_faster;
    default: return CaseSides::mixed;
  }
}

}  // namespace

CaseSides add_case_side(CaseSides so_far, const CaseRatio& c, const DecisionRule& rule) {
  CaseSides side = side_of(c, rule);
  return so_far == CaseSides::none || so_far == side ? side : CaseSides::mixed;
}

bool case_settled(const CaseRatio& c, const DecisionRule& rule, CaseSides earlier) {
  if (!(c.lower > 0) || !std::isfinite(c.upper)) return false;
  CaseSides side = side_of(c, rule);
  bool one_side = side != CaseSides::mixed;
  if (rule.cases <= 1 || (one_side && (earlier == CaseSides::none || earlier == side))) return one_side;
  double half = 0.5 * (std::log(c.upper) - std::log(c.lower));
  return half <= rule.precision || (one_side && half <= rule.decided_precision);
}

CombinedRatio combine_cases(const std::vector<CaseRatio>& cases, const DecisionRule& rule) {
  CombinedRatio out;
  if (cases.empty()) return out;
  double lr = 0, ll = 0, lu = 0;
  bool lower_ok = true, upper_ok = true;
  for (const CaseRatio& c : cases) {
    lr += std::log(c.ratio);
    if (c.lower > 0) {
      ll += std::log(c.lower);
    } else {
      lower_ok = false;
    }
    if (std::isfinite(c.upper)) {
      lu += std::log(c.upper);
    } else {
      upper_ok = false;
    }
  }
  auto n = static_cast<double>(cases.size());
  out.ratio = std::exp(lr / n);
  out.lower = lower_ok ? std::exp(ll / n) : 0.0;
  out.upper = upper_ok ? std::exp(lu / n) : std::numeric_limits<double>::infinity();
  out.decision = classify_ratio_interval(out.lower, out.upper, rule.margin);
  return out;
}

CaseRatio run_case(const DecisionRule& rule, const std::function<PairStatus(PairSample&)>& next, CaseSides earlier, bool* failed) {
  Schedule s = schedule(rule);
  const size_t n0 = s.looks.front();
  const size_t last_look = s.looks.back();
  // A case whose time is up still gets its second look: at the first the interval is the range
  // of the pairs, which one interrupted batch can make useless.
  const size_t min_on_time = s.looks.size() > 1 ? s.looks[1] : n0;
  std::vector<PairSample> pairs;
  CaseRatio est;
  size_t li = 0;
  int looks = 0;
  bool time_up = false, budget_spent = false;
  if (failed) *failed = false;
  for (;;) {
    PairSample p;
    PairStatus st = next(p);
    if (st == PairStatus::failed) {
      if (failed) *failed = true;
      est = paired_ratio(pairs, looks == 0 ? s.first_alpha : s.alpha, rule.clean_contention, n0);
      est.looks = looks;
      return est;
    }
    pairs.push_back(p);
    time_up = time_up || st == PairStatus::time_up;
    budget_spent = budget_spent || st == PairStatus::budget_spent;
    size_t n = pairs.size();
    bool scheduled = li < s.looks.size() && n >= s.looks[li];
    bool out_of_time = time_up && n >= min_on_time;
    if (!scheduled && !out_of_time) continue;
    est = paired_ratio(pairs, li == 0 && scheduled ? s.first_alpha : s.alpha, rule.clean_contention, n0);
    if (scheduled) ++li;
    est.looks = ++looks;
    // The budget cuts short a case whose estimate is a tie or a loss, or whose interval already
    // clears the margin; one whose estimate clears it by rule.promising but not yet its interval
    // may make the candidate the new incumbent, and goes on until it settles or its time is up.
    bool may_win = est.ratio > (1 + rule.margin) * (1 + rule.promising) && !(est.lower > 1 + rule.margin);
    bool budget_stops = budget_spent && scheduled && !may_win;
    if (case_settled(est, rule, earlier) || out_of_time || budget_stops || n >= last_look) return est;
  }
}

namespace {

// ReplacementRule's one name table (Attempt::decided_by in the run format spells it so).
constexpr std::pair<ReplacementRule, std::string_view> k_replacement_rule_names[] = {
    {ReplacementRule::side_by_side, "side_by_side"},
    {ReplacementRule::own_waits, "own_waits"},
    {ReplacementRule::retime_when_quiet, "retime_when_quiet"},
    {ReplacementRule::raised_margin, "raised_margin"},
    {ReplacementRule::recorded_timings, "recorded_timings"},
};

}  // namespace

std::string_view replacement_rule_name(ReplacementRule r) {
  for (const auto& [rule, name] : k_replacement_rule_names) {
    if (rule == r) return name;
  }
  return "side_by_side";
}

std::optional<ReplacementRule> parse_replacement_rule(std::string_view name) {
  for (const auto& [rule, spelled] : k_replacement_rule_names) {
    if (spelled == name) return rule;
  }
  return std::nullopt;
}

std::string replacement_rule_names() {
  std::string out;
  for (const auto& [rule, name] : k_replacement_rule_names) out += (out.empty() ? "" : ", ") + std::string(name);
  return out;
}

ReplacementDecision decide_replacement(const ReplacementEvidence& e) {
  ReplacementDecision d;
  const double need = 1 + e.margin;
  auto interval = [&] {
    return e.lower > 0 && std::isfinite(e.upper) ? fmt::format("[{:.2f}x, {:.2f}x]", e.lower, e.upper) : std::string("(no interval yet)");
  };
  auto raised = [&](std::string_view evidence) {
    double c = std::clamp(e.contention, 0.0, 0.9);
    d.rule = ReplacementRule::raised_margin;
    d.margin_demanded = need / (1 - c);
    d.replaces = e.ratio > *d.margin_demanded;
    std::string other = e.outside_load > 0 ? fmt::format(", other work used {:.0f}% of the CPUs", 100 * e.outside_load) : "";
    d.reason = fmt::format("{} was still disturbed by other load after re-timing (waited for a CPU {:.0f}% of the time{}), so its "
                           "{:.2f}x had to exceed the raised margin {:.2f}x = {:.2f} / (1 - {:.2f}): {}",
                           evidence, 100 * c, other, e.ratio, *d.margin_demanded, need, c, d.replaces ? "it did" : "it did not");
  };
  if (!e.compared) {
    bool faster = e.ratio > need;
    if (faster && e.disturbed && !e.retimed) {
      d.rule = ReplacementRule::retime_when_quiet;
      d.retime = true;
      d.reason = fmt::format("the recorded timings give {:.2f}x, above {:.2f}x, but were disturbed by other load: re-timed once when "
                             "the machine is quiet before deciding", e.ratio, need);
      return d;
    }
    if (faster && e.disturbed) {
      raised("the comparison with the incumbent's recorded timings");
      return d;
    }
    d.rule = ReplacementRule::recorded_timings;
    d.replaces = faster;
    d.reason = fmt::format("no side-by-side comparison: the ratio of the recorded timings, {:.2f}x, {} 1 + margin = {:.2f}x",
                           e.ratio, faster ? "exceeds" : "does not exceed", need);
    return d;
  }
  if (e.decision != IncumbentDecision::faster || !e.disturbed) {
    d.rule = ReplacementRule::side_by_side;
    d.replaces = e.decision == IncumbentDecision::faster;
    std::string what = "undecided: the interval straddles 1 + margin and an undecided kernel keeps the incumbent";
    if (e.decision == IncumbentDecision::faster) what = "faster: the interval lies wholly above 1 + margin";
    if (e.decision == IncumbentDecision::slower) what = "slower: the interval lies wholly below 1";
    if (e.decision == IncumbentDecision::not_faster) what = "not faster by more than the margin: the interval lies wholly below 1 + margin";
    d.reason = fmt::format("timed side by side with the incumbent: {:.2f}x, 95% interval {}, margin {:.2f}x: {}", e.ratio, interval(), need,
                           what);
    return d;
  }
  if (!outside_load_seen(e.outside_load)) {
    // Waits without other work beside them are the kernels' own (more threads than CPUs, idle
    // CPUs waking up): they are part of each kernel's time in every pair, not a bias of the ratio.
    d.rule = ReplacementRule::own_waits;
    d.replaces = true;
    d.reason = fmt::format("timed side by side with the incumbent: {:.2f}x, 95% interval {} wholly above 1 + margin = {:.2f}x; the kernels "
                           "waited for a CPU {:.0f}% of the time while other work used {:.0f}% of the CPUs: those waits are their own "
                           "and count in both times alike, so no raised margin applies",
                           e.ratio, interval(), need, 100 * e.contention, 100 * e.outside_load);
    return d;
  }
  if (!e.retimed) {
    d.rule = ReplacementRule::retime_when_quiet;
    d.retime = true;
    d.reason = fmt::format("timed side by side with the incumbent: {:.2f}x, 95% interval {}, but other work used {:.0f}% of the CPUs "
                           "beside it: re-timed once when the machine is quiet before deciding",
                           e.ratio, interval(), 100 * e.outside_load);
    return d;
  }
  raised("the side-by-side comparison");
  return d;
}

}  // namespace kope::eval
