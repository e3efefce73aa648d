#include "agent/prompt_check.h"

#include <gtest/gtest.h>

#include "agent/prompt.h"
#include "agent/reflect.h"
#include "agent/test_support.h"
#include "util/fs.h"

namespace kope::agent {
namespace {

using json = nlohmann::json;

std::string transcript(const std::string& system, const std::string& user) {
  return "## system\n\n" + system + "\n\n## user\n\n" + user + "\n\n## assistant\n\nOPTIMISATION: x\n";
}

std::vector<std::string> rules_of(const std::vector<PromptFinding>& f) {
  std::vector<std::string> out;
  for (const auto& x : f) out.push_back(x.rule);
  return out;
}

bool has(const std::vector<PromptFinding>& f, const std::string& rule, int line = -1) {
  for (const auto& x : f) {
    if (x.rule == rule && (line < 0 || x.line == line)) return true;
  }
  return false;
}

TEST(PromptCheck, SplitsTranscriptsWithLineNumbers) {
  auto t = parse_transcript(transcript("sys line", "# Task\nbody\n"));
  ASSERT_TRUE(t) << t.error().message;
  EXPECT_EQ(t->system, "sys line");
  EXPECT_EQ(t->user, "# Task\nbody\n");
  EXPECT_EQ(t->system_line, 3);
  EXPECT_EQ(t->user_line, 7);
  EXPECT_FALSE(parse_transcript("no headings"));
}

TEST(PromptCheck, FindsCutEmptyBrokenAndRepeatedText) {
  std::string user =
      "# Task\n"                                                    // 7
      "\n"                                                          // 8
      "## Latest feedback\n"                                        // 9
      "\n"                                                          // 10
      "## Already tried in this task\n"                             // 11
      "| # | stage | optimisation | result |\n"                     // 12
      "|---|---|---|---|\n"                                         // 13
      "| 1 | draft | a | b | c |\n"                                 // 14: an unescaped '|'
      "| 2 | draft | a \\| b | wrong_result: y differs |\n"         // 15: escaped, fine
      "\n"                                                          // 16
      "## Lessons learned on this machine\n"                        // 17
      "- [lesson L1 · strategy] Use rows: parallelise rows.\n"       // 18
      "- [lesson L2 · strategy] Use rows: parallelise rows.\n"       // 19: same text, other id
      "- [lesson L3 · pitfall] Tails matter and the rest was cut\xE2\x80\xA6\n"  // 20
      "## Experience from this machine: kernels that verified and were timed here\n"  // 21
      "- [best kernel · softmax · case 4]\n"                        // 22
      "```cpp\n"                                                    // 23
      "int f() {\n"                                                 // 24
      "[... 120 more bytes cut ...]\n"                              // 25
      "\n"
      "Answer with the OPTIMISATION line.\n";
  PromptText text{"You write kernels.", user, 3, 7};
  auto f = check_prompt_text(text, "t.md", "softmax 2 (refine)");
  EXPECT_TRUE(has(f, "empty", 9)) << ::testing::PrintToString(rules_of(f));
  EXPECT_TRUE(has(f, "table", 14));
  EXPECT_FALSE(has(f, "table", 15));
  EXPECT_TRUE(has(f, "duplicate", 19));
  EXPECT_TRUE(has(f, "cut", 20));
  EXPECT_TRUE(has(f, "cut", 25));
  EXPECT_TRUE(has(f, "cut", 22));  // its code block never closes within the item
  EXPECT_TRUE(has(f, "cut", 23));  // nor at all
  for (const auto& x : f) {
    EXPECT_EQ(x.file, "t.md");
    EXPECT_EQ(x.prompt, "softmax 2 (refine)");
  }
}

TEST(PromptCheck, LessonsOfferedForEditingMustBeWhole) {
  std::string user =
      "# Reflection\n\n## Lessons already in memory\nEvery active lesson.\n"
      "- [L1] (strategy · any op) Rows: parallelise over rows...\n"
      "Also in scope (title only: vote on these by id; an edit of one replaces it whole, so it gives both a title and a text):\n"
      "- [L2] A title...\n";
  auto f = check_prompt_text({"s", user, 3, 7}, "r.md", "softmax reflect-end");
  ASSERT_EQ(f.size(), 2u) << ::testing::PrintToString(rules_of(f));
  EXPECT_EQ(f[0].rule, "lesson");
  EXPECT_EQ(f[0].line, 11);
  EXPECT_EQ(f[1].rule, "cut");  // a title cut with "..." is a cut description
  EXPECT_EQ(f[1].line, 13);
}

TEST(PromptCheck, FindsDescriptionsCutMidWordOrMidSentence) {
  std::string user =
      "# Task\n"                                                                     // 7
      "\n"                                                                           // 8
      "## Latest feedback\n"                                                         // 9
      "Attempt 2 (refine; \"tile the rows by 8 and unro...\") ended: correct.\n"     // 10: cut in a quotation
      "Then the loop was unrolled...\n"                                              // 11: at the end of a line
      "Wait for it... then time it.\n"                                              // 12: an ellipsis mid-sentence, fine
      "Tiles of 8x8 (shortened)\n"                                                  // 13: said so, fine
      "\n"                                                                           // 14
      "## Already tried in this task\n"                                              // 15
      "| # | stage | optimisation | result |\n"                                      // 16
      "|---|---|---|---|\n"                                                          // 17
      "| ... | | 3 earlier attempts omitted | |\n"                                   // 18: a row marker, fine
      "| 4 | draft | AVX-512 softmax with a polyno... | correct |\n"                  // 19: cut in a cell
      "| 5 | draft | blocked over rows\xE2\x80\xA6 | correct |\n"                      // 20: "…" in a cell
      "| 6 | draft | blocked over rows, vectorised | wrong_result: case 0 (N=1 D=8): y[0] differs |\n"  // 21: fine
      "\n"
      "```cpp\n"                                                                     // 23
      "template <typename... Args> void f(Args... args);\n"                         // 24: code, fine
      "```\n"
      "[... 3 more lines not shown ...]\n"                                           // 26: a marker, fine
      "\n"
      "Answer with the OPTIMISATION line.\n";
  auto f = check_prompt_text({"s", user, 3, 7}, "t.md", "softmax 5 (refine)");
  for (int line : {10, 11, 19, 20}) EXPECT_TRUE(has(f, "cut", line)) << line << ::testing::PrintToString(rules_of(f));
  for (int line : {12, 13, 18, 21, 24, 26}) EXPECT_FALSE(has(f, "cut", line)) << line;
  EXPECT_EQ(f.size(), 4u) << ::testing::PrintToString(rules_of(f));
  for (const auto& x : f) {
    if (x.line == 10) {
      EXPECT_NE(x.message.find("unro..."), std::string::npos) << x.message;
    }
  }
}

TEST(PromptCheck, FindsCaseIndicesTheDimsDoNotExplain) {
  std::string user =
      "# Task\n"                                                                       // 7
      "## Latest feedback\n"                                                           // 8
      "Evaluator: case 1 (N=128 D=64): y[3] differs\n"                                 // 9: named
      "Cases passed: 1 of 3.\n"                                                        // 10
      "case 1: timing disturbed by other load\n"                                       // 11: named elsewhere
      "case 2: timing disturbed by other load\n"                                       // 12: never named
      "Case #4 failed; see case 2 again\n"                                             // 13: 4 and 2, never named
      "a replay of memory case 17 (re-verified here)\n"                               // 14: a memory case, fine
      "Attempt 3 was a replay of case 9 (softmax on x86_64-avx2-fma).\n"              // 15: fine
      "```cpp\n"
      "switch (k) { case 5: return; }\n"                                               // 17: code, fine
      "```\n"
      "\n"
      "## Experience from this machine: kernels that verified and were timed here\n"   // 20
      "- [case 12 · softmax on x86_64-avx2-fma · draft · correct]\n"                   // 21: memory ids, fine
      "began from: case 11\n"                                                          // 22
      "\n"
      "Answer with the OPTIMISATION line.\n";
  auto f = check_prompt_text({"s", user, 3, 7}, "t.md", "softmax 3 (repair)");
  EXPECT_TRUE(has(f, "case", 12)) << ::testing::PrintToString(rules_of(f));
  EXPECT_TRUE(has(f, "case", 13));
  size_t on_13 = 0;
  for (const auto& x : f) on_13 += x.line == 13;
  EXPECT_EQ(on_13, 2u) << "case 4 and case 2";
  for (int line : {9, 10, 11, 14, 15, 17, 21, 22}) EXPECT_FALSE(has(f, "case", line)) << line;
  EXPECT_EQ(f.size(), 3u) << ::testing::PrintToString(rules_of(f));
  EXPECT_NE(f[0].message.find("\"case 2\""), std::string::npos) << f[0].message;
}

TEST(PromptCheck, TierTokensMustMatchTheText) {
  std::string system(1000, 's');
  std::string user = "# Task\nhot text\n\n## General notes\n- a note about rows\n\nAnswer with the OPTIMISATION line.\n";
  PromptText text{system, user, 3, 7};
  const double r = 0.3;
  auto est = [&](size_t bytes) { return static_cast<int64_t>(std::ceil(static_cast<double>(bytes) * r)); };
  std::string hot_only = "# Task\nhot text\n\nAnswer with the OPTIMISATION line.\n";
  int64_t sys = est(system.size()), total = sys + est(user.size()), hot = est(hot_only.size());
  json ev{{"type", "prompt"}, {"purpose", "refine"}, {"tokens_per_byte", r}, {"total_tokens", total},
          {"tier_tokens", {{"system", sys}, {"hot", hot}, {"warm", 0}, {"cold", total - sys - hot}}}};
  auto ok = check_prompt_tokens(text, ev, "t.md", "p");
  EXPECT_TRUE(ok.empty()) << (ok.empty() ? "" : ok[0].message);

  json bad_sum = ev;
  bad_sum["tier_tokens"]["cold"] = total - sys - hot + 5;
  EXPECT_TRUE(has(check_prompt_tokens(text, bad_sum, "t.md", "p"), "tokens"));
  json bad_hot = ev;  // the same total, but 40 tokens moved from cold into hot
  bad_hot["tier_tokens"]["hot"] = hot + 40;
  bad_hot["tier_tokens"]["cold"] = total - sys - hot - 40;
  EXPECT_TRUE(has(check_prompt_tokens(text, bad_hot, "t.md", "p"), "tokens"));
  json no_knowledge = ev;  // knowledge in the text, none in the tiers
  no_knowledge["tier_tokens"]["hot"] = total - sys;
  no_knowledge["tier_tokens"]["cold"] = 0;
  EXPECT_TRUE(has(check_prompt_tokens(text, no_knowledge, "t.md", "p"), "tokens"));
  json bad_total = ev;
  bad_total["total_tokens"] = total + 50;
  bad_total["tier_tokens"]["cold"] = total - sys - hot + 50;
  EXPECT_TRUE(has(check_prompt_tokens(text, bad_total, "t.md", "p"), "tokens"));
}

// Prompts kope itself assembles pass the check: tiers, knowledge sections and tables.
TEST(PromptCheck, AssembledPromptsPass) {
  spec::OpSpec op = testing::load_softmax();
  PromptLibrary lib = *PromptLibrary::load(std::filesystem::path(KOPE_SOURCE_DIR) / "prompts", "cpu");
  SharedEstimator est;
  est.calibrate(1000, 1234);  // a calibrated ratio, not the default
  PromptInput in;
  in.op = &op;
  in.reference_source = *util::read_file(op.reference_path);
  in.hardware = render_hardware(testing::fake_hw(), "g++");
  in.toolchain = "g++";
  in.stage = memory::Stage::refine;
  Attempt a;
  a.iteration = 1;
  a.verdict = eval::Verdict::rejected;
  a.optimisation = "a | pipe in the description that is rather long and goes on and on about what it did";
  a.message = "needed 7.37 ms of CPU time on never-seen inputs but 2.25 ms on inputs it had seen before";
  in.tried = render_tried({a});
  in.feedback = render_feedback(a, nullptr);
  memory::RetrievedItem k;
  k.id = "kernel:4";
  k.kind = memory::RetrievedItem::Kind::best_kernel;
  k.case_id = 4;
  k.kase.emplace();
  k.kase->verdict = eval::Verdict::correct;
  k.kase->optimisation = "rows";
  k.kase->code = "int f() { return 1; }\n";
  k.score = 1;
  k.op = "softmax";
  k.category = "normalization";
  k.target = "x86_64-avx2-fma";
  memory::RetrievedItem dup = k;  // the same kernel under another id
  dup.id = "kernel:5";
  memory::RetrievedItem l;
  l.id = "lesson:L1";
  l.kind = memory::RetrievedItem::Kind::lesson;
  l.lesson.emplace();
  l.lesson->id = "L1";
  l.lesson->title = "Rows";
  l.lesson->text = "parallelise over rows.";
  l.lesson->scope.category = "normalization";
  l.score = 0.5;
  auto knowledge = classify_knowledge({k, dup, l}, {}, op, memory::Stage::refine, lib, est,
                                      [](std::string_view) { return std::nullopt; });
  context::Budget budget;
  budget.window = 32000;
  budget.generation = 4000;
  auto p = assemble_prompt(lib, in, knowledge, budget, context::Mode::active, est);
  ASSERT_TRUE(p) << p.error().message;
  PromptText text{p->messages[0].content, p->messages[1].content, 3, 10};
  auto f = check_prompt_text(text, "t.md", "p");
  for (const auto& x : f) ADD_FAILURE() << x.line << " [" << x.rule << "] " << x.message;
  json ev{{"type", "prompt"}, {"purpose", "refine"}, {"token_scale", p->token_scale}, {"total_tokens", p->total_tokens},
          {"tier_tokens", p->tier_tokens}};
  auto t = check_prompt_tokens(text, ev, "t.md", "p");
  for (const auto& x : t) ADD_FAILURE() << "[" << x.rule << "] " << x.message;
  const std::string& user = p->messages[1].content;
  EXPECT_EQ(user.find("case 4]", user.find("case 4]") + 1), std::string::npos) << "the same kernel twice";
  EXPECT_NE(user.find("on inputs it had seen before"), std::string::npos) << "the cause is never cut";
  EXPECT_NE(user.find("a \\| pipe"), std::string::npos) << "cells escape '|'";
}

TEST(PromptCheck, RunDirectoryFindingsNameFileAndLine) {
  auto dir = util::TempDir::create("kope-prompt-check-");
  ASSERT_TRUE(dir);
  std::string user = "# Task\n\n## Latest feedback\n\n## Next\nok\n";
  std::string t = transcript("sys", user);
  ASSERT_TRUE(util::make_dirs(dir->path() / "transcripts/soft_max"));
  ASSERT_TRUE(util::write_file_atomic(dir->path() / "transcripts/soft_max/1-draft.md", t));
  int64_t sys = 1, total = sys + static_cast<int64_t>(std::ceil(user.size() * 0.3));
  json ev{{"type", "prompt"}, {"op", "soft max"}, {"iteration", 1}, {"purpose", "draft"}, {"tokens_per_byte", 0.3},
          {"total_tokens", total}, {"tier_tokens", {{"system", sys}, {"hot", total - sys}, {"warm", 0}, {"cold", 0}}}};
  ASSERT_TRUE(util::write_file_atomic(dir->path() / "events.jsonl", ev.dump() + "\n"));
  ASSERT_TRUE(util::write_file_atomic(dir->path() / "transcripts/soft_max/reflect-end.md", transcript("s", "# R\nx\n")));
  auto r = check_run_prompts(dir->path());
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->prompts, 2);
  ASSERT_FALSE(r->ok());
  EXPECT_TRUE(has(r->findings, "empty", 9));  // "## Latest feedback" is line 9 of the file
  EXPECT_TRUE(has(r->findings, "log"));       // reflect-end.md has no prompt event
  EXPECT_NE(r->to_text().find("transcripts/soft_max/1-draft.md:9: [empty]"), std::string::npos) << r->to_text();
  EXPECT_FALSE(check_run_prompts(dir->path() / "nowhere"));
}

}  // namespace
}  // namespace kope::agent
