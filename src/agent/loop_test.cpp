#include "agent/loop.h"

#include <gtest/gtest.h>

#include "agent/prompt.h"
#include "agent/reflector.h"
#include "agent/replay.h"
#include "agent/test_support.h"
#include "util/strings.h"

namespace kope::agent {
namespace {

using testing::Harness;

llm::LlmError llm_error(llm::FailureClass cls, std::string message, int http_status) {
  llm::LlmError e;
  e.cls = cls;
  e.message = std::move(message);
  e.http_status = http_status;
  return e;
}
using testing::kernel_answer;
using memory::Stage;

std::vector<Stage> stages(const OpState& st) {
  std::vector<Stage> out;
  for (const auto& a : st.attempts) out.push_back(a.stage);
  return out;
}

TEST(Loop, StagesLineageIncumbentAndLabels) {
  Harness h;
  h.answers = {{1, kernel_answer("naive", "compile_error")},
               {2, kernel_answer("fixed syntax", "wrong_result")},
               {3, kernel_answer("fixed indexing", "correct", 500)},
               {4, kernel_answer("unrolled", "correct", 600)},
               {5, kernel_answer("omp rows", "correct", 200)}};
  OpState st;
  auto end = h.run(st);
  ASSERT_TRUE(end) << end.error().message;
  EXPECT_EQ(*end, OpEnd::finished);
  ASSERT_EQ(st.attempts.size(), 5u);
  EXPECT_EQ(stages(st), (std::vector<Stage>{Stage::draft, Stage::repair, Stage::repair, Stage::refine, Stage::refine}));
  EXPECT_FALSE(st.attempts[0].parent_iteration);
  EXPECT_EQ(st.attempts[1].parent_iteration, 1);
  EXPECT_EQ(st.attempts[2].parent_iteration, 2);
  EXPECT_EQ(st.attempts[3].parent_iteration, 3);  // refines the incumbent
  EXPECT_EQ(st.attempts[4].parent_iteration, 3);  // attempt 4 was slower: the incumbent is still 3
  EXPECT_EQ(st.attempts[0].verdict, eval::Verdict::compile_error);
  EXPECT_FALSE(st.attempts[2].speedup_vs_incumbent);
  EXPECT_TRUE(st.attempts[2].improved);
  EXPECT_FALSE(st.attempts[3].improved);
  EXPECT_TRUE(st.attempts[4].improved);
  EXPECT_EQ(st.incumbent()->iteration, 5);
  EXPECT_NEAR(*st.attempts[4].speedup_vs_parent, 2.5, 1e-9);  // 500 us -> 200 us
  EXPECT_NEAR(*st.attempts[2].speedup_vs_parent, 2.0, 1e-9);  // first correct: vs the reference (1000 us)
  EXPECT_EQ(st.attempts[0].outcome, memory::Outcome::negative);
  EXPECT_EQ(st.attempts[2].outcome, memory::Outcome::effective);
  EXPECT_EQ(st.attempts[3].outcome, memory::Outcome::negative);  // 500/600 = 0.83 < 0.85
  EXPECT_EQ(st.attempts[4].outcome, memory::Outcome::effective);
  EXPECT_EQ(st.stop_reason, "iterations");
  EXPECT_TRUE(st.done);

  // Memory holds every attempt with the same lineage, by natural key.
  auto cases = h.store.all_cases();
  ASSERT_EQ(cases.size(), 5u);
  EXPECT_FALSE(cases[0].parent_id);
  EXPECT_EQ(cases[1].parent_id, cases[0].id);
  EXPECT_EQ(cases[2].parent_id, cases[1].id);
  EXPECT_EQ(cases[3].parent_id, cases[2].id);
  EXPECT_EQ(cases[4].parent_id, cases[2].id);
  EXPECT_EQ(cases[4].natural_key, "run-test/softmax/5");
  EXPECT_EQ(cases[4].stage, Stage::refine);
  EXPECT_EQ(cases[4].optimisation, "omp rows");
  EXPECT_EQ(cases[4].outcome, memory::Outcome::effective);
  EXPECT_EQ(cases[3].outcome, memory::Outcome::negative);
  EXPECT_NE(cases[4].code.find("kope_kernel"), std::string::npos);
  EXPECT_NE(cases[4].journal.find("Strategy: refine"), std::string::npos);
  EXPECT_NE(cases[4].journal.find("new incumbent"), std::string::npos);
  EXPECT_GT(cases[4].tokens_prompt, 0);
  EXPECT_EQ(cases[4].task.signature, spec::render_signature(h.op));
  // Every candidate source is in the run directory.
  for (int k = 1; k <= 5; ++k) {
    EXPECT_TRUE(std::filesystem::exists(h.dir->path() / fmt::format("candidates/softmax/{}.cpp", k)));
    EXPECT_TRUE(std::filesystem::exists(h.dir->path() / fmt::format("transcripts/softmax/{}-{}.md", k, memory::stage_name(st.attempts[k - 1].stage))));
  }
}

TEST(Loop, PromptsCarryFeedbackAndTheTriedTable) {
  Harness h;
  h.answers = {{1, kernel_answer("naive", "compile_error")}, {2, kernel_answer("ok", "correct", 500)}};
  h.config.max_iterations = 3;
  OpState st;
  ASSERT_TRUE(h.run(st));
  auto calls = h.llm->calls();
  ASSERT_GE(calls.size(), 3u);
  const std::string& second = calls[1].messages[1].content;
  EXPECT_NE(second.find("stage: repair"), std::string::npos);
  EXPECT_NE(second.find("## Latest feedback"), std::string::npos);
  EXPECT_NE(second.find("expected ';'"), std::string::npos);  // trimmed diagnostics
  EXPECT_NE(second.find("## Already tried in this task"), std::string::npos);
  EXPECT_NE(second.find("| 1 | draft | naive | compile_error"), std::string::npos);
  EXPECT_NE(second.find("The failed attempt's code"), std::string::npos);
  // The refine prompt shows the incumbent with its timings and roofline fraction.
  std::string third;
  for (const auto& c : calls) {
    if (c.params.purpose == "refine") third = c.messages[1].content;
  }
  ASSERT_FALSE(third.empty());
  EXPECT_NE(third.find("## Incumbent"), std::string::npos);
  EXPECT_NE(third.find("2.00x"), std::string::npos);
  EXPECT_NE(third.find("fraction of roofline"), std::string::npos);
  EXPECT_NE(third.find(spec::render_signature(h.op)), std::string::npos);
  // The system message states the kernel rules and the hardware.
  EXPECT_NE(calls[0].messages[0].content.find("Test CPU"), std::string::npos);
  EXPECT_NE(calls[0].messages[0].content.find("OpenMP"), std::string::npos);
  EXPECT_NE(calls[0].messages[0].content.find("No BLAS"), std::string::npos);
}

TEST(Loop, RepairsAreCappedThenDraftAgain) {
  Harness h;
  for (int k = 1; k <= 5; ++k) h.answers[k] = kernel_answer("broken", "compile_error");
  OpState st;
  ASSERT_TRUE(h.run(st));
  EXPECT_EQ(stages(st), (std::vector<Stage>{Stage::draft, Stage::repair, Stage::repair, Stage::draft, Stage::repair}));
  EXPECT_FALSE(st.attempts[3].parent_iteration);
  EXPECT_FALSE(st.incumbent());
}

TEST(Loop, IncumbentNeedsToBeFasterByTheMargin) {
  Harness h;
  h.config.max_iterations = 3;
  h.answers = {{1, kernel_answer("a", "correct", 500)}, {2, kernel_answer("b", "correct", 497)}, {3, kernel_answer("c", "correct", 400)}};
  OpState st;
  ASSERT_TRUE(h.run(st));
  EXPECT_TRUE(st.attempts[0].improved);
  EXPECT_FALSE(st.attempts[1].improved);  // 0.6% faster: noise, not an improvement
  EXPECT_EQ(st.attempts[1].outcome, memory::Outcome::partial);
  EXPECT_TRUE(st.attempts[2].improved);
}

TEST(Loop, AnswerWithoutCodeIsARecordedAttempt) {
  Harness h;
  h.config.max_iterations = 2;
  h.answers = {{1, "I would use AVX2 here, but I will not write the code."}, {2, kernel_answer("ok", "correct", 500)}};
  OpState st;
  ASSERT_TRUE(h.run(st));
  ASSERT_EQ(st.attempts.size(), 2u);
  const Attempt& a = st.attempts[0];
  EXPECT_FALSE(a.has_code);
  EXPECT_EQ(a.verdict, eval::Verdict::compile_error);
  EXPECT_TRUE(a.message.starts_with("no code in answer")) << a.message;
  EXPECT_EQ(h.evaluator.calls(), 1);  // only the second answer was evaluated
  EXPECT_EQ(h.store.all_cases().size(), 2u);
  EXPECT_EQ(h.store.all_cases()[0].code, "");
  EXPECT_EQ(st.attempts[1].stage, Stage::repair);
}

TEST(Loop, StopsAtTheRooflineTarget) {
  Harness h;
  h.config.roofline_target = 0.8;
  h.answers = {{1, kernel_answer("slow", "correct", 500)}, {2, kernel_answer("near the roof", "correct", 110)}};
  OpState st;
  ASSERT_TRUE(h.run(st));
  EXPECT_EQ(st.attempts.size(), 2u);  // 100/110 = 91% of the roofline
  EXPECT_EQ(st.stop_reason, "roofline");
}

// The roofline stop needs every timed case at the target: a small case at its cache roof does
// not stop an operator whose large case is far from its roof.
TEST(Loop, TheRooflineStopNeedsEveryTimedCaseAtTheTarget) {
  Attempt inc;
  inc.fraction_of_roofline = 0.85;  // the geomean alone would stop
  TimingSummary small, large;
  small.case_index = 1;
  small.fraction_of_roofline = 0.95;
  large.case_index = 2;
  large.fraction_of_roofline = 0.5;
  inc.timings = {small, large};
  EXPECT_FALSE(reached_roofline(inc, 0.8));
  inc.timings[1].fraction_of_roofline = 0.81;
  EXPECT_TRUE(reached_roofline(inc, 0.8));
  Attempt untimed;  // no per-case timings: the geomean
  untimed.fraction_of_roofline = 0.9;
  EXPECT_TRUE(reached_roofline(untimed, 0.8));
  untimed.fraction_of_roofline.reset();
  EXPECT_FALSE(reached_roofline(untimed, 0.8));
}

TEST(Loop, StopsWhenNothingImproves) {
  Harness h;
  h.config.patience = 2;
  h.config.max_iterations = 10;
  OpState st;  // every answer: correct at the reference's speed
  ASSERT_TRUE(h.run(st));
  EXPECT_EQ(st.attempts.size(), 3u);
  EXPECT_EQ(st.stop_reason, "no_improvement");
}

TEST(Loop, StopsOnTokensAndTime) {
  Harness h;
  h.config.token_budget = 100;  // the first prompt alone is larger
  OpState st;
  ASSERT_TRUE(h.run(st));
  EXPECT_EQ(st.attempts.size(), 1u);
  EXPECT_EQ(st.stop_reason, "token_budget");

  Harness t;
  t.config.time_limit_seconds = 1e-9;
  OpState st2;
  ASSERT_TRUE(t.run(st2));
  EXPECT_EQ(st2.attempts.size(), 1u);
  EXPECT_EQ(st2.stop_reason, "time_limit");
}

TEST(Loop, ReflectionAfterAFixAndAtTheEnd) {
  Harness h;
  h.config.max_iterations = 3;
  h.answers = {{1, kernel_answer("naive", "wrong_result")}, {2, kernel_answer("fixed", "correct", 500)}, {3, kernel_answer("same", "correct", 500)}};
  OpState st;
  ASSERT_TRUE(h.run(st));
  EXPECT_TRUE(st.attempts[1].notable);
  EXPECT_EQ(h.reflect_calls(), 2);  // after the fix, at the end
  EXPECT_TRUE(st.reflections.contains("k2"));
  EXPECT_TRUE(st.reflections.contains("end"));
  auto deltas = h.store.deltas();
  ASSERT_EQ(deltas.size(), 1u);  // the same lesson twice: applied once, the second found in memory
  EXPECT_EQ(deltas[0].op, memory::LessonDelta::Op::add);
  EXPECT_EQ(deltas[0].lesson.scope.category, "normalization");
  EXPECT_TRUE(deltas[0].source_case.has_value());
  auto lessons = h.store.lessons({});
  ASSERT_EQ(lessons->size(), 1u);
  // The reflection prompt shows what happened.
  std::string last_reflection;
  for (const auto& c : h.llm->calls()) {
    if (c.params.purpose == "reflect") {
      EXPECT_NE(c.messages[1].content.find("softmax"), std::string::npos);
      EXPECT_NE(c.messages[0].content.find("JSON"), std::string::npos);
      last_reflection = c.messages[1].content;
    }
  }
  // The one that ends the op: the last attempt's per-case timings (no next prompt carried
  // them), and every lesson in scope by id, shown whole (the one the first reflection added).
  EXPECT_NE(last_reflection.find("## Outcome and timings"), std::string::npos) << last_reflection;
  EXPECT_NE(last_reflection.find("Attempt 3 (refine"), std::string::npos) << last_reflection;
  EXPECT_NE(last_reflection.find("| timed case | this attempt |"), std::string::npos) << last_reflection;
  EXPECT_NE(last_reflection.find("## Lessons already in memory"), std::string::npos);
  EXPECT_NE(last_reflection.find("[" + (*lessons)[0].id + "]"), std::string::npos) << last_reflection;
  EXPECT_NE(last_reflection.find((*lessons)[0].text), std::string::npos) << "shown whole";
  EXPECT_GT(st.tokens_prompt(), st.attempts[0].tokens_prompt + st.attempts[1].tokens_prompt + st.attempts[2].tokens_prompt);
}

// The reflection prompts of a run, in order.
std::vector<std::string> reflection_prompts(const Harness& h) {
  std::vector<std::string> out;
  for (const auto& c : h.llm->calls()) {
    if (c.params.purpose == "reflect") out.push_back(c.messages[1].content);
  }
  return out;
}

// A fix that is also the last attempt and the best kernel: the notable trigger and the end
// trigger both concern attempt 2. Each asks once; the end reflection is told so and shows the
// lesson the first wrote, whole and first; a resumed run asks neither again.
TEST(Loop, OneReflectionPerTriggerAndAttempt) {
  Harness h;
  h.config.max_iterations = 2;
  h.answers = {{1, kernel_answer("naive", "wrong_result")}, {2, kernel_answer("fixed", "correct", 500)}};
  OpState st;
  ASSERT_TRUE(h.run(st));
  std::vector<std::pair<std::string, int>> asked;
  for (const auto& e : h.events_of("reflection")) asked.emplace_back(e["key"], e["attempt"]);
  EXPECT_EQ(asked, (std::vector<std::pair<std::string, int>>{{"k2", 2}, {"end", 2}}));
  auto prompts = reflection_prompts(h);
  ASSERT_EQ(prompts.size(), 2u);
  auto lessons = *h.store.lessons({});
  ASSERT_EQ(lessons.size(), 1u);
  const std::string& end = prompts[1];
  EXPECT_NE(end.find("Attempt 2 was reflected on already"), std::string::npos) << end;
  size_t own = end.find("Written or voted on by this task's earlier reflections");
  ASSERT_NE(own, std::string::npos) << end;
  EXPECT_GT(end.find("- [" + lessons[0].id + "]"), own);
  EXPECT_NE(end.find(lessons[0].text), std::string::npos) << "shown whole";
  EXPECT_EQ(end.find("None in this scope yet"), std::string::npos) << end;

  // Resumed from a log cut after the first reflection was applied: only the end is asked.
  auto lines = util::split(*util::read_file(h.dir->path() / "events.jsonl"), '\n');
  std::string log;
  for (const auto& line : lines) {
    log += line + "\n";
    auto e = nlohmann::json::parse(line);
    if (e.value("type", "") == "reflection_applied" && e.value("key", "") == "k2") break;
  }
  h.events.reset();
  ASSERT_TRUE(util::write_file_atomic(h.dir->path() / "events.jsonl", log));
  h.events = std::move(*EventLog::open(h.dir->path() / "events.jsonl"));
  auto states = restore_states(h.all_events());
  ASSERT_TRUE(states);
  OpState resumed = (*states)["softmax"];
  ASSERT_TRUE(resumed.reflections.contains("k2"));
  ASSERT_TRUE(h.run(resumed));
  EXPECT_EQ(h.reflect_calls(), 3);  // the end only
  asked.clear();
  for (const auto& e : h.events_of("reflection")) asked.emplace_back(e["key"], e["attempt"]);
  EXPECT_EQ(asked, (std::vector<std::pair<std::string, int>>{{"k2", 2}, {"end", 2}}));
  // Cut after the end reflection's answer was logged, before it was applied: resume applies
  // it and asks nothing.
  lines = util::split(*util::read_file(h.dir->path() / "events.jsonl"), '\n');
  log.clear();
  for (const auto& line : lines) {
    log += line + "\n";
    auto e = nlohmann::json::parse(line);
    if (e.value("type", "") == "reflection" && e.value("key", "") == "end") break;
  }
  h.events.reset();
  ASSERT_TRUE(util::write_file_atomic(h.dir->path() / "events.jsonl", log));
  h.events = std::move(*EventLog::open(h.dir->path() / "events.jsonl"));
  auto cut = restore_states(h.all_events());
  OpState again = (*cut)["softmax"];
  ASSERT_FALSE(again.done);
  ASSERT_TRUE(h.run(again));
  EXPECT_EQ(h.reflect_calls(), 3);
  EXPECT_TRUE(again.reflections.at("end").applied);
  EXPECT_TRUE(again.done);
}

// A reflection about a failed attempt shows its code and what the evaluator reported, with the
// error signature a fix lesson names; a fix lesson without one gets it.
TEST(Loop, ReflectionsAboutFailuresShowTheCodeAndTheDiagnostics) {
  Harness h;
  h.config.max_iterations = 2;
  h.answers = {{1, kernel_answer("naive", "wrong_result")}, {2, kernel_answer("fixed", "correct", 500)}};
  h.reflection = R"({"lessons": [{"action": "add", "kind": "fix", "title": "Index rows by D",
    "text": "Index the row with i * D, not i * N."}]})";
  OpState st;
  ASSERT_TRUE(h.run(st));
  auto prompts = reflection_prompts(h);
  ASSERT_GE(prompts.size(), 1u);
  const std::string& fix = prompts[0];
  EXPECT_NE(fix.find("## What the failed attempt reported"), std::string::npos) << fix;
  EXPECT_NE(fix.find("First mismatch: case N=1 D=1: y[0]: got 1, expected 2"), std::string::npos) << fix;
  EXPECT_NE(fix.find("Attempt 1 (failed):\n```cpp\n"), std::string::npos) << fix;
  EXPECT_NE(fix.find("// naive"), std::string::npos) << fix;
  size_t sig = fix.find("Error signature: `wrong_result");
  ASSERT_NE(sig, std::string::npos) << fix;
  auto deltas = h.store.deltas();
  ASSERT_FALSE(deltas.empty());
  EXPECT_EQ(deltas[0].lesson.kind, memory::LessonKind::fix);
  EXPECT_TRUE(deltas[0].lesson.error_signature.starts_with("wrong_result")) << deltas[0].lesson.error_signature;
  EXPECT_NE(fix.find("`error_signature` is \"\" for a strategy, pitfall or recipe lesson"), std::string::npos);

  // No correct kernel at all: the end reflection shows the last attempt's code and diagnostics.
  Harness none;
  none.config.max_iterations = 2;
  none.answers = {{1, kernel_answer("naive", "compile_error")}, {2, kernel_answer("still broken", "compile_error")}};
  OpState st2;
  ASSERT_TRUE(none.run(st2));
  auto end = reflection_prompts(none);
  ASSERT_EQ(end.size(), 1u);
  EXPECT_NE(end[0].find("No attempt produced a correct kernel."), std::string::npos);
  EXPECT_NE(end[0].find("The last attempt (2, failed):\n```cpp\n"), std::string::npos) << end[0];
  EXPECT_NE(end[0].find("// still broken"), std::string::npos);
  EXPECT_NE(end[0].find("error: expected ';'"), std::string::npos) << end[0];
  EXPECT_NE(end[0].find("Error signature: `compile_error"), std::string::npos) << end[0];
  EXPECT_EQ(end[0].find("reply with one"), std::string::npos) << "a reflection asks for lessons, not code";
}

