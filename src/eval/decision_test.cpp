// The sequential decision rule of fast verdicts, on synthetic paired samples: clear cases decide
// early and correctly, ties keep the incumbent, and the error rate under the null stays within
// the stated alpha (measured by simulation at the null's boundary, where it is largest).
#include "eval/decision.h"

#include <cmath>
#include <cstdio>
#include <random>

#include <gtest/gtest.h>

#include "eval/stats.h"

namespace kope::eval {
namespace {

// Batch times of a kernel: a lognormal spread of `noise` around `base`, sometimes a slow outlier
// (a batch that was interrupted), and a drift shared by both kernels of a pair (machine load).
struct Synthetic {
  double candidate_us = 100;
  double incumbent_us = 100;
  double noise = 0.03;
  double outlier_rate = 0.05;
  std::mt19937_64 rng{1};

  PairSample next() {
    std::normal_distribution<double> n(0, noise);
    std::uniform_real_distribution<double> u(0, 1);
    double drift = std::exp(std::normal_distribution<double>(0, 0.05)(rng));
    auto batch = [&](double base) {
      double t = base * drift * std::exp(n(rng));
      if (u(rng) < outlier_rate) t *= 1.5 + u(rng);
      return t;
    };
    PairSample p;
    p.candidate = batch(candidate_us);
    p.incumbent = batch(incumbent_us);
    return p;
  }
};

struct Outcome {
  CombinedRatio combined;
  std::vector<CaseRatio> cases;
  size_t pairs = 0;
};

// The rule over `cases` timed cases with the same speeds; at most `max_pairs` pairs per case.
Outcome decide(Synthetic& s, const DecisionRule& rule, size_t time_up_after = 1000000) {
  Outcome o;
  CaseSides sides = CaseSides::none;
  for (int c = 0; c < rule.cases; ++c) {
    size_t n = 0;
    CaseRatio r = run_case(rule, [&](PairSample& p) {
      p = s.next();
      return ++n >= time_up_after ? PairStatus::time_up : PairStatus::ok;
    }, sides);
    sides = add_case_side(sides, r, rule);
    o.pairs += r.pairs_total;
    o.cases.push_back(r);
  }
  o.combined = combine_cases(o.cases, rule);
  return o;
}

TEST(Decision, ScheduleIsBonferroniCorrected) {
  DecisionRule rule;
  rule.cases = 3;
  auto looks = decision_looks(rule);
  ASSERT_GE(looks.size(), 2u);
  EXPECT_EQ(looks.back(), rule.max_pairs);
  for (size_t i = 1; i < looks.size(); ++i) EXPECT_GT(looks[i], looks[i - 1]);
  // The first look spends first_look_share of α/K, the L - 1 later looks (the look when the
  // time is up included) the rest: all the looks of all K cases add up to at most α (the fixed
  // point may count a look more: conservative).
  double first = first_look_alpha(rule), later = per_look_alpha(rule);
  EXPECT_DOUBLE_EQ(first, rule.alpha / 3 * rule.first_look_share);
  double total = 3 * (first + later * static_cast<double>(looks.size()));
  EXPECT_LE(total, rule.alpha * (1 + 1e-12));
  EXPECT_GE(total, rule.alpha * 0.9);
  // The first look is the smallest n with an interval at its level: 8 pairs for three cases,
  // where an equal split of α/K over the looks needs 11.
  EXPECT_GE(median_ci_rank(looks.front(), first), 1u);
  EXPECT_EQ(median_ci_rank(looks.front() - 1, first), 0u);
  EXPECT_EQ(looks.front(), 8u);
  DecisionRule equal = rule;
  equal.first_look_share = 0;
  EXPECT_EQ(decision_looks(equal).front(), 11u);
  EXPECT_DOUBLE_EQ(first_look_alpha(equal), per_look_alpha(equal));
  EXPECT_LE(per_look_alpha(equal), rule.alpha / (3.0 * static_cast<double>(decision_looks(equal).size() + 1)));
  // More cases, smaller levels, later first look.
  DecisionRule one;
  EXPECT_GT(first_look_alpha(one), first);
  EXPECT_GT(per_look_alpha(one), later);
  EXPECT_LE(decision_looks(one).front(), looks.front());
}

TEST(Decision, ClearlyFasterDecidesAtTheFirstLook) {
  Synthetic s;
  s.candidate_us = 50;  // twice as fast, no interrupted batches
  s.outlier_rate = 0;
  DecisionRule rule;
  Outcome o = decide(s, rule);
  EXPECT_EQ(o.combined.decision, IncumbentDecision::faster);
  EXPECT_NEAR(o.combined.ratio, 2.0, 0.1);
  EXPECT_GT(o.combined.lower, 1 + rule.margin);
  EXPECT_EQ(o.pairs, decision_looks(rule).front());
}

TEST(Decision, ClearlySlowerDecidesEarly) {
  Synthetic s;
  s.candidate_us = 130;
  DecisionRule rule;
  rule.cases = 3;
  Outcome o = decide(s, rule);
  EXPECT_EQ(o.combined.decision, IncumbentDecision::slower);
  EXPECT_NEAR(o.combined.ratio, 100.0 / 130, 0.03);
  ASSERT_TRUE(std::isfinite(o.combined.upper));
  EXPECT_LT(o.combined.upper, 1.0);
  // Far fewer pairs than full timing's cap of max_pairs per case.
  EXPECT_LT(o.pairs, 3 * rule.max_pairs / 2);
}

// With several timed cases, a case whose interval lies on the side every earlier case lay on
// stops at once, however wide: it can only move the op's interval further to that side. A case
// that disagrees with the earlier ones is timed to the rule's precision, so that the geometric
// mean over cases that disagree can still be decided.
TEST(Decision, ACaseOnTheEarlierCasesSideStopsAtOnce) {
  DecisionRule rule;
  rule.cases = 3;
  const size_t n0 = decision_looks(rule).front();
  // Paired ratios spread over ±25% around 1.6: clearly faster, the interval wide for long.
  const double spread[4] = {1.2, 1.5, 1.7, 2.0};
  auto run = [&](CaseSides earlier, double scale) {
    size_t n = 0;
    return run_case(rule, [&](PairSample& p) {
      p.candidate = 100e-6;
      p.incumbent = 100e-6 * scale * spread[n++ % 4];
      return PairStatus::ok;
    }, earlier);
  };
  CaseRatio first = run(CaseSides::none, 1);
  EXPECT_EQ(first.pairs_total, n0);
  EXPECT_GT(first.lower, 1 + rule.margin);
  EXPECT_EQ(add_case_side(CaseSides::none, first, rule), CaseSides::faster);
  EXPECT_EQ(run(CaseSides::faster, 1).pairs_total, n0);
  // After cases on the other side, or mixed ones, the same case goes on towards the precision.
  EXPECT_GT(run(CaseSides::not_faster, 1).pairs_total, n0);
  EXPECT_GT(run(CaseSides::mixed, 1).pairs_total, n0);
  // A slower case after a faster one: the sides are mixed from then on.
  CaseRatio slow = run(CaseSides::faster, 0.4);
  EXPECT_GT(slow.pairs_total, n0);
  EXPECT_LT(slow.upper, 1.0);
  EXPECT_EQ(add_case_side(CaseSides::faster, slow, rule), CaseSides::mixed);
  EXPECT_EQ(add_case_side(CaseSides::not_faster, slow, rule), CaseSides::not_faster);
}

TEST(Decision, TiesKeepTheIncumbent) {
  DecisionRule rule;
  int faster = 0, slower = 0;
  for (uint64_t seed = 1; seed <= 200; ++seed) {
    Synthetic s;
    s.rng.seed(seed);
    Outcome o = decide(s, rule, 60);  // the time runs out after 60 pairs
    faster += o.combined.decision == IncumbentDecision::faster;
    slower += o.combined.decision == IncumbentDecision::slower;
  }
  EXPECT_EQ(faster, 0);
  // "Slower" is a wrong (if harmless: the incumbent stays either way) answer for a tie too.
  EXPECT_LE(slower, 200 * rule.alpha / 2);
  // Equal speed within the margin, measured long enough: "not faster", not a replacement.
  Synthetic s;
  s.noise = 0.005;
  s.outlier_rate = 0;
  s.incumbent_us = 100.3;
  Outcome o = decide(s, rule);
  EXPECT_EQ(o.combined.decision, IncumbentDecision::not_faster);
}

// The comparison budget: a case whose share is spent stops at its next scheduled look, the first
// one at the earliest (not the second, as when max_seconds is up); a tie is then undecided (the
// incumbent stays), a clear win still decides.
TEST(Decision, ASpentBudgetStopsAtTheNextLook) {
  DecisionRule rule;
  rule.cases = 3;
  const std::vector<size_t> looks = decision_looks(rule);
  ASSERT_GE(looks.size(), 2u);
  auto run = [&](Synthetic& s, size_t spent_after) {
    size_t n = 0;
    return run_case(rule, [&](PairSample& p) {
      p = s.next();
      return ++n >= spent_after ? PairStatus::budget_spent : PairStatus::ok;
    });
  };
  Synthetic tie;
  CaseRatio r = run(tie, 1);
  EXPECT_EQ(r.pairs_total, looks[0]);
  EXPECT_EQ(r.looks, 1);
  EXPECT_EQ(classify_ratio_interval(r.lower, r.upper, rule.margin), IncumbentDecision::undecided);
  Synthetic slower;  // its estimate stays below the margin
  slower.candidate_us = 110;
  slower.rng.seed(7);
  EXPECT_EQ(run(slower, looks[0] + 1).pairs_total, looks[1]);  // spent between looks: the next one
  Synthetic win;
  win.incumbent_us = 150;
  win.outlier_rate = 0;
  CaseRatio w = run(win, 1);
  EXPECT_EQ(w.pairs_total, looks[0]);
  EXPECT_GT(w.lower, 1 + rule.margin);
}

// ... but a case whose estimate clears the margin without settling goes on past the budget: the
// candidate may become the incumbent. It stops when it settles or its time is up.
TEST(Decision, ASpentBudgetDoesNotCutShortACandidateThatMayWin) {
  DecisionRule rule;
  rule.cases = 3;
  const std::vector<size_t> looks = decision_looks(rule);
  // Paired ratios 0.8, 1.06, 1.4 in turn: the median is 6% faster, and its interval includes
  // 0.8 for a long time.
  const double cycle[3] = {0.8, 1.06, 1.4};
  size_t n = 0;
  const size_t time_up_after = looks[0] + 40;
  CaseRatio r = run_case(rule, [&](PairSample& p) {
    p.candidate = 100e-6;
    p.incumbent = 100e-6 * cycle[n % 3];
    ++n;
    return n >= time_up_after ? PairStatus::time_up : PairStatus::budget_spent;
  });
  EXPECT_EQ(r.pairs_total, time_up_after);
  EXPECT_NEAR(r.ratio, 1.06, 1e-9);
  EXPECT_LT(r.lower, 1 + rule.margin);
  // A median 3% faster, within DecisionRule::promising of the margin: a near tie, cut short.
  const double near_tie[3] = {0.8, 1.03, 1.4};
  n = 0;
  CaseRatio t = run_case(rule, [&](PairSample& p) {
    p.candidate = 100e-6;
    p.incumbent = 100e-6 * near_tie[n % 3];
    ++n;
    return n >= time_up_after ? PairStatus::time_up : PairStatus::budget_spent;
  });
  EXPECT_EQ(t.pairs_total, looks[0]);
}

TEST(Decision, ImprovementWithinTheMarginIsNotAReplacement) {
  // 0.5% faster, margin 1%: the rule may say undecided or not faster, never faster.
  DecisionRule rule;
  for (uint64_t seed = 1; seed <= 50; ++seed) {
    Synthetic s;
    s.rng.seed(seed);
    s.incumbent_us = 100.5;
    Outcome o = decide(s, rule, 80);
    EXPECT_NE(o.combined.decision, IncumbentDecision::faster) << seed;
  }
}

// The error rate under the null, by simulation: at the null's boundary (the candidate exactly
// 1 + margin faster), declaring "faster" is wrong, and the rule must do it at most alpha/2 of
// the time even though it looks many times. Uncorrected repeated looks would exceed that.
TEST(Decision, ErrorRateUnderTheNullByLooksAndCases) {
  for (int cases : {1, 3}) {
    DecisionRule rule;
    rule.cases = cases;
    rule.max_pairs = 100;
    int wrong = 0;
    const int runs = 500;
    for (int i = 0; i < runs; ++i) {
      Synthetic s;
      s.rng.seed(static_cast<uint64_t>(i) * 7919 + static_cast<uint64_t>(cases));
      s.incumbent_us = 100 * (1 + rule.margin);
      s.noise = 0.02;
      Outcome o = decide(s, rule);
      wrong += o.combined.decision == IncumbentDecision::faster;
    }
    double rate = static_cast<double>(wrong) / runs;
    std::printf("false 'faster' at the null's boundary, %d timed case(s): %d of %d\n", cases, wrong, runs);
    EXPECT_LE(rate, rule.alpha / 2) << cases << " cases: " << wrong << " of " << runs;
  }
  // Control: the same looks without the correction (alpha at every look) err more often than
  // alpha/2 at the boundary — the correction is what keeps the rate.
  DecisionRule naive;
  naive.max_pairs = 100;
  double a = naive.alpha;
  int wrong = 0;
  const int runs = 500;
  for (int i = 0; i < runs; ++i) {
    Synthetic s;
    s.rng.seed(static_cast<uint64_t>(i) * 104729 + 3);
    s.incumbent_us = 100 * (1 + naive.margin);
    s.noise = 0.02;
    std::vector<PairSample> pairs;
    for (size_t n = 1; n <= naive.max_pairs; ++n) {
      pairs.push_back(s.next());
      if (n < 6 || n % 6 != 0) continue;
      CaseRatio r = paired_ratio(pairs, a, naive.clean_contention, 6);
      if (r.lower > 1 + naive.margin) {
        ++wrong;
        break;
      }
    }
  }
  std::printf("false 'faster' at the null's boundary without the correction: %d of %d\n", wrong, runs);
  EXPECT_GT(static_cast<double>(wrong) / runs, naive.alpha / 2) << wrong;
}

TEST(Decision, CleanPairsAreUsedWhenThereAreEnough) {
  DecisionRule rule;
  size_t n0 = decision_looks(rule).front();
  std::vector<PairSample> pairs;
  // Clean pairs: the candidate twice as fast; disturbed ones: the other way round.
  for (size_t i = 0; i < n0; ++i) pairs.push_back({50, 100, 0.0});
  // ... while other work took half the CPUs.
  for (size_t i = 0; i < n0 / 2; ++i) pairs.push_back({100, 50, 0.5, 0.5});
  CaseRatio r = paired_ratio(pairs, per_look_alpha(rule), rule.clean_contention, n0);
  EXPECT_EQ(r.pairs, n0);
  EXPECT_EQ(r.pairs_total, n0 + n0 / 2);
  EXPECT_NEAR(r.ratio, 2.0, 1e-9);
  // Too few clean pairs: all of them.
  pairs.resize(n0 - 1);
  for (size_t i = 0; i < n0; ++i) pairs.push_back({100, 50, 0.5, 0.5});
  r = paired_ratio(pairs, per_look_alpha(rule), rule.clean_contention, n0);
  EXPECT_EQ(r.pairs, pairs.size());
  EXPECT_NEAR(r.contention, 0.5, 1e-9);
  EXPECT_TRUE(contention_disturbed(r.contention));
  EXPECT_FALSE(contention_disturbed(0.0));
  EXPECT_TRUE(r.disturbed);
}

// The outside load of a pair is each timing's estimate over all its batches so far, read from
// /proc/stat in whole clock ticks: after a batch or two it is noise. The case goes by the latest
// estimate, so an early spike neither drops pairs nor marks the ratio disturbed.
TEST(Decision, AnEarlyOutsideLoadEstimateIsNotLoad) {
  DecisionRule rule;
  size_t n0 = decision_looks(rule).front();
  std::vector<PairSample> pairs;
  pairs.push_back({50, 100, 0.1, 0.4});  // one batch pair: a tick of someone's time read as 40%
  for (size_t i = 0; i < 2 * n0 + 2; ++i) pairs.push_back({50, 100, i % 2 ? 0.1 : 0.0, 0.02});
  CaseRatio r = paired_ratio(pairs, per_look_alpha(rule), rule.clean_contention, n0);
  EXPECT_EQ(r.pairs, pairs.size());
  EXPECT_FALSE(r.disturbed);
  // The same waits while the latest estimate shows other work: clean pairs only, disturbed.
  pairs.back().outside = 0.3;
  r = paired_ratio(pairs, per_look_alpha(rule), rule.clean_contention, n0);
  EXPECT_LT(r.pairs, pairs.size());
  EXPECT_TRUE(r.disturbed);
}

// Waits on an otherwise idle machine (no other work on the CPUs) are the kernels' own: more
// threads than CPUs, idle CPUs waking up. They neither drop pairs nor mark the ratio disturbed;
// the same waits beside outside load do both.
TEST(Decision, OwnWaitsAreNotOutsideLoad) {
  DecisionRule rule;
  size_t n0 = decision_looks(rule).front();
  std::vector<PairSample> pairs;
  for (size_t i = 0; i < n0; ++i) pairs.push_back({50, 100, 0.0, 0.01});
  for (size_t i = 0; i < n0 + 2; ++i) pairs.push_back({100, 50, 0.4, 0.02});  // most pairs waited
  CaseRatio quiet = paired_ratio(pairs, per_look_alpha(rule), rule.clean_contention, n0);
  EXPECT_EQ(quiet.pairs, pairs.size());
  EXPECT_FALSE(quiet.disturbed);
  pairs.back().outside = 0.3;
  CaseRatio loaded = paired_ratio(pairs, per_look_alpha(rule), rule.clean_contention, n0);
  EXPECT_EQ(loaded.pairs, n0);
  EXPECT_TRUE(loaded.disturbed);
  EXPECT_TRUE(outside_load_seen(k_outside_load));
  EXPECT_FALSE(outside_load_seen(0.05));
}

// Waiting disturbs figures when they had to use waiting batches, or when most batches waited
// 10% or more; a few percent of waiting in batches the figures leave out, or in most batches of
// a quiet machine's two-thread kernel (the OS's own housekeeping), does not.
TEST(Decision, WaitsDisturbOnlyFiguresTheyCouldMove) {
  EXPECT_FALSE(waits_disturbed({}, false));
  EXPECT_FALSE(waits_disturbed({0.0, 0.01, 0.015, 0.0}, false));
  EXPECT_TRUE(waits_disturbed({0.0, 0.03, 0.04, 0.0}, false));  // half of those used waited
  EXPECT_FALSE(waits_disturbed({0.0, 0.03, 0.04, 0.0}, true));  // the figures used the clean ones
  EXPECT_FALSE(waits_disturbed({0.0, 0.05, 0.3, 0.0, 0.01}, true));
  EXPECT_TRUE(waits_disturbed({0.0, 0.5, 0.3, 0.0, 0.8}, true));  // most batches ran on a busy machine
  EXPECT_FALSE(waits_disturbed({0.0, 0.5, 0.3, 0.0}, true));      // half is not most
}

TEST(Decision, AFailureStopsTheCase) {
  DecisionRule rule;
  int n = 0;
  bool failed = false;
  CaseRatio r = run_case(rule, [&](PairSample& p) {
    if (++n > 3) return PairStatus::failed;
    p = {1, 2, 0};
    return PairStatus::ok;
  }, CaseSides::none, &failed);
  EXPECT_TRUE(failed);
  EXPECT_EQ(r.pairs_total, 3u);
  EXPECT_EQ(r.lower, 0);  // too few pairs for an interval
}

TEST(Decision, NamesRoundTrip) {
  for (auto d : {IncumbentDecision::faster, IncumbentDecision::slower, IncumbentDecision::not_faster, IncumbentDecision::undecided,
                 IncumbentDecision::unavailable}) {
    EXPECT_EQ(parse_incumbent_decision(incumbent_decision_name(d)), d);
  }
  EXPECT_EQ(incumbent_decision_name(IncumbentDecision::slower), "slower_than_incumbent");
  EXPECT_EQ(classify_ratio_interval(1.02, 1.2, 0.01), IncumbentDecision::faster);
  EXPECT_EQ(classify_ratio_interval(0.5, 0.9, 0.01), IncumbentDecision::slower);
  EXPECT_EQ(classify_ratio_interval(0.99, 1.005, 0.01), IncumbentDecision::not_faster);
  EXPECT_EQ(classify_ratio_interval(0.99, 1.05, 0.01), IncumbentDecision::undecided);
}

// The incumbent rule over the comparison's evidence (issue 29): a clear side-by-side win whose
// only disturbance is the kernels' own waits (no outside load) is not rejected by a raised
// margin; under outside load it is re-timed once before a raised margin may decide.
TEST(Replacement, AClearWinUnderOwnWaitsIsNotRejectedByARaisedMargin) {
  ReplacementEvidence e;
  e.compared = true;
  e.decision = IncumbentDecision::faster;
  e.ratio = 1.54;
  e.lower = 1.23;
  e.upper = 4.74;
  e.margin = 0.01;
  e.disturbed = true;
  e.contention = 0.365;  // (1.01 / (1 - 0.365)) = 1.59x: the old raised margin, above 1.54
  e.outside_load = 0.0;  // other work used none of the CPUs
  ReplacementDecision d = decide_replacement(e);
  EXPECT_TRUE(d.replaces);
  EXPECT_FALSE(d.retime);
  EXPECT_EQ(d.rule, ReplacementRule::own_waits);
  EXPECT_FALSE(d.margin_demanded);
  EXPECT_EQ(replacement_rule_name(d.rule), "own_waits");
  EXPECT_NE(d.reason.find("[1.23x, 4.74x] wholly above 1 + margin = 1.01x"), std::string::npos) << d.reason;
  EXPECT_NE(d.reason.find("no raised margin"), std::string::npos) << d.reason;
  // Even after a re-time the own waits never raise the margin.
  e.retimed = true;
  EXPECT_EQ(decide_replacement(e).rule, ReplacementRule::own_waits);

  // Outside load measured beside it: re-timed once when quiet before deciding ...
  e.retimed = false;
  e.outside_load = 0.3;
  d = decide_replacement(e);
  EXPECT_FALSE(d.replaces);
  EXPECT_TRUE(d.retime);
  EXPECT_EQ(d.rule, ReplacementRule::retime_when_quiet);
  // ... and still disturbed after it: the raised margin decides, on the estimate.
  e.retimed = true;
  d = decide_replacement(e);
  EXPECT_EQ(d.rule, ReplacementRule::raised_margin);
  ASSERT_TRUE(d.margin_demanded);
  EXPECT_NEAR(*d.margin_demanded, 1.01 / (1 - 0.365), 1e-12);
  EXPECT_FALSE(d.replaces);
  EXPECT_NE(d.reason.find("raised margin 1.59x"), std::string::npos) << d.reason;
  e.ratio = 1.7;
  EXPECT_TRUE(decide_replacement(e).replaces);
}

TEST(Replacement, TheComparisonsDecisionStandsWhenUndisturbedOrNotFaster) {
  ReplacementEvidence e;
  e.compared = true;
  e.decision = IncumbentDecision::faster;
  e.ratio = 1.2;
  e.lower = 1.05;
  e.upper = 1.4;
  ReplacementDecision d = decide_replacement(e);
  EXPECT_TRUE(d.replaces);
  EXPECT_EQ(d.rule, ReplacementRule::side_by_side);
  for (auto dec : {IncumbentDecision::undecided, IncumbentDecision::not_faster, IncumbentDecision::slower}) {
    e.decision = dec;
    e.disturbed = true;
    e.outside_load = 0.5;
    d = decide_replacement(e);
    EXPECT_FALSE(d.replaces);
    EXPECT_FALSE(d.retime);  // only a win is re-timed: a loss under load keeps the incumbent anyway
    EXPECT_EQ(d.rule, ReplacementRule::side_by_side);
  }
  EXPECT_NE(d.reason.find("slower"), std::string::npos) << d.reason;
}

TEST(Replacement, RecordedTimingsUseTheMarginAndRetimeUnderLoad) {
  ReplacementEvidence e;
  e.ratio = 1.05;
  e.margin = 0.01;
  ReplacementDecision d = decide_replacement(e);
  EXPECT_TRUE(d.replaces);
  EXPECT_EQ(d.rule, ReplacementRule::recorded_timings);
  e.ratio = 1.005;
  EXPECT_FALSE(decide_replacement(e).replaces);
  e.ratio = 1.3;
  e.disturbed = true;
  e.contention = 0.2;
  d = decide_replacement(e);
  EXPECT_TRUE(d.retime);
  EXPECT_EQ(d.rule, ReplacementRule::retime_when_quiet);
  e.retimed = true;
  d = decide_replacement(e);
  EXPECT_EQ(d.rule, ReplacementRule::raised_margin);
  EXPECT_NEAR(*d.margin_demanded, 1.01 / 0.8, 1e-12);
  EXPECT_TRUE(d.replaces);  // 1.3 > 1.2625
}

}  // namespace
}  // namespace kope::eval
