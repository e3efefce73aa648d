#include "agent/answer.h"

#include <filesystem>

#include <gtest/gtest.h>

#include "agent/plan.h"
#include "agent/test_support.h"
#include "util/fs.h"
#include "util/strings.h"

namespace kope::agent {
namespace {

const char* k_kernel = "extern \"C\" void kope_kernel(const float* x, float* y, int64_t N) {\n  for (int64_t i = 0; i < N; ++i) y[i] = x[i];\n}\n";

TEST(ParseAnswer, HeaderAndTaggedFence) {
  std::string text = std::string("OPTIMISATION: copy loop\n\n```cpp\n") + k_kernel + "```\nThat is all.";
  auto a = parse_answer(text);
  EXPECT_TRUE(a.has_code);
  EXPECT_TRUE(a.header_found);
  EXPECT_EQ(a.optimisation, "copy loop");
  EXPECT_EQ(a.code, k_kernel);
  EXPECT_EQ(a.code_blocks, 1);
}

TEST(ParseAnswer, FenceWithoutTagAndTildes) {
  auto a = parse_answer(std::string("Optimization - vectorised\n```\n") + k_kernel + "```\n");
  EXPECT_TRUE(a.has_code);
  EXPECT_EQ(a.optimisation, "vectorised");
  auto b = parse_answer(std::string("~~~ c++\n") + k_kernel + "~~~\n");
  EXPECT_TRUE(b.has_code);
  EXPECT_EQ(b.code, k_kernel);
}

TEST(ParseAnswer, CrlfLineEndsAreNormalised) {
  std::string text = "OPTIMISATION: crlf\r\n```cpp\r\nextern \"C\" void kope_kernel(float* y) {\r\n  y[0] = 1;\r\n}\r\n```\r\n";
  auto a = parse_answer(text);
  ASSERT_TRUE(a.has_code);
  EXPECT_EQ(a.code.find('\r'), std::string::npos);
  EXPECT_EQ(a.optimisation, "crlf");
}

TEST(ParseAnswer, SeveralBlocksTakeTheLastOneDefiningTheKernel) {
  std::string text = std::string("First a helper:\n```cpp\nstatic inline float sq(float v) { return v * v; }\n```\n") +
                     "Draft:\n```cpp\nextern \"C\" void kope_kernel(float* y) { y[0] = 0; }\n```\n" +
                     "Better:\n```cpp\n" + k_kernel + "```\n```bash\ng++ -O3 k.cpp\n```\n";
  auto a = parse_answer(text);
  ASSERT_TRUE(a.has_code);
  EXPECT_EQ(a.code, k_kernel);
  EXPECT_EQ(a.code_blocks, 4);
}

TEST(ParseAnswer, DeclarationIsNotADefinition) {
  auto a = parse_answer("```cpp\nextern \"C\" void kope_kernel(const float* x, float* y, int64_t N);\n```\n");
  EXPECT_FALSE(a.has_code);
  EXPECT_EQ(a.problem, "no code block in the answer defines kope_kernel");
}

TEST(ParseAnswer, NoCodeAtAll) {
  auto a = parse_answer("I am sorry, I cannot help with that.");
  EXPECT_FALSE(a.has_code);
  EXPECT_EQ(a.problem, "no code in answer");
  EXPECT_FALSE(a.header_found);
  EXPECT_EQ(a.optimisation, "I am sorry, I cannot help with that.");
  EXPECT_EQ(parse_answer("").optimisation, "unspecified");
}

TEST(ParseAnswer, CutOffInsideTheBlock) {
  auto a = parse_answer("OPTIMISATION: x\n```cpp\nextern \"C\" void kope_kernel(float* y) {\n  for (int i = 0; i < 4; ++i) {\n");
  EXPECT_FALSE(a.has_code);
  EXPECT_EQ(a.problem, "the answer was cut off inside the code block");
  // An unclosed final fence whose code is complete is accepted.
  auto b = parse_answer(std::string("OPTIMISATION: x\n```cpp\n") + k_kernel);
  EXPECT_TRUE(b.has_code);
}

TEST(ParseAnswer, BareCodeWithoutFences) {
  auto a = parse_answer(std::string("Here it is:\n#include <cstdint>\n") + k_kernel);
  ASSERT_TRUE(a.has_code);
  EXPECT_TRUE(a.code.starts_with("#include <cstdint>"));
}

TEST(ParseAnswer, HeaderVariants) {
  std::string block = std::string("```cpp\n") + k_kernel + "```\n";
  EXPECT_EQ(parse_answer("**OPTIMISATION:** blocked rows\n" + block).optimisation, "blocked rows");
  EXPECT_EQ(parse_answer("## Optimisation applied: fused passes\n" + block).optimisation, "fused passes");
  EXPECT_EQ(parse_answer("{\"optimisation\": \"json header\"}\n" + block).optimisation, "json header");
  EXPECT_EQ(parse_answer("optimization: `yaml style`\n" + block).optimisation, "yaml style");
  auto in_code = parse_answer("```cpp\n// OPTIMISATION: in a comment\n" + std::string(k_kernel) + "```\n");
  EXPECT_TRUE(in_code.header_found);
  EXPECT_EQ(in_code.optimisation, "in a comment");
  auto missing = parse_answer("Use OpenMP over rows.\n" + block);
  EXPECT_FALSE(missing.header_found);
  EXPECT_EQ(missing.optimisation, "Use OpenMP over rows.");
  // Real models' headers run to a few hundred characters: kept whole; only a runaway one is cut.
  std::string long_header = "OPTIMISATION: " + std::string(300, 'a') + "\n" + block;
  EXPECT_EQ(parse_answer(long_header).optimisation, std::string(300, 'a'));
  std::string runaway = "OPTIMISATION: " + std::string(5000, 'a') + "\n" + block;
  EXPECT_LE(parse_answer(runaway).optimisation.size(), k_max_optimisation);
}

TEST(ParseAnswer, IndentedFenceInAList) {
  auto a = parse_answer("1. The kernel:\n   ```cpp\n   extern \"C\" void kope_kernel(float* y) {\n     y[0] = 1;\n   }\n   ```\n");
  ASSERT_TRUE(a.has_code);
  EXPECT_TRUE(a.code.starts_with("extern"));
}

// Answers a real model gave to kope's prompts (tests/real-model/<op>/<n>.answer.md, with the
// kernel kope saved from each as <n>.cpp): each parses into exactly that code and the
// answer's own OPTIMISATION line.
TEST(ParseAnswer, RealModelAnswers) {
  namespace fs = std::filesystem;
  fs::path root = fs::path(KOPE_SOURCE_DIR) / "tests/real-model";
  int checked = 0;
  for (const auto& op : fs::directory_iterator(root)) {
    if (!op.is_directory()) continue;
    for (const auto& f : fs::directory_iterator(op.path())) {
      std::string name = f.path().filename().string();
      if (!name.ends_with(".answer.md")) continue;
      SCOPED_TRACE(f.path().string());
      auto answer = util::read_file(f.path());
      auto saved = util::read_file(op.path() / (name.substr(0, name.size() - 10) + ".cpp"));
      ASSERT_TRUE(answer && saved);
      ParsedAnswer a = parse_answer(*answer);
      ASSERT_TRUE(a.has_code) << a.problem;
      EXPECT_EQ(a.code, *saved);
      EXPECT_TRUE(a.header_found);
      std::string first = answer->substr(0, answer->find('\n'));
      ASSERT_TRUE(first.starts_with("OPTIMISATION: "));
      EXPECT_EQ(a.optimisation, first.substr(14));
      EXPECT_EQ(a.code_blocks, 1);
      ++checked;
    }
  }
  EXPECT_GE(checked, 15) << "the corpus in " << root.string();
}

const char* k_incumbent =
    "#include <cstdint>\n"
    "extern \"C\" void kope_kernel(const float* x, float* y, int64_t N) {\n"
    "  for (int64_t i = 0; i < N; ++i) y[i] = x[i];\n"
    "}\n";

TEST(ParseEdits, UnfencedBlockAfterTheHeader) {
  auto a = parse_answer(
      "OPTIMISATION: restrict pointers\n"
      "<<<<<<< SEARCH\n"
      "extern \"C\" void kope_kernel(const float* x, float* y, int64_t N) {\n"
      "=======\n"
      "extern \"C\" void kope_kernel(const float* __restrict x, float* __restrict y, int64_t N) {\n"
      ">>>>>>> REPLACE\n");
  EXPECT_EQ(a.form, AnswerForm::edits);
  EXPECT_FALSE(a.has_code);  // the REPLACE part defines kope_kernel, but it is an edit, not a kernel
  EXPECT_EQ(a.edit_problem, "");
  EXPECT_EQ(a.optimisation, "restrict pointers");
  ASSERT_EQ(a.edits.size(), 1u);
  EXPECT_EQ(a.edits[0].search, "extern \"C\" void kope_kernel(const float* x, float* y, int64_t N) {\n");
  EXPECT_EQ(a.edits[0].replace,
            "extern \"C\" void kope_kernel(const float* __restrict x, float* __restrict y, int64_t N) {\n");
  EXPECT_EQ(a.edits[0].line, 2);
}

TEST(ParseEdits, SeveralBlocksInsideAndOutsideFences) {
  std::string text =
      "OPTIMISATION: two edits\n"
      "```cpp\n"
      "<<<<<<< SEARCH\n"
      "#include <cstdint>\n"
      "=======\n"
      "#include <cstdint>\n"
      "#include <cstring>\n"
      ">>>>>>> REPLACE\n"
      "```\n"
      "And the loop:\n"
      "<<<<<<< SEARCH\n"
      "  for (int64_t i = 0; i < N; ++i) y[i] = x[i];\n"
      "=======\n"
      ">>>>>>> REPLACE\n";
  auto a = parse_answer(text);
  EXPECT_EQ(a.form, AnswerForm::edits);
  EXPECT_EQ(a.edit_problem, "");
  EXPECT_EQ(a.code_blocks, 1);
  ASSERT_EQ(a.edits.size(), 2u);
  EXPECT_EQ(a.edits[0].replace, "#include <cstdint>\n#include <cstring>\n");
  EXPECT_EQ(a.edits[1].search, "  for (int64_t i = 0; i < N; ++i) y[i] = x[i];\n");
  EXPECT_EQ(a.edits[1].replace, "");  // an empty REPLACE deletes the lines
  EXPECT_EQ(a.optimisation, "two edits");
}

TEST(ParseEdits, CrlfAndIndentedBlocks) {
  auto a = parse_answer("OPTIMISATION: x\r\n  <<<<<<< SEARCH\r\n    y[i] = x[i];\r\n  =======\r\n    y[i] = 2 * x[i];\r\n  >>>>>>> REPLACE\r\n");
  ASSERT_EQ(a.edits.size(), 1u);
  EXPECT_EQ(a.edits[0].search, "  y[i] = x[i];\n");
  EXPECT_EQ(a.edits[0].replace, "  y[i] = 2 * x[i];\n");
}

TEST(ParseEdits, WholeKernelAndEditsAreBothSeen) {
  std::string text = std::string("OPTIMISATION: both\n```cpp\n") + k_kernel + "```\n<<<<<<< SEARCH\na\n=======\nb\n>>>>>>> REPLACE\n";
  auto a = parse_answer(text);
  EXPECT_TRUE(a.has_code);
  EXPECT_EQ(a.code, k_kernel);
  EXPECT_EQ(a.form, AnswerForm::edits);
  EXPECT_EQ(a.edits.size(), 1u);
  // A plain answer is a whole kernel.
  EXPECT_EQ(parse_answer(std::string("```cpp\n") + k_kernel + "```\n").form, AnswerForm::whole);
}

TEST(ParseEdits, MalformedBlocksAreNamed) {
  auto cut = parse_answer("OPTIMISATION: x\n<<<<<<< SEARCH\n  y[i] = x[i];\n=======\n  y[i] = 0;\n");
  EXPECT_EQ(cut.form, AnswerForm::edits);
  EXPECT_EQ(cut.edit_problem, "edit 1 (SEARCH `y[i] = x[i];`) is cut off before its >>>>>>> REPLACE line");
  auto no_divider = parse_answer(
      "<<<<<<< SEARCH\na\n=======\nb\n>>>>>>> REPLACE\n<<<<<<< SEARCH\nc\n>>>>>>> REPLACE\n");
  EXPECT_EQ(no_divider.edits.size(), 1u);
  EXPECT_EQ(no_divider.edit_problem, "edit 2 (SEARCH `c`) has no ======= line before the next marker");
}

TEST(ApplyEdits, ExactMatchApplies) {
  std::vector<Edit> edits = {
      {"#include <cstdint>\n", "#include <cstdint>\n#include <cstring>\n", 0},
      {"  for (int64_t i = 0; i < N; ++i) y[i] = x[i];\n", "  std::memcpy(y, x, N * sizeof(float));\n", 0},
  };
  auto r = apply_edits(k_incumbent, edits);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(*r,
            "#include <cstdint>\n#include <cstring>\n"
            "extern \"C\" void kope_kernel(const float* x, float* y, int64_t N) {\n"
            "  std::memcpy(y, x, N * sizeof(float));\n"
            "}\n");
  // Edits are matched against the source as given, in any order, and may delete lines.
  std::vector<Edit> reversed = {edits[1], edits[0]};
  EXPECT_EQ(*apply_edits(k_incumbent, reversed), *r);
  auto deleted = apply_edits(k_incumbent, {{"#include <cstdint>\n", "", 0}});
  ASSERT_TRUE(deleted);
  EXPECT_FALSE(deleted->starts_with("#include"));
}

TEST(ApplyEdits, CrlfLineEndsAreTheOnlyLeniency) {
  std::string crlf = util::replace_all(k_incumbent, "\n", "\r\n");
  auto r = apply_edits(crlf, {{"  for (int64_t i = 0; i < N; ++i) y[i] = x[i];\r\n", "  y[0] = 0;\n", 0}});
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->find('\r'), std::string::npos);
  EXPECT_NE(r->find("  y[0] = 0;\n}\n"), std::string::npos);
  // Indentation and trailing blanks are text: a SEARCH that differs in them does not match.
  auto indent = apply_edits(k_incumbent, {{"for (int64_t i = 0; i < N; ++i) y[i] = x[i];\n", "", 0}});
  ASSERT_FALSE(indent);
  auto trailing = apply_edits(k_incumbent, {{"#include <cstdint> \n", "", 0}});
  ASSERT_FALSE(trailing);
  // A SEARCH must start at the beginning of a line.
  ASSERT_FALSE(apply_edits(k_incumbent, {{"include <cstdint>\n", "", 0}}));
}

TEST(ApplyEdits, NoMatchNamesTheEdit) {
  std::vector<Edit> edits = {{"#include <cstdint>\n", "#include <cstdint>\n", 0}, {"  y[i] = x[i] * 2;\n", "", 0}};
  auto r = apply_edits(k_incumbent, edits);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().message,
            "edit 2 (SEARCH `y[i] = x[i] * 2;`) matches nothing in the incumbent's source (SEARCH lines must be "
            "copied exactly, whitespace included)");
}