TEST(Loop, ReflectionCodeIsWholeOrNotShown) {
  std::string code;
  for (int i = 0; i < 250; ++i) code += fmt::format("  y[{}] = x[{}];\n", i, i);
  std::string shown = fence_code_whole(code, "cpp", 400, 1 << 20);
  EXPECT_TRUE(shown.starts_with("```cpp\n  y[0] = x[0];\n")) << shown;
  EXPECT_TRUE(shown.ends_with("  y[249] = x[249];\n```\n")) << shown;
  // Too long by lines or by bytes: no code at all, never a cut kernel.
  for (std::string cut : {fence_code_whole(code, "cpp", 200, 1 << 20), fence_code_whole(code, "cpp", 400, 40)}) {
    EXPECT_EQ(cut.find("```"), std::string::npos) << cut;
    EXPECT_EQ(cut.find("y[0]"), std::string::npos) << cut;
    EXPECT_TRUE(cut.starts_with("(not shown: 250 lines, ")) << cut;
  }
  EXPECT_EQ(fence_code_whole("a;\nb;\n", "c", 200, 100), "```c\na;\nb;\n```\n");
}

// In context mode none no lessons from memory are shown, but a later reflection still sees
// (and may edit) the lessons this task's earlier reflections wrote.
TEST(Loop, TheTasksOwnLessonsAreShownInModeNone) {
  Harness h;
  h.config.mode = context::Mode::none;
  h.config.max_iterations = 2;
  h.answers = {{1, kernel_answer("naive", "wrong_result")}, {2, kernel_answer("fixed", "correct", 500)}};
  memory::LessonDelta other;
  other.lesson.title = "Someone else's lesson";
  other.lesson.text = "Advice from an earlier run that mode none must not show";
  other.lesson.scope.category = "normalization";
  ASSERT_TRUE(h.store.apply(other));
  int reflections = 0;
  h.failure = [&](const std::vector<llm::Message>&, const llm::ChatParams& p) -> std::optional<llm::LlmError> {
    if (p.purpose == "reflect" && ++reflections == 2) {
      std::string id;
      auto all = *h.store.lessons({});
      for (const auto& l : all) {
        if (l.title == "Use row-parallel loops") id = l.id;
      }
      h.reflection = fmt::format(R"({{"lessons": [{{"action": "edit", "id": "{}", "text": "Parallelise over rows with OpenMP; rows are independent and long."}}]}})", id);
    }
    return std::nullopt;
  };
  OpState st;
  ASSERT_TRUE(h.run(st));
  auto prompts = reflection_prompts(h);
  ASSERT_EQ(prompts.size(), 2u);
  EXPECT_NE(prompts[0].find("No lessons from memory are shown"), std::string::npos) << prompts[0];
  EXPECT_EQ(prompts[0].find("Someone else's lesson"), std::string::npos);
  EXPECT_NE(prompts[1].find("Written or voted on by this task's earlier reflections"), std::string::npos) << prompts[1];
  EXPECT_NE(prompts[1].find("Use row-parallel loops"), std::string::npos);
  EXPECT_EQ(prompts[1].find("Someone else's lesson"), std::string::npos) << prompts[1];
  auto deltas = h.store.deltas();
  ASSERT_FALSE(deltas.empty());
  EXPECT_EQ(deltas.back().op, memory::LessonDelta::Op::edit);
  auto end = h.events_of("reflection");
  ASSERT_EQ(end.size(), 2u);
  EXPECT_TRUE(end[1]["problems"].empty()) << end[1].dump();
}

