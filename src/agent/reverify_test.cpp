// Re-verification of quarantined wins: the rule (reverify.h) and the loop's step at the end of
// an op (judge.h), with the fakes: an honest win confirmed and promoted, wins refuted because
// their speed did not hold or their quarantine reason held, and a resumed op not re-evaluating.
#include "agent/reverify.h"

#include <gtest/gtest.h>

#include "agent/test_support.h"
#include "run/results.h"
#include "util/strings.h"

namespace kope::agent {
namespace {

using testing::Harness;
using testing::kernel_answer;
using nlohmann::json;

eval::EvalResult timed(double median_us, double floor_us = 0) {
  eval::EvalResult r;
  r.verdict = eval::Verdict::correct;
  r.seed = 99;
  eval::CaseTiming t;
  t.case_index = 2;
  t.median_us = median_us;
  t.floor_us = floor_us;
  r.timing.push_back(t);
  r.speedup_vs_reference = 1000 / median_us;
  return r;
}

std::vector<memory::CaseTimingRecord> recorded(double median_us) {
  memory::CaseTimingRecord t;
  t.case_index = 2;
  t.median_us = median_us;
  return {t};
}

TEST(Reverify, ConfirmsAWinWhoseSpeedHoldsAndRefutesTheOthers) {
  auto ok = judge_reverification(timed(55), recorded(50));
  EXPECT_TRUE(ok.confirmed) << ok.reason;
  EXPECT_NEAR(*ok.speed_kept, 50.0 / 55.0, 1e-9);
  EXPECT_NE(ok.reason.find("seed 99"), std::string::npos) << ok.reason;

  auto slow = judge_reverification(timed(5000), recorded(50));
  EXPECT_FALSE(slow.confirmed);
  EXPECT_NE(slow.reason.find("did not hold"), std::string::npos) << slow.reason;

  auto floor = judge_reverification(timed(60, 100), recorded(60));
  EXPECT_FALSE(floor.confirmed);
  EXPECT_NE(floor.reason.find("below its floor"), std::string::npos) << floor.reason;

  eval::EvalResult wrong = timed(50);
  wrong.verdict = eval::Verdict::wrong_result;
  wrong.message = "case 1: y[3] differs";
  auto w = judge_reverification(wrong, recorded(50));
  EXPECT_FALSE(w.confirmed);
  EXPECT_NE(w.reason.find("wrong_result: case 1"), std::string::npos) << w.reason;

  auto untimed = judge_reverification(timed(50), {});
  EXPECT_FALSE(untimed.confirmed);
}

const run::ReverifiedEvent* reverified(const OpState& st, int k) {
  auto it = st.reverified.find(k);
  return it == st.reverified.end() ? nullptr : &it->second;
}

// An evaluator whose timed cases have a hardware floor of 10 µs (so the roofline fraction is
// not what quarantines a case: only the floor and the jump rules apply).
fakes::FakeEvaluator::Config floors(double floor_us) {
  fakes::FakeEvaluator::Config cfg;
  cfg.floor_us = floor_us;
  return cfg;
}

// Runs the harness's op with `evaluator` instead of the harness's own.
Result<OpEnd> run_with(Harness& h, fakes::FakeEvaluator& evaluator, OpState& st) {
  OpEnvironment env = h.env();
  env.evaluator = &evaluator;
  return run_op(env, h.op, st);
}

// Attempt 2 is 20x over its parent (quarantined: more than 10x), attempt 3 a modest refinement
// of attempt 1, which stays the incumbent while attempt 2 is held back.
void script_jump(Harness& h, const std::string& jump_times) {
  h.config.max_iterations = 3;
  h.config.seed = 11;
  std::string jump = kernel_answer("blocked and vectorised", "correct", 50);
  jump = util::replace_all(jump, "// fake-time-us: 50", "// fake-time-us: " + jump_times);
  h.answers = {{1, kernel_answer("naive", "correct", 1000)}, {2, jump}, {3, kernel_answer("unrolled", "correct", 900)}};
}

TEST(Reverify, AQuarantinedHonestWinIsReverifiedAndPromoted) {
  Harness h;
  fakes::FakeEvaluator evaluator(floors(10));
  script_jump(h, "50");
  OpState st;
  auto end = run_with(h, evaluator, st);
  ASSERT_TRUE(end) << end.error().message;
  ASSERT_EQ(st.attempts.size(), 3u);
  const Attempt& jump = st.attempts[1];
  EXPECT_NE(jump.quarantine_reason.find("over its parent"), std::string::npos) << jump.quarantine_reason;
  EXPECT_FALSE(jump.improved);  // held back while quarantined
  EXPECT_NE(jump.journal.find("held back from the incumbent"), std::string::npos) << jump.journal;
  EXPECT_EQ(st.attempts[2].parent_iteration, 1);  // refined the incumbent, not the quarantined win
  EXPECT_TRUE(st.attempts[2].improved);

  // Re-verified after the last attempt in a separate evaluation on fresh inputs.
  EXPECT_EQ(evaluator.calls(), 4);
  EXPECT_EQ(evaluator.sources().back(), evaluator.sources()[1]);
  auto events = h.events_of("reverified");
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0]["iteration"], 2);
  EXPECT_TRUE(events[0]["confirmed"].get<bool>());
  EXPECT_TRUE(events[0]["promoted"].get<bool>());
  EXPECT_NE(events[0]["seed"].get<uint64_t>(), jump.eval_seed);
  const auto* r = reverified(st, 2);
  ASSERT_TRUE(r);
  EXPECT_TRUE(r->confirmed);
  EXPECT_NE(r->reason.find("confirmed"), std::string::npos) << r->reason;