TEST(ApplyEdits, NoMatchNamesTheFirstLineThatDiffers) {
  // The first two lines are there; the third is not: the message points at the third.
  std::string src = "#include <cstdint>\n}  // namespace\n\nextern \"C\" void kope_kernel(const float* x) {\n}\n";
  auto r = apply_edits(src, {{"}  // namespace\n\nextern \"C\" void kope_kernel(float* x) {\n", "", 0}});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().message,
            "edit 1 (SEARCH `}  // namespace`) matches nothing in the incumbent's source (SEARCH lines must be "
            "copied exactly, whitespace included): its first 2 lines match, its line 3 "
            "(`extern \"C\" void kope_kernel(float* x) {`) does not");
}

TEST(ApplyEdits, AmbiguousMatchIsAnError) {
  std::string src = "int a;\nint b;\nint a;\n";
  auto r = apply_edits(src, {{"int a;\n", "int c;\n", 0}});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().message,
            "edit 1 (SEARCH `int a;`) is ambiguous: it matches 2 places in the incumbent's source (include "
            "neighbouring lines so that it matches one)");
  // With a neighbouring line it matches one place.
  auto ok = apply_edits(src, {{"int b;\nint a;\n", "int b;\nint c;\n", 0}});
  ASSERT_TRUE(ok);
  EXPECT_EQ(*ok, "int a;\nint b;\nint c;\n");
}