// A lesson the task's own reflection wrote reaches its later kernel prompts, in the hot tier
// ("Learned in this task"), once: not again among the memory items; a lesson of another run
// that the reflection only voted on stays with retrieval. Modes none and random (the
// ablation's controls) show no lesson there.
TEST(Loop, TheTasksOwnLessonsReachItsLaterPrompts) {
  for (auto mode : {context::Mode::active, context::Mode::passive, context::Mode::none, context::Mode::random}) {
    SCOPED_TRACE(context::mode_name(mode));
    Harness h;
    h.config.mode = mode;
    h.config.max_iterations = 4;
    h.answers = {{1, kernel_answer("naive", "wrong_result")},
                 {2, kernel_answer("fixed", "correct", 500)},
                 {3, kernel_answer("faster", "correct", 400)},
                 {4, kernel_answer("same", "correct", 400)}};
    memory::LessonDelta other;
    other.lesson.title = "Someone else's lesson";
    other.lesson.text = "Advice from an earlier run about normalization kernels";
    other.lesson.scope.category = "normalization";
    ASSERT_TRUE(h.store.apply(other));
    std::string other_id = (*h.store.lessons({}))[0].id;
    // The first reflection adds a lesson and upvotes the other run's.
    h.reflection = fmt::format(R"({{"lessons": [{{"action": "add", "kind": "strategy", "title": "Use row-parallel loops",
        "text": "Parallelise over rows with OpenMP; rows are independent."}}, {{"action": "upvote", "id": "{}"}}]}})", other_id);
    OpState st;
    ASSERT_TRUE(h.run(st));
    ASSERT_TRUE(st.reflections.contains("k2"));
    std::string own_id;
    auto lessons = *h.store.lessons({});
    for (const auto& l : lessons) {
      if (l.title == "Use row-parallel loops") own_id = l.id;
    }
    ASSERT_FALSE(own_id.empty());
    std::vector<std::string> kernel_prompts;
    for (const auto& c : h.llm->calls()) {
      if (c.params.purpose != "reflect") kernel_prompts.push_back(c.messages[1].content);
    }
    ASSERT_EQ(kernel_prompts.size(), 4u);
    bool shows = mode == context::Mode::active || mode == context::Mode::passive;
    for (size_t k = 0; k < kernel_prompts.size(); ++k) {
      const std::string& p = kernel_prompts[k];
      size_t section = p.find("## Learned in this task");
      // Before the reflection after attempt 2, there is nothing to show.
      if (!shows || k < 2) {
        EXPECT_EQ(section, std::string::npos) << p;
        continue;
      }
      ASSERT_NE(section, std::string::npos) << p;
      std::string line = "- [lesson " + own_id + " · strategy] Use row-parallel loops: Parallelise over rows";
      EXPECT_NE(p.find(line, section), std::string::npos) << p;
      EXPECT_EQ(p.find("Use row-parallel loops"), p.find(line, section) + line.find("Use")) << "shown once: " << p;
      EXPECT_EQ(p.find("Someone else's lesson", section), std::string::npos) << p;
    }
    if (shows) {
      for (const auto& e : h.events_of("prompt")) {
        if (!e.contains("admitted")) continue;  // a reflection's prompt
        for (const auto& id : e.at("admitted")) EXPECT_NE(id.dump(), "\"lesson:" + own_id + "\"") << e.dump();
      }
    }
  }
}

