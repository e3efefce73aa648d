#include "agent/reflect.h"

#include <filesystem>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "agent/prompt_check.h"
#include "agent/test_support.h"

namespace kope::agent {
namespace {

LessonContext ctx() {
  LessonContext c;
  c.category = "normalization";
  c.backend = "cpu";
  c.target = "x86_64-avx2-fma";
  c.toolchain = "g++ 12";
  c.known_ids = {"L0001aaaa"};
  c.source_case = 7;
  c.reason = "reflection";
  return c;
}

using Op = memory::LessonDelta::Op;

TEST(ParseLessons, PlainObject) {
  auto p = parse_lessons(R"({"lessons": [
    {"action": "add", "kind": "fix", "title": "Tail loop", "text": "Handle D % 8 with a scalar tail.",
     "error_signature": "wrong_result: y[16]", "scope": "category"},
    {"action": "upvote", "id": "L0001aaaa", "reason": "it worked again"}]})",
                         ctx());
  ASSERT_TRUE(p.parsed);
  ASSERT_EQ(p.deltas.size(), 2u);
  EXPECT_EQ(p.deltas[0].op, Op::add);
  EXPECT_EQ(p.deltas[0].lesson.kind, memory::LessonKind::fix);
  EXPECT_EQ(p.deltas[0].lesson.scope.category, "normalization");
  EXPECT_EQ(p.deltas[0].lesson.scope.backend, "cpu");
  EXPECT_EQ(p.deltas[0].lesson.scope.target, "");
  EXPECT_EQ(p.deltas[0].lesson.error_signature, "wrong_result: y[16]");
  EXPECT_EQ(p.deltas[0].source_case, 7);
  EXPECT_EQ(p.deltas[1].op, Op::upvote);
  EXPECT_EQ(p.deltas[1].lesson_id, "L0001aaaa");
  EXPECT_NE(p.deltas[1].reason.find("it worked again"), std::string::npos);
}

TEST(ParseLessons, LenientSyntax) {
  // Fenced, prose around it, comments, trailing commas, "op" instead of "action", lesson: prefix.
  auto p = parse_lessons("Here are my lessons:\n```json\n{\"lessons\": [\n"
                         "  // the main one\n"
                         "  {\"op\": \"add\", \"title\": \"Fuse passes\", \"text\": \"Read x once.\", \"scope\": \"target\",},\n"
                         "  {\"op\": \"downvote\", \"id\": \"lesson:L0001aaaa\"},\n"
                         "]}\n```\nHope this helps.",
                         ctx());
  ASSERT_TRUE(p.parsed);
  ASSERT_EQ(p.deltas.size(), 2u);
  EXPECT_EQ(p.deltas[0].lesson.scope.target, "x86_64-avx2-fma");
  EXPECT_EQ(p.deltas[1].op, Op::downvote);
  auto bare = parse_lessons(R"([{"action": "add", "text": "A bare array works too."}])", ctx());
  ASSERT_EQ(bare.deltas.size(), 1u);
  EXPECT_FALSE(bare.deltas[0].lesson.title.empty());
  EXPECT_EQ(bare.deltas[0].lesson.kind, memory::LessonKind::strategy);
}

TEST(ParseLessons, AtMostThreeAndOnlyKnownIds) {
  auto p = parse_lessons(R"({"lessons": [
    {"action": "upvote", "id": "L9999zzzz"},
    {"action": "add", "text": "one"}, {"action": "add", "text": "two"},
    {"action": "add", "text": "three"}, {"action": "add", "text": "four"},
    {"action": "explode"}]})",
                         ctx());
  EXPECT_EQ(p.deltas.size(), 3u);
  EXPECT_GE(p.problems.size(), 2u);  // the invented id, and the fourth add
  for (const auto& d : p.deltas) EXPECT_EQ(d.op, Op::add);
}

TEST(ParseLessons, NoJson) {
  auto p = parse_lessons("Nothing new was learned.", ctx());
  EXPECT_FALSE(p.parsed);
  EXPECT_TRUE(p.deltas.empty());
  auto empty = parse_lessons(R"({"lessons": []})", ctx());
  EXPECT_TRUE(empty.parsed);
  EXPECT_TRUE(empty.deltas.empty());
}

TEST(ParseLessons, ScopeAnyAndBackend) {
  auto p = parse_lessons(R"({"lessons": [{"action": "add", "text": "a", "scope": "any"},
                                         {"action": "add", "text": "b", "scope": "backend"}]})",
                         ctx());
  ASSERT_EQ(p.deltas.size(), 2u);
  EXPECT_EQ(p.deltas[0].lesson.scope.category, "");
  EXPECT_EQ(p.deltas[0].lesson.scope.backend, "");
  EXPECT_EQ(p.deltas[1].lesson.scope.category, "");
  EXPECT_EQ(p.deltas[1].lesson.scope.backend, "cpu");
}