TEST(ApplyEdits, OverlappingEditsAreAnError) {
  std::string src = "int a;\nint b;\nint c;\n";
  auto r = apply_edits(src, {{"int a;\nint b;\n", "x\n", 0}, {"int b;\nint c;\n", "y\n", 0}});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().message, "edit 2 (SEARCH `int b;`) overlaps edit 1 (edits must change separate lines)");
  // Adjacent edits do not overlap.
  auto adjacent = apply_edits(src, {{"int a;\n", "x\n", 0}, {"int b;\n", "y\n", 0}});
  ASSERT_TRUE(adjacent);
  EXPECT_EQ(*adjacent, "x\ny\nint c;\n");
}

TEST(ApplyEdits, EmptySearchIsAnError) {
  auto r = apply_edits(k_incumbent, {{"#include <cstdint>\n", "", 0}, {"", "int z;\n", 0}});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().message, "edit 2 (empty SEARCH) has an empty SEARCH part");
  auto blank = apply_edits(k_incumbent, {{"\n  \n", "int z;\n", 0}});
  ASSERT_FALSE(blank);
  EXPECT_EQ(blank.error().message, "edit 1 (empty SEARCH) has an empty SEARCH part");
}

// Parse then apply, as the loop does.
TEST(ApplyEdits, ParsedAnswerApplies) {
  auto a = parse_answer(
      "OPTIMISATION: restrict\n```\n<<<<<<< SEARCH\n"
      "extern \"C\" void kope_kernel(const float* x, float* y, int64_t N) {\n=======\n"
      "extern \"C\" void kope_kernel(const float* __restrict x, float* __restrict y, int64_t N) {\n"
      ">>>>>>> REPLACE\n```\n");
  auto r = apply_edits(k_incumbent, a.edits);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_NE(r->find("__restrict y"), std::string::npos);
}