// A held-out op's reflections do not show lessons drawn from its experience of another run
// (the contamination guard retrieval applies to kernel prompts).
TEST(Loop, ReflectionsLeaveOutLessonsOfAHeldOutOpsEarlierRuns) {
  Harness h;
  h.config.max_iterations = 1;
  memory::CaseRecord earlier;
  earlier.natural_key = "run-old/softmax/1";
  earlier.run_id = "run-old";
  earlier.task = task_info(h.op);
  earlier.hardware.target = "x86_64-avx2-fma";
  earlier.toolchain.id = "g++";
  earlier.verdict = eval::Verdict::correct;
  earlier.speedup_vs_reference = 2;
  earlier.optimisation = "rows";
  int64_t earlier_id = *h.store.record_case(earlier);
  memory::LessonDelta held;
  held.lesson.title = "Held-out advice";
  held.lesson.text = "Advice distilled from softmax itself in an earlier run";
  held.lesson.scope.category = "normalization";
  held.source_case = earlier_id;
  ASSERT_TRUE(h.store.apply(held));
  memory::LessonDelta general;
  general.lesson.title = "General advice";
  general.lesson.text = "Advice about normalization kernels from other ops";
  general.lesson.scope.category = "normalization";
  ASSERT_TRUE(h.store.apply(general));
  OpEnvironment env = h.env();
  env.holdout.ops = {"softmax"};
  env.holdout.run_id = h.run_id;
  OpState st;
  ASSERT_TRUE(run_op(env, h.op, st));
  auto prompts = reflection_prompts(h);
  ASSERT_EQ(prompts.size(), 1u);
  EXPECT_NE(prompts[0].find("General advice"), std::string::npos) << prompts[0];
  EXPECT_EQ(prompts[0].find("Held-out advice"), std::string::npos) << prompts[0];
  // Without the guard it is shown.
  Harness open;
  open.config.max_iterations = 1;
  int64_t id = *open.store.record_case(earlier);
  held.source_case = id;
  ASSERT_TRUE(open.store.apply(held));
  OpState st2;
  ASSERT_TRUE(open.run(st2));
  EXPECT_NE(reflection_prompts(open).at(0).find("Held-out advice"), std::string::npos);
}

TEST(Loop, ReflectionCanBeSwitchedOff) {
  Harness h;
  h.config.reflect = false;
  h.answers = {{1, kernel_answer("naive", "wrong_result")}, {2, kernel_answer("fixed", "correct", 500)}};
  OpState st;
  ASSERT_TRUE(h.run(st));
  EXPECT_EQ(h.reflect_calls(), 0);
  EXPECT_TRUE(h.store.deltas().empty());
}

TEST(Loop, ValuesAreCreditedAfterOutcomes) {
  Harness h;
  memory::LessonDelta add;
  add.lesson.title = "Subtract the row max";
  add.lesson.text = "Softmax overflows without subtracting the row max first.";
  add.lesson.scope.category = "normalization";
  std::string id = *h.store.apply(add);
  h.config.max_iterations = 2;
  h.config.reflect = false;
  h.answers = {{1, kernel_answer("a", "wrong_result")}, {2, kernel_answer("b", "correct", 500)}};
  OpState st;
  ASSERT_TRUE(h.run(st));
  auto credited = h.store.credited();
  ASSERT_EQ(credited.size(), 2u);
  EXPECT_DOUBLE_EQ(credited["run-test/softmax/1"], 0.25);  // draft: compiled and ran, but wrong
  EXPECT_DOUBLE_EQ(credited["run-test/softmax/2"], 1.0);   // repair: correct
  auto log = h.store.retrieval_log();
  ASSERT_EQ(log.size(), 2u);
  EXPECT_EQ(log[0].case_id, h.store.all_cases()[0].id);
  EXPECT_GT(log[0].tier_tokens.at("hot"), 0);
  bool used = false;
  for (const auto& [item, score] : log[0].items) used = used || item == "lesson:" + id;
  EXPECT_TRUE(used);
  auto lessons = *h.store.lessons({});
  // Each stage's value moved toward its reward.
  EXPECT_NEAR(lessons[0].value.at("draft"), 0.3 * 0.25, 1e-12);
  EXPECT_NEAR(lessons[0].value.at("repair"), 0.3 * 1.0, 1e-12);
}

