#include "agent/answer.h"

#include <filesystem>

#include <gtest/gtest.h>

#include "util/fs.h"

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

}  // namespace
}  // namespace kope::agent