// The loop with the scripted model: a refinement answered with edits is the incumbent with the
// edits applied; an edit that does not apply is a bad_answer whose feedback names it.
TEST(EditAnswersInTheLoop, AppliedEditsAreTheCandidateAndABadEditIsNamedInTheFeedback) {
  testing::Harness h;
  h.config.max_iterations = 4;
  h.answers = {
      {1, testing::kernel_answer("base", "correct", 500)},
      {2, "OPTIMISATION: halve the time\n```cpp\n<<<<<<< SEARCH\n// fake-time-us: 500\n=======\n// fake-time-us: 250\n"
          ">>>>>>> REPLACE\n```\n"},
      {3, "OPTIMISATION: a wrong edit\n<<<<<<< SEARCH\n// fake-time-us: 999\n=======\n// fake-time-us: 100\n>>>>>>> REPLACE\n"},
  };
  OpState st;
  auto end = h.run(st);
  ASSERT_TRUE(end) << end.error().message;
  ASSERT_EQ(st.attempts.size(), 4u);
  std::string base = h.evaluator.sources().at(0);
  std::string edited = util::replace_all(base, "// fake-time-us: 500\n", "// fake-time-us: 250\n");
  ASSERT_NE(edited, base);

  const Attempt& applied = st.attempts[1];
  EXPECT_EQ(applied.stage, memory::Stage::refine);
  EXPECT_EQ(applied.answer_form, AnswerForm::edits);
  EXPECT_EQ(applied.answer_edits, 1);
  EXPECT_TRUE(applied.has_code);
  EXPECT_TRUE(applied.improved);
  EXPECT_EQ(h.evaluator.sources().at(1), edited);
  EXPECT_EQ(*util::read_file(h.dir->path() / applied.code_file), edited);
  EXPECT_EQ(applied.code_file, "candidates/softmax/2.cpp");
  EXPECT_GT(applied.tokens_completion, 0);
  EXPECT_EQ(to_json(applied).at("tokens_completion"), applied.tokens_completion);
  EXPECT_EQ(to_json(applied).at("answer_form"), "edits");
  EXPECT_EQ(st.attempts[0].answer_form, AnswerForm::whole);

  const Attempt& bad = st.attempts[2];
  EXPECT_EQ(bad.verdict, eval::Verdict::bad_answer);
  EXPECT_FALSE(bad.has_code);
  EXPECT_EQ(bad.message,
            "edit 1 (SEARCH `// fake-time-us: 999`) matches nothing in the incumbent's source (SEARCH lines must be "
            "copied exactly, whitespace included)");
  EXPECT_EQ(h.evaluator.calls(), 3);  // the bad answer was not evaluated
  // The memory recorded it, with a signature naming the cause.
  auto cases = h.store.all_cases();
  ASSERT_EQ(cases.size(), 4u);
  EXPECT_EQ(cases[2].verdict, eval::Verdict::bad_answer);
  EXPECT_EQ(cases[2].error_signature, "bad_answer:edit_no_match");

  // The next prompt refines the same incumbent and its feedback names the edit.
  EXPECT_EQ(st.attempts[3].stage, memory::Stage::refine);
  EXPECT_EQ(st.attempts[3].parent_iteration, 2);
  auto calls = h.llm->calls();
  std::string fourth;
  for (const auto& c : calls) {
    if (testing::attempt_number(c.messages) == 4 && c.params.purpose != "reflect") fourth = c.messages[1].content;
  }
  ASSERT_FALSE(fourth.empty());
  EXPECT_NE(fourth.find("stage: refine"), std::string::npos);
  EXPECT_NE(fourth.find("ended: bad_answer: edit 1 (SEARCH `// fake-time-us: 999`) matches nothing"), std::string::npos)
      << fourth;
  EXPECT_NE(fourth.find("the incumbent's source is unchanged"), std::string::npos);
  // The system message documents the edit format.
  EXPECT_NE(calls[0].messages[0].content.find("<<<<<<< SEARCH"), std::string::npos);
}