  // The memory: speed evidence now, with the reason as its note.
  auto c = h.store.get_case(st.case_ids.at(2));
  ASSERT_TRUE(c && *c);
  EXPECT_EQ(memory::quarantine_status_name((*c)->quarantine_status), "verified");
  EXPECT_FALSE((*c)->quarantined);
  EXPECT_EQ(h.store.review_notes().at(st.case_ids.at(2)), r->reason);

  // The op's best: the promoted win, in the state, the op_done event and results.
  ASSERT_TRUE(st.incumbent());
  EXPECT_EQ(st.incumbent()->iteration, 2);
  EXPECT_EQ(h.events_of("op_done")[0]["best_iteration"], 2);
  json res = run::op_result(h.op, st);
  EXPECT_NEAR(res["best_speedup_vs_reference"].get<double>(), 20.0, 1e-9);
  EXPECT_EQ(res["attempts_to_best"], 2);
  EXPECT_TRUE(res["best_reverified"].get<bool>());
  EXPECT_EQ(res["quarantined_attempts"], 1);
  EXPECT_TRUE(res["reverified"][0]["confirmed"].get<bool>());

  // The state rebuilt from the log says the same.
  auto restored = restore_states(h.all_events());
  ASSERT_TRUE(restored);
  const OpState& back = restored->at(h.op.name);
  EXPECT_EQ(back.promoted, 2);
  ASSERT_TRUE(back.incumbent());
  EXPECT_EQ(back.incumbent()->iteration, 2);
  EXPECT_EQ(back.attempts[1].quarantine_reason, jump.quarantine_reason);
}

TEST(Reverify, AWinWhoseSpeedDoesNotHoldOnFreshInputsIsRefutedAndStaysQuarantined) {
  Harness h;
  fakes::FakeEvaluator evaluator(floors(10));
  script_jump(h, "50, 5000");  // fast only the first time its inputs were seen
  OpState st;
  auto end = run_with(h, evaluator, st);
  ASSERT_TRUE(end) << end.error().message;
  const auto* r = reverified(st, 2);
  ASSERT_TRUE(r);
  EXPECT_FALSE(r->confirmed);
  EXPECT_FALSE(r->promoted);
  EXPECT_NE(r->reason.find("did not hold"), std::string::npos) << r->reason;
  EXPECT_NEAR(*r->speed_kept, 0.01, 1e-9);
  auto c = h.store.get_case(st.case_ids.at(2));
  ASSERT_TRUE(c && *c);
  EXPECT_EQ(memory::quarantine_status_name((*c)->quarantine_status), "refuted");
  EXPECT_TRUE((*c)->quarantined);
  EXPECT_EQ(h.store.review_notes().at(st.case_ids.at(2)), r->reason);
  ASSERT_TRUE(st.incumbent());
  EXPECT_EQ(st.incumbent()->iteration, 3);  // the refuted win never became the best
  json res = run::op_result(h.op, st);
  EXPECT_FALSE(res["best_reverified"].get<bool>());
  EXPECT_FALSE(res["reverified"][0]["confirmed"].get<bool>());
}

TEST(Reverify, AWinBelowTheHardwareFloorStaysBelowItAndIsRefuted) {
  fakes::FakeEvaluator with_floors(floors(100));
  Harness h;
  h.config.max_iterations = 2;
  h.config.seed = 5;
  h.answers = {{1, kernel_answer("naive", "correct", 800)}, {2, kernel_answer("too good", "correct", 60)}};
  OpState st;
  ASSERT_TRUE(run_with(h, with_floors, st));
  EXPECT_NE(st.attempts[1].quarantine_reason.find("faster than the hardware allows"), std::string::npos)
      << st.attempts[1].quarantine_reason;
  const auto* r = reverified(st, 2);
  ASSERT_TRUE(r);
  EXPECT_FALSE(r->confirmed);
  EXPECT_NE(r->reason.find("below its floor"), std::string::npos) << r->reason;
  EXPECT_EQ(st.incumbent()->iteration, 1);
  EXPECT_EQ(memory::quarantine_status_name((*h.store.get_case(st.case_ids.at(2)))->quarantine_status), "refuted");
}

TEST(Reverify, AResumedOpDoesNotReverifyTwice) {
  Harness h;
  fakes::FakeEvaluator evaluator(floors(10));
  script_jump(h, "50");
  {
    OpState st;
    ASSERT_TRUE(run_with(h, evaluator, st));
  }
  ASSERT_EQ(evaluator.calls(), 4);
  // As if killed after the "reverified" event: the log without its op_done.
  auto events = h.all_events();
  std::erase_if(events, [](const json& e) { return e.value("type", "") == "op_done"; });
  auto restored = restore_states(events);
  ASSERT_TRUE(restored);
  OpState st = restored->at(h.op.name);
  ASSERT_FALSE(st.done);
  auto end = run_with(h, evaluator, st);
  ASSERT_TRUE(end) << end.error().message;
  EXPECT_EQ(evaluator.calls(), 4);  // nothing evaluated again
  EXPECT_EQ(h.events_of("reverified").size(), 1u);
  EXPECT_EQ(st.incumbent()->iteration, 2);
  EXPECT_EQ(memory::quarantine_status_name((*h.store.get_case(st.case_ids.at(2)))->quarantine_status), "verified");
}

}  // namespace
}  // namespace kope::agent