TEST(Loop, ContextLengthShrinksTheKnowledgeAndRetries) {
  Harness h;
  for (int i = 0; i < 20; ++i) {
    memory::LessonDelta add;
    add.lesson.title = fmt::format("lesson {}", i);
    add.lesson.text = std::string(400, 'a' + i % 26);
    add.lesson.scope.category = "normalization";
    ASSERT_TRUE(h.store.apply(add));
  }
  h.config.max_iterations = 1;
  h.config.reflect = false;
  int refusals = 0;
  h.failure = [&](const std::vector<llm::Message>& m, const llm::ChatParams&) -> std::optional<llm::LlmError> {
    if (m[1].content.find("Lessons learned") != std::string::npos && refusals < 5) {
      ++refusals;
      return llm_error(llm::FailureClass::context_length, "too long", 400);
    }
    return std::nullopt;
  };
  OpState st;
  auto end = h.run(st);
  ASSERT_TRUE(end) << end.error().message;
  EXPECT_EQ(st.attempts.size(), 1u);
  auto prompts = h.events_of("prompt");
  ASSERT_GE(prompts.size(), 2u);
  EXPECT_GT(prompts[0]["tier_tokens"]["warm"].get<int64_t>(), 0);
  EXPECT_LT(prompts.back()["shrink"].get<double>(), 1.0);
  EXPECT_LT(prompts.back()["tier_tokens"]["warm"].get<int64_t>(), prompts[0]["tier_tokens"]["warm"].get<int64_t>());
  EXPECT_FALSE(h.events_of("llm_error").empty());
}

TEST(Loop, TransientFailuresBackOffThenGiveUpWithoutAnAttempt) {
  Harness h;
  int failures = 0;
  h.failure = [&](const std::vector<llm::Message>&, const llm::ChatParams&) -> std::optional<llm::LlmError> {
    if (failures++ < 2) return llm_error(llm::FailureClass::rate_limited, "slow down", 429);
    return std::nullopt;
  };
  h.config.max_iterations = 1;
  OpState st;
  ASSERT_TRUE(h.run(st));
  EXPECT_EQ(st.attempts.size(), 1u);  // two back-offs, then it answered

  Harness down;
  down.failure = [](const std::vector<llm::Message>&, const llm::ChatParams&) -> std::optional<llm::LlmError> {
    return llm_error(llm::FailureClass::server_error, "503", 503);
  };
  OpState st2;
  auto end = down.run(st2);
  ASSERT_TRUE(end);
  EXPECT_EQ(*end, OpEnd::llm_unavailable);
  EXPECT_TRUE(st2.attempts.empty());
  EXPECT_FALSE(st2.done);
  EXPECT_TRUE(down.store.all_cases().empty());
  EXPECT_EQ(down.events_of("op_stopped").size(), 1u);

  Harness denied;
  denied.failure = [](const std::vector<llm::Message>&, const llm::ChatParams&) -> std::optional<llm::LlmError> {
    return llm_error(llm::FailureClass::unauthorized, "bad key", 401);
  };
  OpState st3;
  auto err = denied.run(st3);
  ASSERT_FALSE(err);
  EXPECT_EQ(err.error().kind, ErrorKind::remote);
}

TEST(Loop, ContentFilteredCountsAsAnAnswerWithoutCode) {
  Harness h;
  h.config.max_iterations = 1;
  h.failure = [](const std::vector<llm::Message>&, const llm::ChatParams& p) -> std::optional<llm::LlmError> {
    if (p.purpose == "reflect") return std::nullopt;
    return llm_error(llm::FailureClass::content_filtered, "refused", 200);
  };
  OpState st;
  ASSERT_TRUE(h.run(st));
  ASSERT_EQ(st.attempts.size(), 1u);
  EXPECT_NE(st.attempts[0].message.find("content_filtered"), std::string::npos);
}

TEST(Loop, CancelStopsBeforeTheNextIteration) {
  Harness h;
  h.cancel = true;
  OpState st;
  auto end = h.run(st);
  ASSERT_TRUE(end);
  EXPECT_EQ(*end, OpEnd::cancelled);
  EXPECT_TRUE(st.attempts.empty());
  EXPECT_FALSE(st.done);
}

TEST(Loop, PassiveAndNoneModes) {
  for (auto mode : {context::Mode::none, context::Mode::passive, context::Mode::active}) {
    Harness h;
    for (int i = 0; i < 8; ++i) {
      memory::LessonDelta add;
      add.lesson.title = fmt::format("lesson {}", i);
      add.lesson.text = fmt::format("Distinct advice number {} about {} kernels", i, i % 2 ? "row" : "column");
      add.lesson.scope.category = i < 4 ? "normalization" : "";
      ASSERT_TRUE(h.store.apply(add));
    }
    h.config.mode = mode;
    h.config.max_iterations = 2;
    h.config.reflect = false;
    OpState st;
    ASSERT_TRUE(h.run(st));
    for (const auto& p : h.events_of("prompt")) {
      int64_t warm = p["tier_tokens"]["warm"], cold = p["tier_tokens"]["cold"];
      EXPECT_LE(p["total_tokens"].get<int64_t>(), p["limit"].get<int64_t>());
      if (mode == context::Mode::none) {
        EXPECT_EQ(warm, 0);
        EXPECT_EQ(cold, 0);
      } else {
        EXPECT_GT(warm, 0) << context::mode_name(mode);
        EXPECT_LE(warm + cold, p["knowledge_budget"].get<int64_t>() + (mode == context::Mode::passive ? 1000000 : 0));
      }
      if (mode == context::Mode::passive) {
        // Everything relevant fits this window: every lesson is in.
        int lessons = 0;
        for (const auto& id : p["admitted"]) lessons += id.get<std::string>().starts_with("lesson:");
        EXPECT_EQ(lessons, 8);
      }
    }
    if (mode == context::Mode::none) {
      EXPECT_TRUE(h.store.retrieval_log()[0].items.empty());
    }
  }
}

// A kernel another machine recorded as correct for `op`, whose code the fake evaluator judges
// `here` (its verdict on this machine).
int64_t record_replayable(Harness& h, const spec::OpSpec& op, const std::string& target, double time, const std::string& opt,
                          const std::string& toolchain, const std::string& here = "correct") {
  memory::CaseRecord c;
  c.natural_key = "other/" + op.name + "/" + opt;
  c.run_id = "other";
  c.task = task_info(op);
  c.hardware.target = target;
  c.toolchain.id = toolchain;
  c.verdict = eval::Verdict::correct;
  c.speedup_vs_reference = 1000 / time;
  c.optimisation = opt;
  std::string answer = testing::kernel_answer(opt, here, time);
  c.code = answer.substr(answer.find("// fake"));
  c.code = c.code.substr(0, c.code.find("```"));
  return *h.store.record_case(c);
}

// Replays h.op (softmax) with no model; the attempts are in the returned state.
OpState run_replay(Harness& h) {
  h.config.policy = Policy::replay;
  h.llm.reset();
  OpState st;
  auto end = run_op(h.env(), h.op, st);
  EXPECT_TRUE(end) << end.error().message;
  return st;
}

TEST(Loop, ReplayReverifiesKernelsFromMemory) {
  Harness h;
  auto twin_dir = util::TempDir::create("kope-twin");
  spec::OpSpec twin = testing::make_twin(twin_dir->path(), "softmax_twin", "normalization");
  h.known_ops = {&twin};
  // Another machine recorded a kernel for softmax itself; this machine one for the twin (same
  // signature, another op).
  int64_t own = record_replayable(h, h.op, "x86_64-avx512", 250, "from another machine", "g++ other");
  record_replayable(h, twin, "x86_64-avx2-fma", 400, "twin kernel", h.evaluator.toolchain_id());
  h.config.replay_limit = 3;
  OpState st = run_replay(h);
  // The op's own kernel, re-verified and re-timed here, answers it: replay stops there, and the
  // twin's kernel is never tried (native or not, it is another op's).
  ASSERT_EQ(st.attempts.size(), 1u);
  EXPECT_EQ(st.stop_reason, "replay_verified");
  EXPECT_EQ(h.evaluator.calls(), 1);
  const Attempt& a = st.attempts[0];
  EXPECT_EQ(a.policy, Policy::replay);
  EXPECT_EQ(a.tokens_prompt + a.tokens_completion, 0);
  EXPECT_TRUE(a.correct());
  EXPECT_TRUE(a.improved);
  EXPECT_EQ(a.source_case_id, own);
  auto cases = h.store.all_cases();
  ASSERT_EQ(cases.size(), 3u);
  EXPECT_EQ(cases[2].parent_id, own);
  EXPECT_EQ(cases[2].task.op, "softmax");
  EXPECT_EQ(cases[2].hardware.target, "x86_64-avx2-fma");
  // r for a replay: speedup here / speedup at the source (4.0 / 4.0).
  EXPECT_NEAR(*a.speedup_vs_parent, 1.0, 1e-9);
}