TEST(EditAnswersInTheLoop, EditsWithoutAnIncumbentOrBesideAWholeKernelAreRefused) {
  testing::Harness h;
  h.config.max_iterations = 3;
  std::string edit = "<<<<<<< SEARCH\n// fake-time-us: 500\n=======\n// fake-time-us: 250\n>>>>>>> REPLACE\n";
  h.answers = {{1, "OPTIMISATION: edits first\n" + edit},
               {2, testing::kernel_answer("base", "correct", 500)},
               {3, testing::kernel_answer("both", "correct", 400) + edit}};
  OpState st;
  ASSERT_TRUE(h.run(st));
  ASSERT_EQ(st.attempts.size(), 3u);
  EXPECT_EQ(st.attempts[0].verdict, eval::Verdict::bad_answer);
  EXPECT_EQ(st.attempts[0].message,
            "the answer gives edits in the draft stage; edits are taken only against the incumbent when refining, so give "
            "the whole kernel");
  EXPECT_EQ(st.attempts[1].stage, memory::Stage::draft);  // asked again as it was
  std::string second;
  for (const auto& c : h.llm->calls()) {
    if (testing::attempt_number(c.messages) == 2 && c.params.purpose != "reflect") second = c.messages[1].content;
  }
  EXPECT_NE(second.find("Nothing was evaluated: the answer gives edits in the draft stage"), std::string::npos) << second;
  EXPECT_EQ(second.find("incumbent's source is unchanged"), std::string::npos);  // there is no incumbent
  EXPECT_TRUE(st.attempts[1].improved);
  EXPECT_EQ(st.attempts[2].verdict, eval::Verdict::bad_answer);
  EXPECT_EQ(st.attempts[2].message, "the answer holds both a whole kernel and edits; give one or the other");
  EXPECT_EQ(h.evaluator.calls(), 1);
}

TEST(EditAnswersInTheLoop, AMalformedBlockIsABadAnswer) {
  testing::Harness h;
  h.config.max_iterations = 2;
  h.answers = {{1, testing::kernel_answer("base", "correct", 500)},
               {2, "OPTIMISATION: cut\n<<<<<<< SEARCH\n// fake-time-us: 500\n=======\n// fake-time-us: 250\n"}};
  OpState st;
  ASSERT_TRUE(h.run(st));
  ASSERT_EQ(st.attempts.size(), 2u);
  EXPECT_EQ(st.attempts[1].verdict, eval::Verdict::bad_answer);
  EXPECT_EQ(st.attempts[1].message, "edit 1 (SEARCH `// fake-time-us: 500`) is cut off before its >>>>>>> REPLACE line");
}

// The memory's error signature of a bad answer names its cause from the message's wording, so
// the wording the applier and the loop use must keep matching it.
TEST(EditAnswersInTheLoop, BadAnswerMessagesHaveTheirOwnSignatures) {
  auto sig = [](const Result<std::string>& r) {
    return r ? std::string("applied") : memory::error_signature(eval::Verdict::bad_answer, r.error().message, "");
  };
  std::string src = "int a;\nint b;\nint a;\n";
  EXPECT_EQ(sig(apply_edits(src, {{"int c;\n", "", 0}})), "bad_answer:edit_no_match");
  EXPECT_EQ(sig(apply_edits(src, {{"int a;\n", "", 0}})), "bad_answer:edit_ambiguous");
  EXPECT_EQ(sig(apply_edits(src, {{"int a;\nint b;\n", "", 0}, {"int b;\nint a;\n", "", 0}})), "bad_answer:edit_overlap");
  EXPECT_EQ(sig(apply_edits(src, {{"", "x\n", 0}})), "bad_answer:edit_empty_search");
  auto cut = parse_answer("<<<<<<< SEARCH\nint a;\n");
  EXPECT_EQ(memory::error_signature(eval::Verdict::bad_answer, cut.edit_problem, ""), "bad_answer:edit_malformed");
}

Attempt attempt_at(int k, eval::Verdict verdict, memory::Stage stage, std::optional<double> fraction = std::nullopt,
                   bool improved = false) {
  Attempt a;
  a.iteration = k;
  a.stage = stage;
  a.verdict = verdict;
  a.improved = improved;
  if (fraction) {
    TimingSummary t;
    t.case_index = 1;
    t.roofline_us = 100;
    t.median_us = 100 / *fraction;
    t.fraction_of_roofline = *fraction;
    a.timings.push_back(t);
    a.fraction_of_roofline = fraction;
  }
  return a;
}

TEST(PlanAfterABadAnswer, TheSameStageFromTheSameParent) {
  run::LoopConfig cfg;
  OpState st;
  st.attempts.push_back(attempt_at(1, eval::Verdict::correct, memory::Stage::draft, 0.5, true));
  st.attempts.push_back(attempt_at(2, eval::Verdict::bad_answer, memory::Stage::refine));
  st.attempts.back().parent_iteration = 1;
  Plan p = plan_next(st, cfg);
  EXPECT_EQ(p.stage, memory::Stage::refine);
  EXPECT_EQ(p.parent_iteration, 1);
  // A bad answer to a repair repairs the same attempt, and counts as a repair.
  cfg.max_consecutive_repairs = 2;
  st.attempts.push_back(attempt_at(3, eval::Verdict::wrong_result, memory::Stage::refine));
  st.attempts.push_back(attempt_at(4, eval::Verdict::bad_answer, memory::Stage::repair));
  st.attempts.back().parent_iteration = 3;
  p = plan_next(st, cfg);
  EXPECT_EQ(p.stage, memory::Stage::repair);
  EXPECT_EQ(p.parent_iteration, 3);
  st.attempts.push_back(attempt_at(5, eval::Verdict::bad_answer, memory::Stage::repair));
  st.attempts.back().parent_iteration = 3;
  p = plan_next(st, cfg);  // two repairs in a row: back to the incumbent
  EXPECT_EQ(p.stage, memory::Stage::refine);
  EXPECT_EQ(p.parent_iteration, 1);
  // Without an incumbent a bad draft is drafted again.
  OpState fresh;
  fresh.attempts.push_back(attempt_at(1, eval::Verdict::bad_answer, memory::Stage::draft));
  p = plan_next(fresh, cfg);
  EXPECT_EQ(p.stage, memory::Stage::draft);
  EXPECT_FALSE(p.parent_iteration);
}

