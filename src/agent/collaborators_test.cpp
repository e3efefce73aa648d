// The loop's collaborators on their own, with the fakes: the plan and the stopping rules, the
// model turn's context shrink, the judge's incumbent rule, the replay policy with nothing to
// replay. (loop_test.cpp drives them together through run_op.)
#include <gtest/gtest.h>

#include <memory>

#include <fmt/format.h>

#include "agent/judge.h"
#include "agent/llm_policy.h"
#include "agent/op_context.h"
#include "agent/plan.h"
#include "agent/replay_policy.h"
#include "agent/test_support.h"
#include "run/op_state.h"
#include "util/fs.h"
#include "util/hash.h"

namespace kope::agent {
namespace {

using memory::Stage;

Attempt made(int k, Stage stage, eval::Verdict verdict, bool improved = false) {
  Attempt a;
  a.iteration = k;
  a.stage = stage;
  a.verdict = verdict;
  a.improved = improved;
  return a;
}

TimingSummary timed(int case_index, double median_us) {
  TimingSummary t;
  t.case_index = case_index;
  t.median_us = median_us;
  t.reference_us = 1000;
  return t;
}

// A harness, one op's state, and the context the collaborators share (made on first use, after
// the test configured the harness).
struct Collaborators {
  testing::Harness h;
  OpState st;
  OpEnvironment env;
  std::unique_ptr<OpContext> ctx;
  OpContext& context() {
    if (!ctx) {
      env = h.env();
      ctx = std::make_unique<OpContext>(env, h.op, st);
    }
    return *ctx;
  }
};

TEST(Plan, RepairsAFailureAtMostTwiceThenRefinesTheIncumbent) {
  LoopConfig cfg;
  cfg.max_consecutive_repairs = 2;
  OpState st;
  Plan p = plan_next(st, cfg);
  EXPECT_EQ(p.stage, Stage::draft);
  EXPECT_FALSE(p.parent_iteration);
  st.attempts.push_back(made(1, Stage::draft, eval::Verdict::correct, true));
  p = plan_next(st, cfg);
  EXPECT_EQ(p.stage, Stage::refine);
  EXPECT_EQ(p.parent_iteration, 1);
  st.attempts.push_back(made(2, Stage::refine, eval::Verdict::compile_error));
  p = plan_next(st, cfg);
  EXPECT_EQ(p.stage, Stage::repair);
  EXPECT_EQ(p.parent_iteration, 2);
  st.attempts.push_back(made(3, Stage::repair, eval::Verdict::wrong_result));
  EXPECT_EQ(plan_next(st, cfg).parent_iteration, 3);
  st.attempts.push_back(made(4, Stage::repair, eval::Verdict::wrong_result));
  p = plan_next(st, cfg);  // two repairs in a row failed: back to the incumbent
  EXPECT_EQ(p.stage, Stage::refine);
  EXPECT_EQ(p.parent_iteration, 1);
}

TEST(Plan, StopsAtTheLimitWithoutImprovementAndForReplayOnceAKernelIsCorrectHere) {
  LoopConfig cfg;
  cfg.max_iterations = 10;
  cfg.patience = 2;
  cfg.roofline_target = 0;
  OpState st;
  EXPECT_FALSE(stop_reason(st, cfg));
  st.attempts.push_back(made(1, Stage::draft, eval::Verdict::correct, true));
  st.attempts.push_back(made(2, Stage::refine, eval::Verdict::correct));
  EXPECT_FALSE(stop_reason(st, cfg));
  st.attempts.push_back(made(3, Stage::refine, eval::Verdict::correct));
  EXPECT_EQ(stop_reason(st, cfg), "no_improvement");
  cfg.max_iterations = 3;
  EXPECT_EQ(stop_reason(st, cfg), "iterations");
  cfg.policy = Policy::replay;
  cfg.replay_limit = 4;
  EXPECT_EQ(stop_reason(st, cfg), "replay_verified");  // a kernel correct here answers the op
  cfg.replay_all = true;
  EXPECT_FALSE(stop_reason(st, cfg));
  st.attempts.push_back(made(4, Stage::refine, eval::Verdict::correct));
  EXPECT_EQ(stop_reason(st, cfg), "iterations");
}

TEST(LlmPolicy, AWindowErrorShrinksTheMemoryTiersAndTheAnswerIsKeptBeforeParsing) {
  Collaborators c;
  testing::Harness& h = c.h;
  int calls = 0;
  h.failure = [&](const auto&, const llm::ChatParams&) -> std::optional<llm::LlmError> {
    if (calls++ > 0) return std::nullopt;
    llm::LlmError e;
    e.cls = llm::FailureClass::context_length;
    e.message = "too long";
    return e;
  };
  h.answers[1] = testing::kernel_answer("vectorised rows", "correct");
  LlmPolicy policy(c.context());
  auto next = policy.propose(1, Plan{});
  ASSERT_TRUE(next) << next.error().message;
  ASSERT_TRUE(next->proposal);
  EXPECT_TRUE(next->proposal->attempt.code);
  EXPECT_EQ(next->proposal->attempt.optimisation, "vectorised rows");
  auto prompts = h.events_of("prompt");
  ASSERT_EQ(prompts.size(), 2u);
  EXPECT_EQ(prompts[0]["shrink"], 1.0);
  EXPECT_EQ(prompts[1]["shrink"], 0.5);
  EXPECT_EQ(h.events_of("llm_error").size(), 1u);
  auto answers = h.events_of("answer");
  ASSERT_EQ(answers.size(), 1u);
  auto text = util::read_file(h.dir->path() / answers[0]["answer_file"].get<std::string>());
  ASSERT_TRUE(text);
  EXPECT_EQ(*text, h.answers[1]);
  EXPECT_TRUE(std::filesystem::exists(h.dir->path() / "transcripts" / c.context().op_dir / "1-draft.md"));
}

TEST(LlmPolicy, AnUnavailableModelEndsTheOpAfterTheBackoffs) {
  Collaborators c;
  c.h.failure = [](const auto&, const llm::ChatParams&) -> std::optional<llm::LlmError> {
    llm::LlmError e;
    e.cls = llm::FailureClass::server_error;
    e.message = "503";
    return e;
  };
  testing::Harness& h = c.h;
  OpState& st = c.st;
  LlmPolicy policy(c.context());
  auto next = policy.propose(1, Plan{});
  ASSERT_TRUE(next) << next.error().message;
  EXPECT_FALSE(next->proposal);
  EXPECT_EQ(next->end, OpEnd::llm_unavailable);
  EXPECT_EQ(h.events_of("llm_error").size(), 3u);  // the first call and one after each of the two waits
  ASSERT_EQ(st.errors.size(), 1u);
  EXPECT_NE(st.errors[0].find("model unavailable (server_error)"), std::string::npos) << st.errors[0];
}

TEST(Judge, ACandidateReplacesTheIncumbentOnlyBeyondTheMargin) {
  Collaborators c;
  c.h.config.min_improvement = 0.01;
  Attempt inc = made(1, Stage::draft, eval::Verdict::correct, true);
  inc.timings = {timed(0, 1000)};
  c.st.attempts.push_back(inc);
  Judge judge(c.context());

  Attempt close = made(2, Stage::refine, eval::Verdict::correct);
  close.parent_iteration = 1;
  close.timings = {timed(0, 995)};
  close.speedup_vs_reference = 1000.0 / 995.0;  // r is the store's: the ratio of speedups vs the reference
  ASSERT_TRUE(judge.decide(close));
  EXPECT_FALSE(close.improved);
  EXPECT_EQ(close.decision, run::Decision::recorded_timings);
  ASSERT_TRUE(close.speedup_vs_parent);
  EXPECT_NEAR(*close.speedup_vs_parent, 1000.0 / 995.0, 1e-9);

  Attempt fast = made(2, Stage::refine, eval::Verdict::correct);
  fast.parent_iteration = 1;
  fast.timings = {timed(0, 500)};
  fast.speedup_vs_reference = 2.0;
  auto assessed = judge.decide(fast);
  ASSERT_TRUE(assessed) << assessed.error().message;
  EXPECT_TRUE(fast.improved);
  EXPECT_NEAR(*fast.speedup_vs_parent, 2.0, 1e-9);
  // The case it built and had assessed, for the recorder: r as the attempt states it.
  EXPECT_EQ(assessed->record.natural_key, c.context().key(2));
  EXPECT_EQ(assessed->record.speedup_vs_parent, fast.speedup_vs_parent);
  EXPECT_EQ(assessed->assessment.outcome, fast.outcome);
  EXPECT_NEAR(assessed->assessment.ratio, 2.0, 1e-9);
  EXPECT_EQ(fast.outcome, memory::outcome_for_ratio(2.0));
  EXPECT_TRUE(fast.notable);  // at least notable_speedup (1.5) over its parent

  // Timed beside the incumbent it began from, the comparison's ratio decides whether the gain is
  // notable, not memory's r over recorded timings (2x here, 1.08x beside it).
  Attempt beside = made(2, Stage::refine, eval::Verdict::correct);
  beside.parent_iteration = 1;
  beside.timings = {timed(0, 500)};
  beside.speedup_vs_reference = 2.0;
  beside.decision = run::Decision::faster;
  beside.speedup_vs_incumbent = 1.08;
  beside.decision_lower = 1.05;
  beside.decision_upper = 1.11;
  ASSERT_TRUE(judge.decide(beside));
  EXPECT_TRUE(beside.improved);
  EXPECT_NEAR(*beside.speedup_vs_parent, 2.0, 1e-9);
  EXPECT_FALSE(beside.notable) << beside.notable_reason;
  beside.speedup_vs_incumbent = 1.7;
  beside.decision_lower = 1.6;
  beside.decision_upper = 1.8;
  ASSERT_TRUE(judge.decide(beside));
  EXPECT_TRUE(beside.notable);
  EXPECT_NE(beside.notable_reason.find("1.70x the speed of the kernel it began from, timed beside it"), std::string::npos)
      << beside.notable_reason;

  Attempt failed = made(2, Stage::refine, eval::Verdict::wrong_result);
  ASSERT_TRUE(judge.decide(failed));
  EXPECT_FALSE(failed.improved);
  EXPECT_EQ(failed.outcome, memory::Outcome::negative);
}

// A stall is notable once: the second correct attempt in a row that did not replace the
// incumbent triggers a reflection (what it teaches reaches the task's later prompts), a third in
// a row does not.
TEST(Judge, TheSecondCorrectAttemptInARowThatDoesNotReplaceTheIncumbentIsNotable) {
  Collaborators c;
  c.h.config.min_improvement = 0.01;
  Attempt inc = made(1, Stage::draft, eval::Verdict::correct, true);
  inc.timings = {timed(0, 1000)};
  c.st.attempts.push_back(inc);
  Judge judge(c.context());
  auto slower = [](int i) {
    Attempt a = made(i, Stage::refine, eval::Verdict::correct);
    a.parent_iteration = 1;
    a.timings = {timed(0, 1100)};
    a.speedup_vs_reference = 1000.0 / 1100.0;
    return a;
  };
  Attempt first = slower(2);
  ASSERT_TRUE(judge.decide(first));
  EXPECT_FALSE(first.improved);
  EXPECT_FALSE(first.notable) << first.notable_reason;  // one is no stall yet
  c.st.attempts.push_back(first);

  Attempt second = slower(3);
  second.decision = run::Decision::undecided;
  second.speedup_vs_incumbent = 0.97;
  ASSERT_TRUE(judge.decide(second));
  EXPECT_FALSE(second.improved);
  EXPECT_TRUE(second.notable);
  EXPECT_NE(second.notable_reason.find("attempts 2 and 3 were correct but neither replaced the incumbent (attempt 1)"),
            std::string::npos) << second.notable_reason;
  EXPECT_NE(second.notable_reason.find("attempt 3 0.97x the incumbent, timed beside it (undecided)"), std::string::npos)
      << second.notable_reason;
  c.st.attempts.push_back(second);

  Attempt third = slower(4);
  ASSERT_TRUE(judge.decide(third));
  EXPECT_FALSE(third.notable) << third.notable_reason;  // the same stall
  c.st.attempts.push_back(third);

  // A failure ends the stall: two more in a row after it are a new one (the first of them is a fix).
  c.st.attempts.push_back(made(5, Stage::refine, eval::Verdict::wrong_result));
  Attempt fix = slower(6);
  ASSERT_TRUE(judge.decide(fix));
  EXPECT_TRUE(fix.notable);
  EXPECT_NE(fix.notable_reason.find("is correct after attempt 5 failed"), std::string::npos) << fix.notable_reason;
  c.st.attempts.push_back(fix);
  Attempt again = slower(7);
  ASSERT_TRUE(judge.decide(again));
  EXPECT_TRUE(again.notable);
  EXPECT_NE(again.notable_reason.find("attempts 6 and 7 were correct"), std::string::npos) << again.notable_reason;
}

// A candidate's source travels with its attempt: the live state carries it, the log does not,
// and code_of reads the run directory only for an attempt read back from the log.
TEST(OpContext, TheSourceTravelsWithItsAttemptAndIsReadBackOnlyForOneFromTheLog) {
  Collaborators c;
  c.h.config.max_iterations = 2;
  ASSERT_TRUE(c.h.run(c.st));
  ASSERT_EQ(c.st.attempts.size(), 2u);
  auto rebuilt = run::restore_states(c.h.all_events());
  ASSERT_TRUE(rebuilt) << rebuilt.error().message;
  const OpState& from_log = rebuilt->at(c.h.op.name);
  OpContext& ctx = c.context();
  for (size_t i = 0; i < c.st.attempts.size(); ++i) {
    const Attempt& live = c.st.attempts[i];
    SCOPED_TRACE(live.iteration);
    ASSERT_TRUE(live.has_code);
    ASSERT_TRUE(live.code);
    auto file = util::read_file(c.h.dir->path() / live.code_file);
    ASSERT_TRUE(file) << file.error().message;
    EXPECT_EQ(*live.code, *file);
    EXPECT_EQ(live.code_hash, util::sha256_hex(*live.code));
    EXPECT_FALSE(run::to_json(live).contains("code"));  // the run directory keeps it beside the log
    const Attempt& logged = from_log.attempts[i];
    EXPECT_FALSE(logged.code);
    auto read_back = ctx.code_of(logged);
    ASSERT_TRUE(read_back) << read_back.error().message;
    EXPECT_EQ(*read_back, *live.code);
    std::filesystem::remove(c.h.dir->path() / live.code_file);
    auto carried = ctx.code_of(live);  // never read back in the process that made it
    ASSERT_TRUE(carried) << carried.error().message;
    EXPECT_EQ(*carried, *live.code);
    auto gone = ctx.code_of(logged);
    ASSERT_FALSE(gone);
    EXPECT_EQ(gone.error().kind, ErrorKind::not_found);
    EXPECT_NE(gone.error().message.find(live.code_file), std::string::npos) << gone.error().message;
  }
  Attempt without = made(3, Stage::repair, eval::Verdict::compile_error);
  auto none = ctx.code_of(without);
  ASSERT_TRUE(none);
  EXPECT_EQ(*none, "");
}

// The harness's store, counting the assessments it is asked for.
class CountingStore : public testing::InMemoryStore {
 public:
  Result<memory::CaseAssessment> assess_attempt(const memory::CaseRecord& c) override {
    ++assessed;
    return InMemoryStore::assess_attempt(c);
  }
  int assessed = 0;
};

// Each attempt's memory case is built once and assessed once (by the judge); the recorder
// records that case, completed with the code, the journal and the wall time the attempt ended
// with.
TEST(Recorder, EachAttemptsCaseIsBuiltAndAssessedOnce) {
  testing::Harness h;
  h.answers = {{1, testing::kernel_answer("naive", "compile_error")},
               {2, testing::kernel_answer("fixed", "correct", 800)},
               {3, testing::kernel_answer("faster", "correct", 400)}};
  h.config.max_iterations = 3;
  CountingStore store;
  OpEnvironment env = h.env();
  env.store = &store;
  OpState st;
  auto end = run_op(env, h.op, st);
  ASSERT_TRUE(end) << end.error().message;
  ASSERT_EQ(st.attempts.size(), 3u);
  EXPECT_EQ(store.assessed, 3);
  EXPECT_EQ(store.record_calls(), 3);
  auto cases = store.all_cases();
  ASSERT_EQ(cases.size(), 3u);
  for (const Attempt& a : st.attempts) {
    SCOPED_TRACE(a.iteration);
    const memory::CaseRecord& rec = cases[static_cast<size_t>(st.case_ids.at(a.iteration) - 1)];
    EXPECT_EQ(rec.natural_key, fmt::format("{}/{}/{}", h.run_id, h.op.name, a.iteration));
    EXPECT_EQ(rec.code, a.code.value_or(""));
    EXPECT_EQ(rec.journal, a.journal);
    EXPECT_FALSE(rec.journal.empty());
    EXPECT_DOUBLE_EQ(rec.wall_seconds, a.wall_seconds);
    EXPECT_GT(rec.wall_seconds, 0);
    EXPECT_EQ(rec.speedup_vs_parent, a.speedup_vs_parent);
    EXPECT_EQ(rec.outcome, a.outcome);
    EXPECT_EQ(rec.timings.size(), a.timings.size());
  }
  EXPECT_TRUE(st.attempts[2].speedup_vs_parent);
}

// A wrong result keeps the first few wrong cases, each with its first mismatching element, so
// the feedback shows which shapes fail; first_mismatch is the first of them.
TEST(Judge, AWrongResultKeepsItsFirstWrongCases) {
  eval::EvalResult r;
  r.verdict = eval::Verdict::wrong_result;
  for (int i = 0; i < 7; ++i) {
    eval::CaseCheck& c = r.cases.emplace_back();
    c.case_index = i;
    c.label = fmt::format("N={}", i + 1);
    c.ok = i % 3 == 0;  // cases 0, 3, 6 pass
    if (!c.ok) c.first_mismatch = fmt::format("y[{}]: got 0, expected 1", i);
  }
  Attempt a;
  apply_eval_result(a, r);
  EXPECT_EQ(a.cases_passed, 3);
  EXPECT_EQ(a.cases_total, 7);
  ASSERT_EQ(a.wrong_cases.size(), run::k_wrong_cases_kept);
  EXPECT_EQ(a.wrong_cases[0], "case N=2: y[1]: got 0, expected 1");
  EXPECT_EQ(a.wrong_cases[3], "case N=6: y[5]: got 0, expected 1");
  EXPECT_EQ(a.first_mismatch, a.wrong_cases[0]);
  // The JSON carries them; a run written before the field reads as none.
  auto back = run::attempt_from_json(run::to_json(a));
  ASSERT_TRUE(back) << back.error().message;
  EXPECT_EQ(back->wrong_cases, a.wrong_cases);
  nlohmann::json old = run::to_json(a);
  old.erase("wrong_cases");
  auto older = run::attempt_from_json(old);
  ASSERT_TRUE(older) << older.error().message;
  EXPECT_TRUE(older->wrong_cases.empty());
  EXPECT_EQ(older->first_mismatch, a.first_mismatch);
}

TEST(ReplayPolicy, AnEmptyMemoryHasNothingToReplay) {
  Collaborators c;
  c.h.config.policy = Policy::replay;
  ReplayPolicy policy(c.context());
  auto next = policy.propose(1, Plan{});
  ASSERT_TRUE(next) << next.error().message;
  EXPECT_FALSE(next->proposal);
  EXPECT_EQ(next->end, OpEnd::finished);
  EXPECT_EQ(next->stop_reason, "replay_exhausted");
}

}  // namespace
}  // namespace kope::agent