// The best kernel first; the next one only when it fails here (a failure is recorded as such and
// never becomes the incumbent); --replay-all goes on to the limit. Never another op's kernel
// while the op has kernels of its own, even a native one.
TEST(Loop, ReplayTriesTheNextKernelOnlyWhenOneFailsHere) {
  for (bool all : {false, true}) {
    SCOPED_TRACE(all ? "replay_all" : "default");
    Harness h;
    auto twin_dir = util::TempDir::create("kope-twin");
    spec::OpSpec twin = testing::make_twin(twin_dir->path(), "softmax_twin", "normalization");
    h.known_ops = {&twin};
    int64_t best = record_replayable(h, h.op, "x86_64-avx512", 200, "best there", "g++ other", "wrong_result");
    int64_t next = record_replayable(h, h.op, "x86_64-avx512", 250, "second there", "g++ other");
    int64_t third = record_replayable(h, h.op, "x86_64-avx512", 300, "third there", "g++ other");
    record_replayable(h, twin, "x86_64-avx2-fma", 100, "twin kernel", h.evaluator.toolchain_id());
    h.config.replay_limit = 3;
    h.config.replay_all = all;
    OpState st = run_replay(h);
    std::vector<int64_t> sources;
    for (const auto& a : st.attempts) sources.push_back(a.source_case_id.value_or(0));
    if (all) {
      EXPECT_EQ(sources, (std::vector<int64_t>{best, next, third}));
      EXPECT_EQ(st.stop_reason, "iterations");
    } else {
      EXPECT_EQ(sources, (std::vector<int64_t>{best, next}));
      EXPECT_EQ(st.stop_reason, "replay_verified");
    }
    EXPECT_EQ(h.evaluator.calls(), static_cast<int>(sources.size()));
    ASSERT_GE(st.attempts.size(), 2u);
    EXPECT_EQ(st.attempts[0].verdict, eval::Verdict::wrong_result);
    EXPECT_FALSE(st.attempts[0].improved);
    EXPECT_TRUE(st.attempts[1].improved);
    ASSERT_NE(st.incumbent(), nullptr);
    EXPECT_NE(st.incumbent()->source_case_id, best);
  }
}

// Under --isa x86-64-v3 on an AVX-512 CPU the run's target is an AVX2 host's: a kernel recorded
// on an AVX2 host (which runs here) is replayed before a faster one recorded on an AVX-512 host.
TEST(Loop, ReplayPrefersKernelsOfATargetThatRunsHere) {
  Harness h;
  ASSERT_EQ(h.evaluator.target().str(), "x86_64-avx2-fma");
  record_replayable(h, h.op, "x86_64-avx2-fma-avx512-avx512vnni-avx512bf16", 100, "avx512 kernel", "g++ other");
  int64_t avx2 = record_replayable(h, h.op, "x86_64-avx2-fma", 300, "avx2 kernel", "g++ avx2 host");
  OpState st = run_replay(h);
  ASSERT_EQ(st.attempts.size(), 1u);
  EXPECT_EQ(st.attempts[0].source_case_id, avx2);
  EXPECT_EQ(st.stop_reason, "replay_verified");
}

// On an AVX-512 host, of two kernels recorded elsewhere that both run here, the AVX-512 one is
// replayed before an AVX2 one, even one recorded as faster at its source (issue 31: replay picks
// the highest level the machine runs).
TEST(Loop, ReplayPrefersTheHighestLevelThatRunsHere) {
  Harness h(fakes::FakeEvaluator::Config{.target = "x86_64-avx2-fma-avx512-avx512vnni-avx512bf16", .hardware = testing::fake_hw()});
  ASSERT_EQ(h.evaluator.target().str(), "x86_64-avx2-fma-avx512-avx512vnni-avx512bf16");
  record_replayable(h, h.op, "x86_64-avx2-fma", 100, "avx2 kernel", "g++ avx2 host");
  int64_t avx512 = record_replayable(h, h.op, "x86_64-avx2-fma-avx512", 300, "avx512 kernel", "g++ avx512 host");
  record_replayable(h, h.op, "x86_64-avx2-fma-avx512-amx", 50, "amx kernel", "g++ amx host");  // does not run here
  OpState st = run_replay(h);
  ASSERT_EQ(st.attempts.size(), 1u);
  EXPECT_EQ(st.attempts[0].source_case_id, avx512);
  EXPECT_EQ(st.stop_reason, "replay_verified");
}

// A replayed kernel below 0.9x the library here does not end the op: the next candidate is
// tried and kept when it is faster. One above it ends it at once.
TEST(Loop, ReplayTriesTheNextKernelWhenOneTrailsTheLibraryHere) {
  for (double first_us : {1000.0, 842.0, 500.0}) {  // the fake library takes 800 us: 0.8x, 0.95x, 1.6x
    SCOPED_TRACE(first_us);
    Harness h(fakes::FakeEvaluator::Config{.target = "x86_64-avx2-fma-avx512-avx512vnni-avx512bf16", .hardware = testing::fake_hw()});
    int64_t avx512 = record_replayable(h, h.op, "x86_64-avx2-fma-avx512", first_us, "avx512 kernel", "g++ avx512 host");
    int64_t avx2 = record_replayable(h, h.op, "x86_64-avx2-fma", 400, "avx2 kernel", "g++ avx2 host");
    OpState st = run_replay(h);
    ASSERT_FALSE(st.attempts.empty());
    EXPECT_EQ(st.attempts[0].source_case_id, avx512);
    if (800 / first_us < k_replay_library_floor) {
      ASSERT_EQ(st.attempts.size(), 2u);
      EXPECT_EQ(st.attempts[1].source_case_id, avx2);
      ASSERT_NE(st.incumbent(), nullptr);
      EXPECT_EQ(st.incumbent()->source_case_id, avx2);
      EXPECT_NEAR(*st.incumbent()->speedup_vs_library, 2.0, 1e-9);
    } else {
      ASSERT_EQ(st.attempts.size(), 1u);
      EXPECT_EQ(st.stop_reason, "replay_verified");
    }
  }
}

// Nor does a kernel slower than the reference here end the replay, even when the library is
// slower still (oneDNN's 2x2 max pooling is, here).
TEST(Loop, ReplayTriesTheNextKernelWhenOneTrailsTheReferenceHere) {
  Harness h(fakes::FakeEvaluator::Config{.reference_us = 1000, .library_us = 2000,
                                         .target = "x86_64-avx2-fma-avx512-avx512vnni-avx512bf16", .hardware = testing::fake_hw()});
  int64_t avx512 = record_replayable(h, h.op, "x86_64-avx2-fma-avx512", 1400, "avx512 kernel", "g++ avx512 host");
  int64_t avx2 = record_replayable(h, h.op, "x86_64-avx2-fma", 500, "avx2 kernel", "g++ avx2 host");
  OpState st = run_replay(h);
  ASSERT_EQ(st.attempts.size(), 2u);  // 1.43x the library, but 0.71x the reference
  EXPECT_EQ(st.attempts[0].source_case_id, avx512);
  EXPECT_EQ(st.attempts[1].source_case_id, avx2);
  ASSERT_NE(st.incumbent(), nullptr);
  EXPECT_EQ(st.incumbent()->source_case_id, avx2);
}

// An op memory holds no kernel of its own for may try another op's kernel with the same
// parameter types (re-verified here like any other).
TEST(Loop, ReplayTriesAnotherOpsKernelOnlyForAnOpWithoutItsOwn) {
  Harness h;
  auto twin_dir = util::TempDir::create("kope-twin");
  spec::OpSpec twin = testing::make_twin(twin_dir->path(), "softmax_twin", "normalization");
  h.known_ops = {&twin};
  int64_t related = record_replayable(h, twin, "x86_64-avx2-fma", 400, "twin kernel", h.evaluator.toolchain_id());
  OpState st = run_replay(h);
  ASSERT_EQ(st.attempts.size(), 1u);
  EXPECT_EQ(st.attempts[0].source_case_id, related);
  EXPECT_TRUE(st.attempts[0].correct());
  EXPECT_EQ(h.store.all_cases().back().task.op, "softmax");
}