// Lessons offered for editing are shown whole; every lesson in scope is listed by id; an edit
// of one that was only listed is refused.
TEST(ReflectionPrompt, LessonsInScopeAreListedAndEditableOnesWhole) {
  std::vector<memory::Lesson> scope;
  for (int i = 0; i < 15; ++i) {
    memory::Lesson l;
    l.id = fmt::format("L{:04d}", i);
    l.title = fmt::format("Title {}", i);
    l.text = std::string(1500, static_cast<char>('a' + i % 26)) + " end.";
    l.scope.category = "normalization";
    scope.push_back(l);
  }
  std::set<std::string> listed, editable;
  std::string text = render_lessons_in_scope(scope, 12, &listed, &editable);
  EXPECT_EQ(listed.size(), 15u);
  EXPECT_EQ(editable.size(), 12u);
  for (int i = 0; i < 12; ++i) EXPECT_NE(text.find(scope[static_cast<size_t>(i)].text), std::string::npos) << i;
  EXPECT_NE(text.find("- [L0014] Title 14"), std::string::npos) << text;
  EXPECT_EQ(text.find(scope[14].text), std::string::npos);

  LessonContext c = ctx();
  c.known_ids = listed;
  c.editable_ids = editable;
  auto p = parse_lessons(R"({"lessons": [{"action": "edit", "id": "L0014", "text": "new"},
    {"action": "edit", "id": "L0003", "text": "better"}, {"action": "upvote", "id": "L0014"}]})", c);
  ASSERT_EQ(p.deltas.size(), 2u);
  EXPECT_EQ(p.deltas[0].lesson_id, "L0003");
  EXPECT_EQ(p.deltas[1].op, Op::upvote);
  ASSERT_EQ(p.problems.size(), 1u);
  EXPECT_NE(p.problems[0].find("whole text was not shown"), std::string::npos);

  // A lesson listed by title only is replaced whole: a new title and a new text need none of
  // the old text, so a contradicted lesson can be corrected, not only voted down.
  auto whole = parse_lessons(R"({"lessons": [{"action": "edit", "id": "L0014", "title": "Tiles of 8 rows",
    "text": "Measured 1.3x on N=4096 side by side; the 16-row tile was slower there."}]})", c);
  ASSERT_EQ(whole.deltas.size(), 1u);
  EXPECT_TRUE(whole.problems.empty());
  EXPECT_EQ(whole.deltas[0].op, Op::edit);
  EXPECT_EQ(whole.deltas[0].lesson_id, "L0014");
  EXPECT_EQ(whole.deltas[0].lesson.title, "Tiles of 8 rows");
  auto title_only = parse_lessons(R"({"lessons": [{"action": "edit", "id": "L0014", "title": "Tiles of 8 rows"}]})", c);
  EXPECT_TRUE(title_only.deltas.empty());
  ASSERT_EQ(title_only.problems.size(), 1u);
  EXPECT_NE(title_only.problems[0].find("both a title and a text"), std::string::npos);
}

// Mode none shows no lessons, so the prompt says votes and edits have nothing to act on.
TEST(ReflectionPrompt, WithoutMemoryOnlyAddApplies) {
  spec::OpSpec op = testing::load_softmax();
  PromptLibrary lib = *PromptLibrary::load(std::filesystem::path(KOPE_SOURCE_DIR) / "prompts", "cpu");
  ReflectionInput in;
  in.op = &op;
  in.backend = "cpu";
  in.target = "x86_64-avx2-fma";
  in.trigger = "the task ended";
  in.memory = false;
  auto none = build_reflection_prompt(lib, in);
  ASSERT_TRUE(none) << none.error().message;
  EXPECT_NE((*none)[1].content.find("only \"add\" applies"), std::string::npos) << (*none)[1].content;
  EXPECT_EQ((*none)[1].content.find("## Lessons already in memory"), std::string::npos);
  in.memory = true;
  auto with = build_reflection_prompt(lib, in);
  ASSERT_TRUE(with) << with.error().message;
  EXPECT_EQ((*with)[1].content.find("only \"add\" applies"), std::string::npos);
  EXPECT_NE((*with)[1].content.find("## Lessons already in memory"), std::string::npos);
}

// `error_signature` holds nothing for a lesson that is not a fix; a fix keeps its own, or gets
// the failure's signature the prompt showed.
TEST(ParseLessons, ErrorSignatureOnlyForFixes) {
  LessonContext c = ctx();
  c.failure_signature = "wrong_result:value";
  auto p = parse_lessons(R"({"lessons": [
    {"action": "add", "kind": "pitfall", "title": "t1", "text": "Tails.", "error_signature": "wrong_result:value"},
    {"action": "add", "kind": "fix", "title": "t2", "text": "Index by D.", "error_signature": ""},
    {"action": "add", "kind": "fix", "title": "t3", "text": "Declare it.", "error_signature": "compile_error: x"}]})", c);
  ASSERT_EQ(p.deltas.size(), 3u);
  EXPECT_EQ(p.deltas[0].lesson.error_signature, "");
  EXPECT_EQ(p.deltas[1].lesson.error_signature, "wrong_result:value");
  EXPECT_EQ(p.deltas[2].lesson.error_signature, "compile_error: x");
}