// A reflection says why an op stopped in words, with the rule's facts; a rule kope does not
// know is named as it is.
TEST(GapStopRule, StopSentenceExplainsTheRule) {
  EXPECT_EQ(stop_sentence("library", "1.31x the library (target 1.20x)"),
            "stop: library, the best kernel reached the library target: 1.31x the library (target 1.20x)");
  EXPECT_EQ(stop_sentence("iterations", ""), "stop: iterations, the attempt limit was reached");
  EXPECT_EQ(stop_sentence("replay_verified", ""), "stop: replay_verified");
  EXPECT_EQ(stop_sentence("newer_rule", "3 of 4"), "stop: newer_rule: 3 of 4");
}

TEST(GapStopRule, PatienceGrowsWithTheGapToTheRoof) {
  EXPECT_EQ(gap_patience(0.9, 2, 0.3), 2);
  EXPECT_EQ(gap_patience(0.8, 2, 0.3), 3);  // a gap of exactly one step
  EXPECT_EQ(gap_patience(0.7, 2, 0.3), 3);
  EXPECT_EQ(gap_patience(0.5, 2, 0.3), 4);
  EXPECT_EQ(gap_patience(0.3, 2, 0.3), 5);
  EXPECT_EQ(gap_patience(1.2, 2, 0.3), 2);  // beyond the roof (a roofline model's error): no negative gap
  EXPECT_FALSE(gap_patience(0.29, 2, 0.3));  // far from the roof: no patience stop
}

TEST(GapStopRule, RoofFractionIsTheLeastTimedCase) {
  Attempt a = attempt_at(1, eval::Verdict::correct, memory::Stage::draft, 0.9);
  TimingSummary far = a.timings[0];
  far.case_index = 2;
  far.fraction_of_roofline = 0.4;
  a.timings.push_back(far);
  EXPECT_EQ(roof_fraction(a), 0.4);
  TimingSummary no_roof = far;
  no_roof.case_index = 3;
  no_roof.roofline_us = 0;
  no_roof.fraction_of_roofline = 0;
  a.timings.push_back(no_roof);
  EXPECT_EQ(roof_fraction(a), 0.4);  // a case without a roofline says nothing
  Attempt untimed;
  EXPECT_FALSE(roof_fraction(untimed));
  untimed.fraction_of_roofline = 0.6;
  EXPECT_EQ(roof_fraction(untimed), 0.6);
}

TEST(GapStopRule, StopsAfterThePatienceItsGapAllows) {
  run::LoopConfig cfg;
  cfg.max_iterations = 20;
  cfg.roofline_target = 0.8;
  cfg.patience = 1;  // the fixed rule's; the gap rule ignores it
  cfg.stop_rule = run::StopRule::gap;
  cfg.gap_patience = 2;
  cfg.gap_floor = 0.3;
  OpState st;
  st.attempts.push_back(attempt_at(1, eval::Verdict::correct, memory::Stage::draft, 0.5, true));
  // At 50% of the roof: patience 4.
  for (int k = 2; k <= 4; ++k) {
    st.attempts.push_back(attempt_at(k, eval::Verdict::correct, memory::Stage::refine, 0.45));
    EXPECT_FALSE(stop_decision(st, cfg)) << k;
  }
  st.attempts.push_back(attempt_at(5, eval::Verdict::bad_answer, memory::Stage::refine));
  auto d = stop_decision(st, cfg);
  ASSERT_TRUE(d);
  EXPECT_EQ(d->reason, "near_roof");
  EXPECT_EQ(d->detail, "4 attempts without a new incumbent (patience 4 at 50% of the roofline)");
  // Far from the roof only the other limits stop the op.
  OpState far;
  far.attempts.push_back(attempt_at(1, eval::Verdict::correct, memory::Stage::draft, 0.1, true));
  for (int k = 2; k <= 10; ++k) far.attempts.push_back(attempt_at(k, eval::Verdict::wrong_result, memory::Stage::refine));
  EXPECT_FALSE(stop_decision(far, cfg));
  cfg.max_iterations = 10;
  EXPECT_EQ(stop_reason(far, cfg), "iterations");
  // At the roofline target the roofline rule stops at once, whichever patience rule is chosen.
  OpState near;
  near.attempts.push_back(attempt_at(1, eval::Verdict::correct, memory::Stage::draft, 0.85, true));
  EXPECT_EQ(stop_reason(near, cfg), "roofline");
  cfg.stop_rule = run::StopRule::fixed;
  EXPECT_EQ(stop_reason(near, cfg), "roofline");
  // The library target: once the incumbent is that many times as fast as the library, and only
  // on an op with a library baseline.
  cfg.library_target = 1.2;
  OpState lib;
  lib.attempts.push_back(attempt_at(1, eval::Verdict::correct, memory::Stage::draft, 0.4, true));
  EXPECT_FALSE(stop_decision(lib, cfg));  // no library baseline
  lib.attempts[0].speedup_vs_library = 1.19;
  EXPECT_FALSE(stop_decision(lib, cfg));
  lib.attempts[0].speedup_vs_library = 1.2;
  auto by_library = stop_decision(lib, cfg);
  ASSERT_TRUE(by_library);
  EXPECT_EQ(by_library->reason, "library");
  EXPECT_EQ(by_library->detail, "1.20x the library (target 1.20x)");
  // Beating a library that is slower than the plain reference is no reason to stop.
  lib.attempts[0].speedup_vs_reference = 0.65;
  lib.attempts[0].speedup_vs_library = 1.57;
  EXPECT_FALSE(stop_decision(lib, cfg));
  lib.attempts[0].speedup_vs_reference = 1.1;
  EXPECT_EQ(stop_reason(lib, cfg), "library");
  cfg.library_target = 0;
  EXPECT_FALSE(stop_decision(lib, cfg));
  // The fixed rule: cfg.patience attempts, whatever the gap.
  auto fixed = stop_decision(st, cfg);
  ASSERT_TRUE(fixed);
  EXPECT_EQ(fixed->reason, "no_improvement");
  EXPECT_EQ(fixed->detail, "4 attempts without a new incumbent (patience 1)");
}