// Resuming from a log cut at every possible point gives the straight run's attempts, asks the
// model only for what was not answered, and never duplicates a case in memory.
TEST(Loop, ResumeFromAnyCutPointMatchesTheStraightRun) {
  auto configure = [](Harness& h) {
    h.answers = {{1, kernel_answer("naive", "compile_error")},
                 {2, kernel_answer("fixed", "correct", 500)},
                 {3, kernel_answer("faster", "correct", 200)},
                 {4, kernel_answer("slower", "correct", 300)}};
    h.config.max_iterations = 4;
  };
  Harness straight;
  configure(straight);
  OpState ref;
  ASSERT_TRUE(straight.run(ref));
  auto lines = util::split(*util::read_file(straight.dir->path() / "events.jsonl"), '\n');
  size_t n = lines.size();
  for (size_t cut = 0; cut < n; ++cut) {
    SCOPED_TRACE(fmt::format("cut after {} events", cut));
    Harness h;
    configure(h);
    // The killed run's files: the log up to the cut plus a torn line, and its answers/candidates.
    std::string log;
    for (size_t i = 0; i < cut; ++i) log += lines[i] + "\n";
    if (cut + 1 < n) log += lines[cut].substr(0, lines[cut].size() / 2);
    h.events.reset();
    ASSERT_TRUE(util::write_file_atomic(h.dir->path() / "events.jsonl", log));
    std::filesystem::copy(straight.dir->path() / "candidates", h.dir->path() / "candidates",
                          std::filesystem::copy_options::recursive);
    auto events = read_events(h.dir->path() / "events.jsonl");
    ASSERT_TRUE(events);
    // Memory as the killed run left it: every case whose attempt was logged (a kill may land
    // between record_case and the "recorded" event).
    auto states = restore_states(*events);
    ASSERT_TRUE(states);
    for (const auto& c : straight.store.all_cases()) {
      int k = std::stoi(c.natural_key.substr(c.natural_key.rfind('/') + 1));
      if ((*states)["softmax"].attempts.size() >= static_cast<size_t>(k)) {
        memory::CaseRecord copy = c;
        ASSERT_TRUE(h.store.record_case(copy));
      }
    }
    // Lessons a logged reflection wrote (a kill may land between applying and logging that).
    for (const auto& e : *events) {
      if (e.value("type", "") != "reflection") continue;
      for (const auto& d : e["deltas"]) {
        auto delta = *delta_from_json(d);
        bool present = false;
        auto lessons = *h.store.lessons({});
        for (const auto& l : lessons) present = present || (l.title == delta.lesson.title && l.text == delta.lesson.text);
        if (!present) {
          ASSERT_TRUE(h.store.apply(delta));
        }
      }
    }
    h.events = std::move(*EventLog::open(h.dir->path() / "events.jsonl"));
    OpState st = (*states)["softmax"];
    auto end = h.run(st);
    ASSERT_TRUE(end) << end.error().message;
    ASSERT_EQ(st.attempts.size(), ref.attempts.size());
    for (size_t i = 0; i < ref.attempts.size(); ++i) {
      EXPECT_EQ(st.attempts[i].verdict, ref.attempts[i].verdict);
      EXPECT_EQ(st.attempts[i].stage, ref.attempts[i].stage);
      EXPECT_EQ(st.attempts[i].parent_iteration, ref.attempts[i].parent_iteration);
      EXPECT_EQ(st.attempts[i].improved, ref.attempts[i].improved);
      EXPECT_EQ(st.attempts[i].outcome, ref.attempts[i].outcome);
      EXPECT_EQ(st.attempts[i].tokens_completion, ref.attempts[i].tokens_completion);
    }
    EXPECT_EQ(st.tokens_completion(), ref.tokens_completion());
    EXPECT_EQ(h.store.all_cases().size(), straight.store.all_cases().size());
    auto cases = h.store.all_cases();
    for (size_t i = 0; i < cases.size(); ++i) EXPECT_EQ(cases[i].parent_id, straight.store.all_cases()[i].parent_id);
    EXPECT_EQ(h.store.lessons({})->size(), straight.store.lessons({})->size());
    // Answers already in the log were not asked for again.
    int answered_before = 0;
    for (const auto& e : *events) answered_before += e.value("type", "") == "answer";
    EXPECT_EQ(h.kernel_calls(), straight.kernel_calls() - answered_before);
    EXPECT_TRUE(st.done);
  }
}

TEST(Loop, TheTaskCarriesTheTypedSignatureShape) {
  // silu_bf16: the C types say uint16_t; the shape comes from the spec, so it says bf16.
  auto op = spec::load_op(std::filesystem::path(KOPE_SOURCE_DIR) / "ops/elementwise/silu_bf16");
  ASSERT_TRUE(op) << op.error().message;
  memory::TaskInfo t = task_info(*op);
  ASSERT_TRUE(t.signature_shape);
  EXPECT_EQ(t.signature_shape->str(), "in:bf16,out:bf16,dim,dim");
  EXPECT_EQ(*t.signature_shape, spec::signature_shape(*op));
  EXPECT_EQ(t.signature, spec::render_signature(*op));
}

TEST(Loop, DeltaJsonRoundTrip) {
  memory::LessonDelta d;
  d.op = memory::LessonDelta::Op::add;
  d.lesson.kind = memory::LessonKind::fix;
  d.lesson.title = "t";
  d.lesson.text = "x";
  d.lesson.error_signature = "sig";
  d.lesson.scope = {"normalization", "cpu", "x86_64", "g++"};
  d.reason = "r";
  d.source_case = 3;
  auto back = delta_from_json(delta_to_json(d));
  ASSERT_TRUE(back);
  EXPECT_EQ(back->lesson.kind, memory::LessonKind::fix);
  EXPECT_EQ(back->lesson.scope.target, "x86_64");
  EXPECT_EQ(back->source_case, 3);
}

}  // namespace
}  // namespace kope::agent