TEST(ParseLessons, LongTitlesAndTextsAreShortenedNeverCutMidWord) {
  std::string text = "Parallelise over rows with OpenMP, since the rows are independent, and vectorise the inner loop";
  auto p = parse_lessons(fmt::format(R"({{"lessons": [{{"action": "add", "text": "{}"}}]}})", text), ctx());
  ASSERT_EQ(p.deltas.size(), 1u);
  EXPECT_EQ(p.deltas[0].lesson.title, "Parallelise over rows with OpenMP");
  EXPECT_EQ(p.deltas[0].lesson.title.find("..."), std::string::npos);
}

// The prompt states the limits, and an add or an edit longer than them is cut at a clause, so a
// lesson never reads as if it stopped mid-thought without the prompt having said so.
TEST(ParseLessons, AddsAndEditsKeepToTheLimitsThePromptStates) {
  std::string clause = "measured 1.02x side by side on the three timed cases, so the change did not pay, ";
  std::string text;
  while (text.size() < k_max_lesson_text_chars + 200) text += clause;
  auto p = parse_lessons(fmt::format(R"({{"lessons": [{{"action": "add", "title": "T", "text": "{0}"}},
                                       {{"action": "edit", "id": "L0001aaaa", "text": "{0}"}}]}})",
                                     text),
                         ctx());
  ASSERT_EQ(p.deltas.size(), 2u);
  for (const auto& d : p.deltas) {
    EXPECT_LE(d.lesson.text.size(), k_max_lesson_text_chars);
    EXPECT_GT(d.lesson.text.size(), k_max_lesson_text_chars / 2);
    EXPECT_TRUE(text.starts_with(d.lesson.text));  // whole clauses, cut at the last one that fits
  }
  spec::OpSpec op = testing::load_softmax();
  for (const char* backend : {"cpu", "opencl", "cuda"}) {
    PromptLibrary lib = *PromptLibrary::load(std::filesystem::path(KOPE_SOURCE_DIR) / "prompts", backend);
    ReflectionInput in;
    in.op = &op;
    in.backend = backend;
    in.summary = "Attempt 1 was correct.";
    auto m = build_reflection_prompt(lib, in);
    ASSERT_TRUE(m) << m.error().message;
    EXPECT_NE((*m)[1].content.find(fmt::format("A title has at most {} characters and a text at most {};",
                                               k_max_lesson_title_chars, k_max_lesson_text_chars)),
              std::string::npos)
        << backend;
  }
}

// Every backend's reflection template renders the task's own lessons, memory's other lessons and
// a failure, in both memory modes, and what it renders passes the prompt check.
TEST(ReflectionPrompt, EveryBackendRendersTheTasksLessonsAndTheFailure) {
  spec::OpSpec op = testing::load_softmax();
  for (const char* backend : {"cpu", "opencl", "cuda"}) {
    SCOPED_TRACE(backend);
    PromptLibrary lib = *PromptLibrary::load(std::filesystem::path(KOPE_SOURCE_DIR) / "prompts", backend);
    ReflectionInput in;
    in.op = &op;
    in.backend = backend;
    in.target = "x86_64-avx2-fma";
    in.trigger = "attempt 2 fixed the failure of attempt 1";
    in.summary = "Attempt 1 failed, attempt 2 fixed it.";
    in.tried = "| # | stage | optimisation | result |\n|---|---|---|---|\n| 1 | draft | rows | wrong_result |\n";
    in.failure = "Attempt 1 (draft; \"rows\") ended: wrong_result.\nFirst mismatch: y[0]: got 1, expected 2\n"
                 "Error signature: `wrong_result:value`\n";
    in.code = "Attempt 1 (failed):\n```cpp\nint f();\n```\n(3 more lines not shown)\n";
    in.task_lessons = "- [L1] (strategy · normalization/cpu · helpful 0 / harmful 0) Rows: parallelise over rows.\n";
    in.existing = "- [L2] (pitfall · any op · helpful 2 / harmful 0) Tails: handle the tail.\n";
    for (bool memory : {true, false}) {
      in.memory = memory;
      auto m = build_reflection_prompt(lib, in);
      ASSERT_TRUE(m) << m.error().message;
      const std::string& user = (*m)[1].content;
      EXPECT_NE(user.find("## What the failed attempt reported\nAttempt 1"), std::string::npos) << user;
      size_t own = user.find("Written or voted on by this task's earlier reflections");
      ASSERT_NE(own, std::string::npos) << user;
      EXPECT_LT(own, user.find("- [L1]"));
      EXPECT_EQ(user.find("- [L2]") != std::string::npos, memory) << user;
      EXPECT_EQ(user.find("only \"add\" applies"), std::string::npos) << user;
      EXPECT_EQ(user.find("None in this scope yet"), std::string::npos) << user;
      auto f = check_prompt_text({(*m)[0].content, user, 3, 10}, "r.md", "softmax reflect-k2");
      for (const auto& x : f) ADD_FAILURE() << x.line << " [" << x.rule << "] " << x.message << "\n" << user;
    }
  }
}

}  // namespace
}  // namespace kope::agent