TEST(GapStopRule, TheLoopRecordsWhyItStopped) {
  testing::Harness h;
  h.config.max_iterations = 10;
  h.config.stop_rule = run::StopRule::gap;
  h.config.gap_patience = 2;
  // The fake roofline is 100 us: 250 us is 40% of it, patience 2 + 3 = 5.
  h.answers = {{1, testing::kernel_answer("base", "correct", 250)}};
  for (int k = 2; k <= 10; ++k) h.answers[k] = testing::kernel_answer("no better", "correct", 250);
  OpState st;
  ASSERT_TRUE(h.run(st));
  EXPECT_EQ(st.attempts.size(), 6u);
  EXPECT_EQ(st.stop_reason, "near_roof");
  auto done = h.events_of("op_done");
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0].at("stop_reason"), "near_roof");
  EXPECT_EQ(done[0].at("stop_rule"), "gap");
  EXPECT_EQ(done[0].at("stop_detail"), "5 attempts without a new incumbent (patience 5 at 40% of the roofline)");
}

// The evidence rule with the gap rule's patience 2 and floor 0.3, up to 20 attempts.
run::LoopConfig evidence_rule_config() {
  run::LoopConfig cfg;
  cfg.max_iterations = 20;
  cfg.stop_rule = run::StopRule::evidence;
  cfg.gap_patience = 2;
  cfg.gap_floor = 0.3;
  return cfg;
}

// A draft at 15% of its roofline, the incumbent, and a refinement that did not beat it.
OpState draft_then_refinement() {
  OpState st;
  st.attempts.push_back(attempt_at(1, eval::Verdict::correct, memory::Stage::draft, 0.15, true));
  st.attempts.push_back(attempt_at(2, eval::Verdict::correct, memory::Stage::refine, 0.12));
  return st;
}

TEST(EvidenceStopRule, ShortensTheGapRulesPatienceWhereMemorySaysRefinementsSeldomWon) {
  run::RefineEvidence seldom{"normalization", 8, 1};  // w = 2 / 10
  // The gap rule's patience without its floor, times w / 0.5, rounded, at least 1.
  EXPECT_EQ(evidence_patience(0.15, 2, seldom), 2);   // 6 x 0.4 = 2.4
  EXPECT_EQ(evidence_patience(0.5, 2, seldom), 2);    // 4 x 0.4 = 1.6
  EXPECT_EQ(evidence_patience(0.95, 2, seldom), 1);   // 2 x 0.4 = 0.8
  EXPECT_EQ(evidence_patience(std::nullopt, 2, seldom), 3);  // unknown: the widest gap, 7 x 0.4
  EXPECT_EQ(evidence_patience(0.5, 2, run::RefineEvidence{"conv", 30, 0}), 1);
  // Memory has not spoken: too few refinements, or they won as often as not.
  EXPECT_FALSE(evidence_patience(0.5, 2, run::RefineEvidence{"conv", 2, 0}));
  EXPECT_FALSE(evidence_patience(0.5, 2, run::RefineEvidence{"conv", 6, 3}));
  EXPECT_EQ(evidence_patience(0.5, 2, run::RefineEvidence{"conv", 6, 2}), 3);  // w = 3/8: 4 x 0.75

  run::LoopConfig cfg = evidence_rule_config();
  cfg.roofline_target = 0.8;
  OpState st = draft_then_refinement();
  EXPECT_FALSE(stop_decision(st, cfg));  // below the gap rule's floor, and no evidence: go on
  st.op_pack = run::OpPackRecord{"", {}, seldom};
  EXPECT_FALSE(stop_decision(st, cfg));  // 1 attempt of the 2 allowed
  st.attempts.push_back(attempt_at(3, eval::Verdict::compile_error, memory::Stage::refine));
  auto d = stop_decision(st, cfg);
  ASSERT_TRUE(d);
  EXPECT_EQ(d->reason, "unlikely_to_pay");
  EXPECT_EQ(d->detail,
            "2 attempts without a new incumbent (patience 2: 1 of the 8 refinements of normalization operators memory holds "
            "for this machine won)");
  // The gap rule ignores the evidence.
  cfg.stop_rule = run::StopRule::gap;
  EXPECT_FALSE(stop_decision(st, cfg));
}

// The rule weighs memory's evidence as the latest prompt saw it, not only as the op's first
// prompt fixed it in the op pack: refinements recorded while the op ran (by this op or the
// run's others) count.
TEST(EvidenceStopRule, TheLatestPromptsEvidenceOutweighsTheOpPacks) {
  run::LoopConfig cfg = evidence_rule_config();
  OpState st = draft_then_refinement();
  st.attempts.push_back(attempt_at(3, eval::Verdict::correct, memory::Stage::refine, 0.12));
  st.op_pack = run::OpPackRecord{"", {}, run::RefineEvidence{"fused", 3, 3}};  // refinements paid, then
  EXPECT_FALSE(stop_decision(st, cfg));
  run::PromptEvent later;
  later.purpose = "refine";
  later.iteration = 3;
  later.evidence = run::RefineEvidence{"fused", 20, 1};  // ... and seldom since: w = 2/22, patience 1
  ASSERT_TRUE(run::apply(st, later));
  EXPECT_EQ(st.refine_evidence(), &*st.evidence);
  auto d = stop_decision(st, cfg);
  ASSERT_TRUE(d);
  EXPECT_EQ(d->reason, "unlikely_to_pay");
  EXPECT_NE(d->detail.find("1 of the 20 refinements of fused operators"), std::string::npos) << d->detail;
  // A reflection prompt carries none and changes nothing.
  run::PromptEvent reflect;
  reflect.purpose = "reflect";
  reflect.key = "end";
  ASSERT_TRUE(run::apply(st, reflect));
  EXPECT_EQ(st.evidence, (run::RefineEvidence{"fused", 20, 1}));
}