namespace kope::agent {
namespace {

TEST(Loop, RewardsFollowTheMemorysStageRewards) {
  Attempt a;
  a.stage = memory::Stage::draft;
  a.verdict = eval::Verdict::correct;
  EXPECT_EQ(reward_for(a), 1.0);
  a.verdict = eval::Verdict::timeout;
  EXPECT_EQ(reward_for(a), 0.25);
  a.verdict = eval::Verdict::compile_error;
  EXPECT_EQ(reward_for(a), 0.0);
  a.stage = memory::Stage::refine;
  EXPECT_EQ(reward_for(a), -1.0);
  a.verdict = eval::Verdict::correct;
  a.speedup_vs_parent = 2.0;
  EXPECT_NEAR(reward_for(a), std::log(2.0), 1e-12);
  a.speedup_vs_parent = 100.0;
  EXPECT_EQ(reward_for(a), 1.0);
  a.speedup_vs_parent = 0.5;
  EXPECT_NEAR(reward_for(a), std::log(0.5), 1e-12);
}

// A kernel answer whose timings the FakeEvaluator reports with this contention per evaluation.
std::string disturbed_answer(const std::string& optimisation, double time_us, const std::string& contention) {
  std::string a = kernel_answer(optimisation, "correct", time_us);
  return util::replace_all(a, "// fake-time-us:", "// fake-contention: " + contention + "\n// fake-time-us:");
}

// With fast verdicts the evaluator times the candidate against the incumbent and its decision is
// the rule; a clearly slower candidate keeps the comparison's early figures, marked as such, and
// its speedup vs the parent is the measured ratio. Without, the recorded timings decide.
TEST(Loop, FastVerdictDecidesAgainstTheIncumbent) {
  for (bool fast : {true, false}) {
    Harness h;
    h.config.max_iterations = 3;
    h.config.fast_verdict = fast;
    h.answers = {{1, kernel_answer("a", "correct", 500)}, {2, kernel_answer("b", "correct", 550)}, {3, kernel_answer("c", "correct", 400)}};
    OpState st;
    ASSERT_TRUE(h.run(st));
    ASSERT_EQ(st.attempts.size(), 3u);
    EXPECT_EQ(st.attempts[0].decision, run::Decision::none);  // nothing to beat
    const Attempt& slower = st.attempts[1];
    const Attempt& faster = st.attempts[2];
    EXPECT_FALSE(slower.improved);
    EXPECT_TRUE(faster.improved);
    EXPECT_NEAR(*slower.speedup_vs_incumbent, 500.0 / 550, 1e-9);
    EXPECT_NEAR(*slower.speedup_vs_parent, 500.0 / 550, 1e-9);
    EXPECT_EQ(slower.outcome, memory::Outcome::ineffective);
    EXPECT_NEAR(*faster.speedup_vs_incumbent, 1.25, 1e-9);
    if (fast) {
      EXPECT_EQ(slower.decision, run::Decision::slower);
      EXPECT_TRUE(slower.early_figures);
      EXPECT_NEAR(*slower.decision_upper, 500.0 / 550 * 1.01, 1e-9);
      EXPECT_EQ(slower.decision_pairs, 12 * static_cast<int>(h.op.timed_cases().size()));
      EXPECT_NE(slower.journal.find("early figures"), std::string::npos) << slower.journal;
      EXPECT_EQ(faster.decision, run::Decision::faster);
      EXPECT_FALSE(faster.early_figures);
      EXPECT_NE(faster.journal.find("alternating batches: faster_than_incumbent"), std::string::npos) << faster.journal;
      // The incumbent's source went to the evaluator with each later candidate.
      auto json = to_json(slower);
      EXPECT_EQ(json["incumbent_decision"]["decision"], "slower_than_incumbent");
      auto back = attempt_from_json(json);
      ASSERT_TRUE(back);
      EXPECT_EQ(back->decision, slower.decision);
      EXPECT_EQ(back->early_figures, true);
      EXPECT_EQ(back->decision_upper, slower.decision_upper);
    } else {
      EXPECT_EQ(slower.decision, run::Decision::recorded_timings);
      EXPECT_FALSE(slower.early_figures);
      EXPECT_NE(slower.journal.find("recorded timings"), std::string::npos) << slower.journal;
    }
    EXPECT_EQ(h.evaluator.calls(), 3);
  }
}

// A replacement resting on disturbed timing is re-timed once; a clean re-time decides.
TEST(Loop, DisturbedEvidenceIsRetimedOnce) {
  for (bool fast : {true, false}) {
    Harness h;
    h.config.max_iterations = 2;
    h.config.fast_verdict = fast;
    h.answers = {{1, kernel_answer("a", "correct", 500)}, {2, disturbed_answer("b", 400, "0.3, 0")}};
    OpState st;
    ASSERT_TRUE(h.run(st));
    ASSERT_EQ(st.attempts.size(), 2u);
    const Attempt& b = st.attempts[1];
    EXPECT_TRUE(b.retimed);
    EXPECT_FALSE(b.evidence_disturbed);
    EXPECT_TRUE(b.improved);
    EXPECT_FALSE(b.margin_demanded);
    EXPECT_EQ(h.evaluator.calls(), 3);
    auto retimes = h.events_of("retime");
    ASSERT_EQ(retimes.size(), 1u);
    EXPECT_EQ(retimes[0]["iteration"], 2);
    EXPECT_NEAR(retimes[0]["contention"].get<double>(), 0.3, 1e-9);
    EXPECT_NE(b.journal.find("timed once more"), std::string::npos) << b.journal;
  }
}

// Issue 29: a clear side-by-side win whose waits are the kernels' own (no outside load beside
// the comparison) replaces the incumbent at once: no re-time, no raised margin, and the attempt
// and its feedback name the rule that decided.
TEST(Loop, OwnWaitsDoNotRaiseTheMargin) {
  Harness h;
  h.config.max_iterations = 2;
  h.config.fast_verdict = true;
  std::string own = util::replace_all(disturbed_answer("b", 400, "0.36"), "// fake-time-us:", "// fake-outside-load: 0\n// fake-time-us:");
  h.answers = {{1, kernel_answer("a", "correct", 500)}, {2, own}};
  OpState st;
  ASSERT_TRUE(h.run(st));
  ASSERT_EQ(st.attempts.size(), 2u);
  const Attempt& b = st.attempts[1];
  EXPECT_EQ(b.decision, run::Decision::faster);
  EXPECT_TRUE(b.improved) << b.journal;
  EXPECT_FALSE(b.retimed);
  EXPECT_FALSE(b.margin_demanded);
  EXPECT_EQ(b.decided_by, eval::ReplacementRule::side_by_side);  // not disturbed: the waits were its own
  EXPECT_TRUE(h.events_of("retime").empty());
  ASSERT_FALSE(b.timings.empty());
  EXPECT_NEAR(b.timings[0].side_ratio.value_or(0), 1.25, 1e-9);
  EXPECT_NEAR(b.timings[0].side_incumbent_us.value_or(0), 500, 1e-9);
  auto back = attempt_from_json(to_json(b));
  ASSERT_TRUE(back);
  EXPECT_EQ(back->decided_by, eval::ReplacementRule::side_by_side);
  EXPECT_EQ(back->timings[0].side_candidate_us, b.timings[0].side_candidate_us);
  EXPECT_NE(render_feedback(b, &st.attempts[0]).find("Decided by the rule `side_by_side`"), std::string::npos);
}

// Disturbed again after the re-time: only a margin beyond the disturbance replaces the
// incumbent. 25% faster with 30% contention is not enough ((1.01 / 0.7) = 1.44x needed); 2x is.
TEST(Loop, DisturbedEvidenceAloneDoesNotReplaceTheIncumbent) {
  for (bool fast : {true, false}) {
    Harness h;
    h.config.max_iterations = 4;
    h.config.fast_verdict = fast;
    h.answers = {{1, kernel_answer("a", "correct", 500)},
                 {2, disturbed_answer("b", 400, "0.3")},
                 {3, disturbed_answer("c", 250, "0.3")},
                 {4, disturbed_answer("d", 300, "0.3")}};  // slower than c: no re-time at all
    OpState st;
    ASSERT_TRUE(h.run(st));
    ASSERT_EQ(st.attempts.size(), 4u);
    const Attempt& b = st.attempts[1];
    EXPECT_TRUE(b.retimed);
    EXPECT_TRUE(b.evidence_disturbed);
    EXPECT_FALSE(b.improved) << b.journal;
    ASSERT_TRUE(b.margin_demanded);
    EXPECT_NEAR(*b.margin_demanded, 1.01 / 0.7, 1e-9);
    EXPECT_EQ(b.decided_by, eval::ReplacementRule::raised_margin);
    EXPECT_NE(b.journal.find("so the incumbent stays"), std::string::npos) << b.journal;
    const Attempt& c = st.attempts[2];
    EXPECT_TRUE(c.retimed);
    EXPECT_TRUE(c.improved) << c.journal;
    EXPECT_TRUE(c.margin_demanded);
    EXPECT_NE(c.journal.find("which it had"), std::string::npos) << c.journal;
    const Attempt& d = st.attempts[3];
    EXPECT_FALSE(d.retimed);
    EXPECT_FALSE(d.improved);
    EXPECT_EQ(st.incumbent()->iteration, 3);
    EXPECT_EQ(h.events_of("retime").size(), 2u);
    EXPECT_EQ(h.evaluator.calls(), 6);
    // The decision's evidence is in the logged attempt.
    bool found = false;
    for (const auto& e : h.events_of("attempt")) {
      if (e["attempt"]["iteration"] == 2) {
        found = true;
        EXPECT_TRUE(e["attempt"]["incumbent_decision"]["disturbed"].get<bool>());
        EXPECT_TRUE(e["attempt"]["incumbent_decision"]["retimed"].get<bool>());
        EXPECT_FALSE(e["attempt"]["incumbent_decision"]["margin_demanded"].is_null());
      }
    }
    EXPECT_TRUE(found);
  }
}

}  // namespace
}  // namespace kope::agent
