#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "kope/eval.h"

namespace kope::eval {
namespace {

TEST(Verdict, NamesRoundTrip) {
  for (Verdict v : {Verdict::correct, Verdict::wrong_result, Verdict::compile_error, Verdict::runtime_error, Verdict::timeout,
                    Verdict::resource_limit, Verdict::rejected, Verdict::bad_answer}) {
    auto back = parse_verdict(verdict_name(v));
    ASSERT_TRUE(back);
    EXPECT_EQ(*back, v);
  }
  EXPECT_EQ(verdict_name(Verdict::wrong_result), "wrong_result");
  EXPECT_FALSE(parse_verdict("fast"));
  EXPECT_EQ(verdict_names(), "correct, wrong_result, compile_error, runtime_error, timeout, resource_limit, rejected, bad_answer");
}

EvalResult sample() {
  EvalResult r;
  r.verdict = Verdict::correct;
  r.message = "matches the reference on all 2 cases";
  r.diagnostics = "note";
  r.op = "vadd";
  r.target = "x86_64-avx2-fma";
  r.toolchain = "g++ 12 | -O3";
  r.code_hash = "abc";
  r.seed = 18446744073709551615ULL;  // survives as an unsigned 64-bit number
  r.cases = {{0, "N=1", true, 0, ""}, {1, "N=8", false, 0.5, "z[3]: got 1, expected 2"}};
  CaseTiming t;
  t.case_index = 1;
  t.label = "N=8";
  t.median_us = 12.5;
  t.ci95_us = 0.25;
  t.samples_us = {12, 12.5, 13};
  t.calls_per_batch = 400;
  t.reference_us = 50;
  t.reference_ci95_us = 1;
  t.roofline_us = 2;
  t.fraction_of_roofline = 0.16;
  t.floor_us = 1;
  t.fresh_us = 14;
  t.contention = 0.4;
  t.disturbed = true;
  r.timing = {t};
  r.disturbed = true;
  r.speedup_vs_reference = 4;
  r.compile_seconds = 0.5;
  r.compile_cached = true;
  r.wall_seconds = 2;
  return r;
}

TEST(EvalResult, JsonRoundTrip) {
  EvalResult r = sample();
  auto back = EvalResult::from_json(r.to_json());
  ASSERT_TRUE(back) << back.error().message;
  EXPECT_EQ(back->verdict, r.verdict);
  EXPECT_EQ(back->message, r.message);
  EXPECT_EQ(back->seed, r.seed);
  ASSERT_EQ(back->cases.size(), 2u);
  EXPECT_TRUE(back->cases[0].first_mismatch.empty());
  EXPECT_EQ(back->cases[1].first_mismatch, "z[3]: got 1, expected 2");
  EXPECT_DOUBLE_EQ(back->cases[1].max_abs_err, 0.5);
  ASSERT_EQ(back->timing.size(), 1u);
  EXPECT_EQ(back->timing[0].samples_us, r.timing[0].samples_us);
  EXPECT_EQ(back->timing[0].calls_per_batch, 400);
  EXPECT_FALSE(back->timing[0].library_us);
  EXPECT_DOUBLE_EQ(back->timing[0].reference_ci95_us, 1);
  EXPECT_TRUE(back->timing[0].disturbed);
  EXPECT_DOUBLE_EQ(back->timing[0].contention, 0.4);
  EXPECT_TRUE(back->disturbed);
  EXPECT_DOUBLE_EQ(*back->speedup_vs_reference, 4);
  EXPECT_FALSE(back->speedup_vs_library);
  EXPECT_TRUE(back->compile_cached);
  EXPECT_EQ(back->to_json(), r.to_json());
  EXPECT_EQ(r.to_json().find("roofline_gbps_profile"), std::string::npos);  // nothing measured beside the timing

  // A roof read at the bandwidth measured beside the timing keeps the profile's figure too.
  r.timing[0].roofline_gbps = 48.5;
  r.timing[0].roofline_gbps_profile = 104.8;
  auto measured = EvalResult::from_json(r.to_json());
  ASSERT_TRUE(measured) << measured.error().message;
  EXPECT_DOUBLE_EQ(measured->timing[0].roofline_gbps, 48.5);
  EXPECT_DOUBLE_EQ(measured->timing[0].roofline_gbps_profile, 104.8);
}

// The contract outside tests rely on: field names, nulls for absent values.
TEST(EvalResult, JsonContractFields) {
  EvalResult r = sample();
  r.verdict = Verdict::wrong_result;
  r.speedup_vs_reference.reset();
  auto j = nlohmann::json::parse(r.to_json());
  for (const char* k : {"verdict", "message", "op", "target", "cases", "timing", "speedup_vs_reference", "speedup_vs_library"}) {
    EXPECT_TRUE(j.contains(k)) << k;
  }
  EXPECT_EQ(j["verdict"], "wrong_result");
  EXPECT_TRUE(j["speedup_vs_reference"].is_null());
  EXPECT_TRUE(j["speedup_vs_library"].is_null());
  for (const char* k : {"case", "ok", "max_abs_err", "first_mismatch"}) EXPECT_TRUE(j["cases"][0].contains(k)) << k;
  EXPECT_TRUE(j["cases"][0]["first_mismatch"].is_null());
  for (const char* k : {"case", "median_us", "ci95_us", "samples", "reference_us", "library_us", "roofline_us"}) {
    EXPECT_TRUE(j["timing"][0].contains(k)) << k;
  }
  EXPECT_TRUE(j["timing"][0]["library_us"].is_null());
  EXPECT_TRUE(j["timing"][0]["samples"].is_array());
}

TEST(EvalResult, NonFiniteNumbersBecomeNull) {
  EvalResult r = sample();
  r.cases[1].max_abs_err = std::numeric_limits<double>::infinity();
  auto j = nlohmann::json::parse(r.to_json());
  EXPECT_TRUE(j["cases"][1]["max_abs_err"].is_null());
  auto back = EvalResult::from_json(r.to_json());
  ASSERT_TRUE(back);
  EXPECT_DOUBLE_EQ(back->cases[1].max_abs_err, 0);
}

TEST(EvalResult, RejectsGarbage) {
  EXPECT_FALSE(EvalResult::from_json("{"));
  EXPECT_FALSE(EvalResult::from_json(R"({"verdict": "great"})"));
  auto e = EvalResult::from_json("[]");
  ASSERT_FALSE(e);
  EXPECT_EQ(e.error().kind, ErrorKind::corrupt);
}

}  // namespace
}  // namespace kope::eval