TEST(EvidenceStopRule, AnOpPacksEvidenceIsLoggedAndReadBack) {
  run::OpPackRecord pack{"## pack", {}, run::RefineEvidence{"conv", 5, 2}};
  auto back = run::op_pack_from_json(run::op_pack_json(pack));
  ASSERT_TRUE(back) << back.error().message;
  EXPECT_EQ(back->evidence, pack.evidence);
  // Runs from before it: no evidence.
  auto old = run::op_pack_from_json(nlohmann::json{{"text", "## pack"}, {"items", nlohmann::json::array()}});
  ASSERT_TRUE(old);
  EXPECT_FALSE(old->evidence);
  auto bad = run::op_pack_from_json(nlohmann::json{{"text", "x"}, {"evidence", {{"category", "conv"}}}});
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("evidence"), std::string::npos) << bad.error().message;
}

// Refinements of another normalization op in memory, `wins` of `n` at least 1.05x their parent.
void record_refinements(testing::Harness& h, int n, int wins, const std::string& target) {
  memory::CaseRecord parent;
  parent.natural_key = "earlier/layernorm/1";
  parent.run_id = "earlier";
  parent.task = task_info(h.op);
  parent.task.op = "layernorm";
  parent.task.spec_hash = "spec-layernorm";
  parent.hardware.target = target;
  parent.verdict = eval::Verdict::correct;
  parent.speedup_vs_reference = 2;
  parent.code = "// parent";
  auto pid = h.store.record_case(parent);
  ASSERT_TRUE(pid);
  for (int k = 0; k < n; ++k) {
    memory::CaseRecord c = parent;
    c.natural_key = fmt::format("earlier/layernorm/{}", k + 2);
    c.parent_id = *pid;
    c.stage = memory::Stage::refine;
    c.speedup_vs_parent = k < wins ? 1.3 : 0.9;
    c.speedup_vs_reference = 2 * *c.speedup_vs_parent;
    c.code = fmt::format("// child {}", k);
    ASSERT_TRUE(h.store.record_case(c));
  }
}

TEST(EvidenceStopRule, TheLoopStopsSoonerWithMemoryThanWithout) {
  auto run_with = [](context::Mode mode, const std::string& target) {
    testing::Harness h;
    h.config.max_iterations = 10;
    h.config.stop_rule = run::StopRule::evidence;
    h.config.gap_patience = 2;
    h.config.mode = mode;
    record_refinements(h, 8, 1, target);
    // The fake roofline is 100 us: 250 us is 40% of it, the gap rule's patience 5; with the
    // evidence (w = 0.2), 2.
    h.answers = {{1, testing::kernel_answer("base", "correct", 250)}};
    for (int k = 2; k <= 10; ++k) h.answers[k] = testing::kernel_answer("no better", "correct", 250);
    OpState st;
    EXPECT_TRUE(h.run(st));
    return std::make_pair(st, h.events_of("op_done"));
  };
  std::string here = testing::Harness().evaluator.target().str();
  auto [active, done] = run_with(context::Mode::active, here);
  EXPECT_EQ(active.attempts.size(), 3u);
  EXPECT_EQ(active.stop_reason, "unlikely_to_pay");
  ASSERT_TRUE(active.op_pack && active.op_pack->evidence);
  EXPECT_EQ(*active.op_pack->evidence, (run::RefineEvidence{"normalization", 8, 1}));
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0].at("stop_rule"), "evidence");
  // Mode none asks memory nothing: the gap rule's patience.
  auto [none, none_done] = run_with(context::Mode::none, here);
  EXPECT_EQ(none.attempts.size(), 6u);
  EXPECT_EQ(none.stop_reason, "near_roof");
  // Refinements recorded for another target are no evidence here; the op's own are, once there
  // are three (the latest prompt's evidence): attempt 5's prompt saw 0 of 3 won, patience 2 (w =
  // 0.2), where the gap rule alone would have allowed 5.
  auto [elsewhere, elsewhere_done] = run_with(context::Mode::active, "some-other-target");
  EXPECT_EQ(elsewhere.attempts.size(), 5u);
  EXPECT_EQ(elsewhere.stop_reason, "unlikely_to_pay");
  ASSERT_TRUE(elsewhere.evidence);
  EXPECT_EQ(*elsewhere.evidence, (run::RefineEvidence{"normalization", 3, 0}));
  ASSERT_TRUE(elsewhere.op_pack);
  EXPECT_FALSE(elsewhere.op_pack->evidence);  // the first prompt: no refinements here yet
}

TEST(StopRuleConfig, RoundTripsAndOlderConfigsReadAsFixed) {
  run::LoopConfig c;
  c.stop_rule = run::StopRule::gap;
  c.gap_patience = 3;
  c.gap_floor = 0.4;
  auto j = run::loop_config_to_json(c);
  auto back = run::loop_config_from_json(j);
  ASSERT_TRUE(back) << back.error().message;
  EXPECT_EQ(back->stop_rule, run::StopRule::gap);
  EXPECT_EQ(back->gap_patience, 3);
  EXPECT_EQ(back->gap_floor, 0.4);
  j.erase("stop_rule");
  j.erase("gap_patience");
  j.erase("gap_floor");
  auto old = run::loop_config_from_json(j);
  ASSERT_TRUE(old);
  EXPECT_EQ(old->stop_rule, run::StopRule::fixed);
  j["stop_rule"] = "sometimes";
  auto bad = run::loop_config_from_json(j);
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("unknown stop_rule \"sometimes\""), std::string::npos);
}

}  // namespace
}  // namespace kope::agent
