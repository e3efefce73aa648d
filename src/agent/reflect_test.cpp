#include "agent/reflect.h"

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace kope::agent
