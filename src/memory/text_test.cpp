#include <gtest/gtest.h>

#include <cmath>

#include "context/context.h"
#include "kope/memory.h"
#include "memory/text.h"

namespace kope::memory {
namespace {

TEST(ErrorSignature, CompileErrorsDifferingOnlyInPlaceAndNameShareASignature) {
  std::string a = error_signature(eval::Verdict::compile_error, "compilation failed",
                                  "candidate.cpp: In function 'void kope_kernel(const float*, float*)':\n"
                                  "candidate.cpp:12:5: error: 'foo' was not declared in this scope\n"
                                  "   12 |     foo(x);\n      |     ^~~\n");
  std::string b = error_signature(eval::Verdict::compile_error, "compilation failed",
                                  "/tmp/scratch-81723/candidate.cpp:40:9: error: 'bar' was not declared in this scope\n");
  EXPECT_EQ(a, b);
  EXPECT_EQ(a, "compile_error: error: 'X' was not declared in this scope");
}

TEST(ErrorSignature, GccUnicodeQuotesAndNumbersAreMasked) {
  std::string a = error_signature(eval::Verdict::compile_error, "",
                                  "k.cpp:3:1: error: \xE2\x80\x98__m512\xE2\x80\x99 does not name a type; 64 bytes\n");
  std::string b = error_signature(eval::Verdict::compile_error, "", "k.cpp:90:17: error: 'float4' does not name a type; 128 bytes\n");
  EXPECT_EQ(a, b);
  EXPECT_EQ(a, "compile_error: error: 'X' does not name a type; N bytes");
}

TEST(ErrorSignature, DifferentCompileErrorsDiffer) {
  std::string a = error_signature(eval::Verdict::compile_error, "", "c.cpp:1:1: error: 'x' was not declared in this scope");
  std::string b = error_signature(eval::Verdict::compile_error, "", "c.cpp:1:1: error: expected ';' before 'return'");
  EXPECT_NE(a, b);
}

TEST(ErrorSignature, FatalErrorsAndPathsAreNormalised) {
  std::string a = error_signature(eval::Verdict::compile_error, "", "c.cpp:1:10: fatal error: /opt/x/immintrin2.h: No such file or directory");
  EXPECT_EQ(a, "compile_error: fatal error: <path>: No such file or directory");
}

TEST(ErrorSignature, IdentifiersWithDigitsSurvive) {
  std::string a = error_signature(eval::Verdict::compile_error, "", "c.cpp:1:10: error: _mm256_fmadd_ps needs -mfma (7 args)");
  EXPECT_EQ(a, "compile_error: error: _mm256_fmadd_ps needs -mfma (N args)");
}

TEST(ErrorSignature, RuntimeErrorsBySignal) {
  EXPECT_EQ(error_signature(eval::Verdict::runtime_error, "killed by signal 11 (SIGSEGV: Segmentation fault)", ""),
            "runtime_error:SIGSEGV");
  EXPECT_EQ(error_signature(eval::Verdict::runtime_error, "killed by signal 8 (SIGFPE)", "at 0x7ff1234"), "runtime_error:SIGFPE");
  EXPECT_EQ(error_signature(eval::Verdict::runtime_error, "wrote outside its buffers (guard page)", ""),
            "runtime_error:out_of_bounds");
  EXPECT_EQ(error_signature(eval::Verdict::runtime_error, "exited with code 3", ""), "runtime_error:exit");
}

TEST(ErrorSignature, WrongResultsByKind) {
  EXPECT_EQ(error_signature(eval::Verdict::wrong_result, "case 2 (N=64 D=1000): y[3, 17]: got nan, expected 0.5", ""),
            "wrong_result:nan_mismatch");
  EXPECT_EQ(error_signature(eval::Verdict::wrong_result, "case 1: y[0, 0]: got inf, expected 1", ""), "wrong_result:inf_mismatch");
  EXPECT_EQ(error_signature(eval::Verdict::wrong_result, "case 2 (N=64 D=1000): y[3, 17]: got 0.25, expected 0.5", ""),
            "wrong_result:value");
  EXPECT_EQ(error_signature(eval::Verdict::wrong_result, "case 0: y[9]: got 0.1, expected 0.2 (info)", ""), "wrong_result:value");
}

TEST(ErrorSignature, OtherVerdicts) {
  EXPECT_EQ(error_signature(eval::Verdict::correct, "ok", ""), "");
  EXPECT_EQ(error_signature(eval::Verdict::timeout, "exceeded the CPU-time limit of 10 s", ""), "timeout:cpu");
  EXPECT_EQ(error_signature(eval::Verdict::timeout, "exceeded the wall-clock limit", ""), "timeout:wall");
  EXPECT_EQ(error_signature(eval::Verdict::resource_limit, "exceeded the memory limit (2 GiB)", ""), "resource_limit:memory");
  EXPECT_EQ(error_signature(eval::Verdict::rejected, "forbidden symbol 'pthread_create' at offset 4242", ""),
            error_signature(eval::Verdict::rejected, "forbidden symbol 'fork' at offset 17", ""));
}

TEST(Outcome, LabelBoundaries) {
  EXPECT_EQ(outcome_for_ratio(1.05), Outcome::effective);
  EXPECT_EQ(outcome_for_ratio(std::nextafter(1.05, 0.0)), Outcome::partial);
  EXPECT_EQ(outcome_for_ratio(1.0), Outcome::partial);
  EXPECT_EQ(outcome_for_ratio(std::nextafter(1.0, 0.0)), Outcome::ineffective);
  EXPECT_EQ(outcome_for_ratio(0.85), Outcome::ineffective);
  EXPECT_EQ(outcome_for_ratio(std::nextafter(0.85, 0.0)), Outcome::negative);
  EXPECT_EQ(outcome_for_ratio(0.0), Outcome::negative);
  EXPECT_EQ(outcome_for_ratio(std::nan("")), Outcome::negative);
  EXPECT_EQ(outcome_for_ratio(40.0), Outcome::effective);
}

TEST(Names, RoundTrip) {
  for (auto s : {Stage::draft, Stage::repair, Stage::refine}) EXPECT_EQ(parse_stage(stage_name(s)), s);
  for (auto o : {Outcome::effective, Outcome::partial, Outcome::ineffective, Outcome::negative}) {
    EXPECT_EQ(parse_outcome(outcome_name(o)), o);
  }
  for (auto k : {LessonKind::strategy, LessonKind::pitfall, LessonKind::fix, LessonKind::recipe}) {
    EXPECT_EQ(parse_lesson_kind(lesson_kind_name(k)), k);
  }
  for (auto s : {LessonStatus::active, LessonStatus::quarantined, LessonStatus::deprecated, LessonStatus::merged}) {
    EXPECT_EQ(parse_lesson_status(lesson_status_name(s)), s);
  }
  EXPECT_FALSE(parse_stage("drafting"));
}

TEST(Names, QuarantineStatusTableAndStoredCodes) {
  // The spellings exports and stored memories use, and the codes case_derived.quarantine holds.
  const std::pair<QuarantineStatus, std::string_view> expected[] = {{QuarantineStatus::none, ""},
                                                                    {QuarantineStatus::quarantined, "quarantined"},
                                                                    {QuarantineStatus::verified, "verified"},
                                                                    {QuarantineStatus::refuted, "refuted"}};
  int64_t code = 0;
  for (const auto& [status, name] : expected) {
    EXPECT_EQ(quarantine_status_name(status), name);
    EXPECT_EQ(parse_quarantine_status(name), status);
    EXPECT_EQ(quarantine_code(status), code);
    EXPECT_EQ(stored_quarantine(code), status);
    EXPECT_EQ(quarantine_holds_back(status),
              status == QuarantineStatus::quarantined || status == QuarantineStatus::refuted);
    ++code;
  }
  EXPECT_EQ(parse_quarantine_status("bogus"), std::nullopt);
  EXPECT_EQ(parse_quarantine_status("Verified"), std::nullopt);
  EXPECT_EQ(stored_quarantine(4), std::nullopt);
  EXPECT_EQ(stored_quarantine(-1), std::nullopt);
}

TEST(Reward, StageConventions) {
  EXPECT_EQ(stage_reward(Stage::draft, eval::Verdict::correct, 0.5), 1.0);
  EXPECT_EQ(stage_reward(Stage::repair, eval::Verdict::wrong_result, 0), 0.25);
  EXPECT_EQ(stage_reward(Stage::draft, eval::Verdict::compile_error, 0), 0.0);
  EXPECT_EQ(stage_reward(Stage::refine, eval::Verdict::compile_error, 0), -1.0);
  EXPECT_NEAR(stage_reward(Stage::refine, eval::Verdict::correct, 1.5), std::log(1.5), 1e-12);
  EXPECT_EQ(stage_reward(Stage::refine, eval::Verdict::correct, 100.0), 1.0);
  EXPECT_EQ(stage_reward(Stage::refine, eval::Verdict::correct, 0.01), -1.0);
  EXPECT_EQ(stage_prior(Stage::draft), 0.5);
  EXPECT_EQ(stage_prior(Stage::refine), 0.0);
}

TEST(Text, TokensSimilarityAndQueries) {
  // The memory's items are estimated by kope's one estimator (a letter run: one token per 5).
  EXPECT_EQ(context::estimate_tokens(""), 0);
  EXPECT_EQ(context::estimate_tokens("abcd"), 1);
  EXPECT_EQ(context::estimate_tokens("abcde"), 1);
  EXPECT_EQ(context::estimate_tokens("abcdef"), 2);
  EXPECT_EQ(normalised_text("Use  the AVX2 loads, then FMA!"), "use avx2 loads fma");
  auto a = token_set("unroll the inner loop by four to hide FMA latency");
  auto b = token_set("Unroll the inner loop by four, to hide the FMA latency.");
  EXPECT_DOUBLE_EQ(jaccard(a, b), 1.0);
  auto c = token_set("block the matrix for the L2 cache");
  EXPECT_LT(jaccard(a, c), 0.2);
  // Quotes and operators in text never reach FTS5 unescaped.
  EXPECT_EQ(fts_or_query("error: 'foo\" NEAR(x) OR -y"), "\"error\" OR \"foo\" OR \"near\"");
  EXPECT_EQ(fts_or_query("!! ??"), "");
  EXPECT_EQ(search_tag("tgt", "x86_64-avx2.fma"), "tgt_x86_64_avx2_fma");
  EXPECT_EQ(clip_text("abcdef", 3), "abc\xE2\x80\xA6");
}

}  // namespace
}  // namespace kope::memory
