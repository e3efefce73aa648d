#include "eval/compare.h"

#include <cmath>
#include <limits>
#include <optional>
#include <vector>

#include <gtest/gtest.h>

#include "spec/dtype.h"

namespace kope::eval {
namespace {

const float k_nan = std::numeric_limits<float>::quiet_NaN();
const float k_inf = std::numeric_limits<float>::infinity();

TEST(Compare, ExactAndWithinTolerance) {
  std::vector<float> e = {1, 2, 3}, g = {1, 2.0001f, 3};
  auto r = compare_tensor(spec::DType::f32, g.data(), e.data(), 3, {1e-3, 0});
  EXPECT_TRUE(r.ok);
  EXPECT_NEAR(r.max_abs_err, 1e-4, 1e-6);
  r = compare_tensor(spec::DType::f32, g.data(), e.data(), 3, {1e-6, 0});
  EXPECT_FALSE(r.ok);
  ASSERT_TRUE(r.first);
  EXPECT_EQ(r.first->index, 1u);
}

TEST(Compare, RelativeTolerance) {
  std::vector<double> e = {1000}, g = {1000.5};
  EXPECT_TRUE(compare_tensor(spec::DType::f64, g.data(), e.data(), 1, {0, 1e-3}).ok);
  EXPECT_FALSE(compare_tensor(spec::DType::f64, g.data(), e.data(), 1, {0, 1e-4}).ok);
}

TEST(Compare, NanAndInfPositionsMustMatch) {
  std::vector<float> e = {k_nan, k_inf, -k_inf, 0};
  std::vector<float> g = e;
  EXPECT_TRUE(compare_tensor(spec::DType::f32, g.data(), e.data(), 4, {1, 1}).ok);
  g[0] = 0;  // NaN expected, number produced: even a huge tolerance does not help
  auto r = compare_tensor(spec::DType::f32, g.data(), e.data(), 4, {1e30f, 1});
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.first->expected_text, "nan");
  g = e;
  g[1] = -k_inf;
  EXPECT_FALSE(compare_tensor(spec::DType::f32, g.data(), e.data(), 4, {1e30f, 1}).ok);
  g = e;
  g[3] = k_nan;  // NaN produced where a number was expected
  EXPECT_FALSE(compare_tensor(spec::DType::f32, g.data(), e.data(), 4, {1e30f, 1}).ok);
}

TEST(Compare, IntegersAreExact) {
  std::vector<int64_t> e = {(int64_t{1} << 60) + 1}, g = {int64_t{1} << 60};
  auto r = compare_tensor(spec::DType::i64, g.data(), e.data(), 1, {0, 0});
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.mismatches, 1u);
}

TEST(Compare, CountsEveryMismatch) {
  std::vector<int32_t> e = {1, 2, 3, 4}, g = {0, 2, 0, 4};
  auto r = compare_tensor(spec::DType::i32, g.data(), e.data(), 4, {0, 0});
  EXPECT_EQ(r.mismatches, 2u);
  EXPECT_EQ(r.first->index, 0u);
  EXPECT_EQ(r.first->got_text, "0");
}

// Narrow integers and bool are exact whatever the tolerance says.
TEST(Compare, NarrowIntegersAndBoolAreExact) {
  std::vector<int8_t> g = {1, -2, 3}, e = {1, -2, 4};
  auto r = compare_tensor(spec::DType::i8, g.data(), e.data(), 3, {10, 10});
  EXPECT_FALSE(r.ok);
  ASSERT_TRUE(r.first);
  EXPECT_EQ(r.first->index, 2u);
  EXPECT_EQ(r.first->got_text, "3");
  std::vector<uint8_t> bg = {0, 1, 2}, be = {0, 1, 1};
  EXPECT_FALSE(compare_tensor(spec::DType::boolean, bg.data(), be.data(), 3, {1, 1}).ok);  // 2 is not "true"
  EXPECT_TRUE(compare_tensor(spec::DType::boolean, bg.data(), be.data(), 2, {0, 0}).ok);
  std::vector<int16_t> sg = {-300, 7}, se = {-300, 7};
  EXPECT_TRUE(compare_tensor(spec::DType::i16, sg.data(), se.data(), 2, {0, 0}).ok);
}

// bf16/f16 are compared in f32 with the tolerance plus one unit in the last place of the format:
// a neighbouring value passes with a zero tolerance, two units apart does not.
TEST(Compare, HalfFormatsAllowOneUnitInTheLastPlace) {
  for (spec::DType t : {spec::DType::bf16, spec::DType::f16}) {
    auto narrow = [t](float v) { return t == spec::DType::f16 ? spec::f16_from_float(v) : spec::bf16_from_float(v); };
    uint16_t one = narrow(1.0f);
    std::vector<uint16_t> e = {one, one, narrow(k_nan), narrow(-k_inf)};
    std::vector<uint16_t> g = {one, static_cast<uint16_t>(one + 1), narrow(k_nan), narrow(-k_inf)};
    EXPECT_TRUE(compare_tensor(t, g.data(), e.data(), 4, {0, 0}).ok) << spec::dtype_name(t);
    g[1] = static_cast<uint16_t>(one + 2);
    auto r = compare_tensor(t, g.data(), e.data(), 4, {0, 0});
    EXPECT_FALSE(r.ok) << spec::dtype_name(t);
    ASSERT_TRUE(r.first);
    EXPECT_EQ(r.first->index, 1u);
    EXPECT_EQ(r.first->expected_text, "1");
    EXPECT_TRUE(compare_tensor(t, g.data(), e.data(), 4, {0, 0.01}).ok) << spec::dtype_name(t);  // rtol covers 2 units
    g[3] = narrow(k_inf);
    EXPECT_FALSE(compare_tensor(t, g.data(), e.data(), 4, {1, 1}).ok) << spec::dtype_name(t);
  }
}

// The half formats go through a fast pass per chunk too: over every bit pattern of the
// expected value, against results one and two units away (and the same pattern), it gives the
// rule's result element by element: the count, the first mismatch and the largest error.
TEST(Compare, HalfFormatsGiveTheSameResultAsTheRuleOnEveryValue) {
  for (spec::DType t : {spec::DType::bf16, spec::DType::f16}) {
    for (spec::Tolerance tol : {spec::Tolerance{0, 0}, spec::Tolerance{1e-6, 1e-5}, spec::Tolerance{0, 0.01}}) {
      for (int delta : {0, 1, -1, 2, -2}) {
        std::vector<uint16_t> e(65536), g(65536);
        for (size_t i = 0; i < e.size(); ++i) {
          e[i] = static_cast<uint16_t>(i);
          g[i] = static_cast<uint16_t>(static_cast<int>(i) + delta);
        }
        size_t want = 0;
        double want_max = 0;
        std::optional<size_t> first;
        for (size_t i = 0; i < e.size(); ++i) {
          double x = spec::load_element(t, g.data(), i), y = spec::load_element(t, e.data(), i);
          double atol = tol.atol + spec::storage_ulp(t, y);
          bool match = std::isnan(x) || std::isnan(y) ? std::isnan(x) && std::isnan(y)
                       : std::isinf(x) || std::isinf(y) ? x == y
                                                        : std::fabs(x - y) <= atol + tol.rtol * std::fabs(y);
          if (std::isfinite(x) && std::isfinite(y)) want_max = std::max(want_max, std::fabs(x - y));
          if (!match && !first) first = i;
          want += !match;
        }
        SCOPED_TRACE(testing::Message() << spec::dtype_name(t) << " delta " << delta << " rtol " << tol.rtol);
        auto r = compare_tensor(t, g.data(), e.data(), e.size(), tol);
        EXPECT_EQ(r.ok, want == 0);
        EXPECT_EQ(r.mismatches, want);
        EXPECT_EQ(r.max_abs_err, want_max);
        ASSERT_EQ(r.first.has_value(), first.has_value());
        if (first) {
          EXPECT_EQ(r.first->index, *first);
        }
        if (delta == 0) {
          EXPECT_EQ(want, 0u);  // NaN bit patterns match each other
        }
      }
    }
  }
}

// Big tensors go through a branch-free pass per chunk; any special value, mismatch or error at
// the edge of the tolerance, wherever it falls (chunk edges, the unrolled tail), gives the
// same result as the rule applied element by element.
template <class T>
void expect_same_as_the_rule(spec::DType dtype) {
  const double atol = 1e-5, rtol = 1e-4;
  std::vector<T> e(3 * 4096 + 7), g(e.size());
  for (size_t i = 0; i < e.size(); ++i) {
    e[i] = static_cast<T>(std::sin(0.01 * static_cast<double>(i)) * 10);
    g[i] = static_cast<T>(static_cast<double>(e[i]) + atol * 0.5);
  }
  const T nan = std::numeric_limits<T>::quiet_NaN(), inf = std::numeric_limits<T>::infinity();
  for (size_t at : {size_t{0}, size_t{3}, size_t{4095}, size_t{4096}, size_t{8191}, e.size() - 1}) {
    for (int kind = 0; kind < 7; ++kind) {
      std::vector<T> gg = g, ee = e;
      switch (kind) {
        case 0: gg[at] = nan; break;                       // NaN where a number is expected
        case 1: gg[at] = nan, ee[at] = nan; break;          // NaN on both sides: a match
        case 2: ee[at] = inf; break;                       // a finite result where inf is expected
        case 3: gg[at] = -inf, ee[at] = -inf; break;        // the same infinity: a match
        case 4: gg[at] = inf; break;                       // inf where a number is expected
        case 5: gg[at] = static_cast<T>(static_cast<double>(ee[at]) + 1); break;  // far off
        case 6: gg[at] = static_cast<T>(static_cast<double>(ee[at]) * (1 + 3 * rtol)); break;  // just outside
      }
      size_t want = 0;
      double want_max = 0;
      std::optional<size_t> first;
      for (size_t i = 0; i < e.size(); ++i) {
        double x = static_cast<double>(gg[i]), y = static_cast<double>(ee[i]);
        bool match = std::isnan(x) || std::isnan(y) ? std::isnan(x) && std::isnan(y)
                     : std::isinf(x) || std::isinf(y) ? x == y
                                                      : std::fabs(x - y) <= atol + rtol * std::fabs(y);
        if (std::isfinite(x) && std::isfinite(y)) want_max = std::max(want_max, std::fabs(x - y));
        if (!match && !first) first = i;
        want += !match;
      }
      auto r = compare_tensor(dtype, gg.data(), ee.data(), e.size(), {atol, rtol});
      SCOPED_TRACE(testing::Message() << "kind " << kind << " at " << at);
      EXPECT_EQ(r.ok, want == 0);
      EXPECT_EQ(r.mismatches, want);
      EXPECT_EQ(r.max_abs_err, want_max);
      ASSERT_EQ(r.first.has_value(), first.has_value());
      if (first) EXPECT_EQ(r.first->index, *first);
    }
  }
  // Matching specials in every chunk (what specials() inputs give an elementwise op): the
  // comparison passes, and the largest error is the finite pairs' alone.
  std::vector<T> gg = g, ee = e;
  for (size_t i = 5; i < e.size(); i += 37) {
    T special = i % 3 == 0 ? nan : i % 3 == 1 ? inf : -inf;
    gg[i] = ee[i] = special;
  }
  double want_max = 0;
  for (size_t i = 0; i < e.size(); ++i) {
    double x = static_cast<double>(gg[i]), y = static_cast<double>(ee[i]);
    if (std::isfinite(x) && std::isfinite(y)) want_max = std::max(want_max, std::fabs(x - y));
  }
  auto r = compare_tensor(dtype, gg.data(), ee.data(), e.size(), {atol, rtol});
  EXPECT_TRUE(r.ok);
  EXPECT_EQ(r.mismatches, 0u);
  EXPECT_EQ(r.max_abs_err, want_max);
  gg[5 + 37 * 120] = static_cast<T>(1e30);  // one of them (an infinity) wrong
  r = compare_tensor(dtype, gg.data(), ee.data(), e.size(), {atol, rtol});
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.mismatches, 1u);
  // Outputs equal to the reference's bits (specials too) match with no error, even with no
  // tolerance; then two elements of the third chunk off, one beyond the tolerance: only it
  // mismatches, and the largest error is that chunk's.
  r = compare_tensor(dtype, ee.data(), ee.data(), e.size(), {0, 0});
  EXPECT_TRUE(r.ok);
  EXPECT_EQ(r.max_abs_err, 0.0);
  std::vector<T> off = ee;
  off[2 * 4096 + 10] = static_cast<T>(static_cast<double>(ee[2 * 4096 + 10]) + 1);
  off[2 * 4096 + 11] = static_cast<T>(static_cast<double>(ee[2 * 4096 + 11]) + atol * 0.5);
  r = compare_tensor(dtype, off.data(), ee.data(), e.size(), {atol, rtol});
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.mismatches, 1u);
  ASSERT_TRUE(r.first);
  EXPECT_EQ(r.first->index, size_t{2 * 4096 + 10});
  double chunk_max = 0;
  for (size_t i = 2 * 4096; i < 3 * 4096; ++i) {
    double x = static_cast<double>(off[i]), y = static_cast<double>(ee[i]);
    if (std::isfinite(x) && std::isfinite(y)) chunk_max = std::max(chunk_max, std::fabs(x - y));
  }
  EXPECT_EQ(r.max_abs_err, chunk_max);
}

TEST(Compare, BigTensorsGiveTheSameResultAsTheRule) {
  expect_same_as_the_rule<float>(spec::DType::f32);
  expect_same_as_the_rule<double>(spec::DType::f64);
}

// The parts of a tensor, compared apart (on different threads) and merged in order, give the
// whole comparison's result: mismatch count, first mismatch (index from the tensor's start) and
// largest error.
TEST(Compare, PartsMergeToTheWholeResult) {
  std::vector<float> e(10007), g(10007);
  for (size_t i = 0; i < e.size(); ++i) {
    e[i] = static_cast<float>(i % 97) * 0.25f;
    g[i] = e[i] + (i % 13 == 0 ? 1e-5f : 0.0f);
  }
  g[5003] = 7;
  g[9000] = k_nan;
  spec::Tolerance tol{1e-4, 0};
  CompareResult whole = compare_tensor(spec::DType::f32, g.data(), e.data(), e.size(), tol);
  for (int parts : {1, 2, 3, 7}) {
    CompareResult merged = compare_tensor_part(spec::DType::f32, g.data(), e.data(), e.size(), tol, 0, parts);
    for (int k = 1; k < parts; ++k) merge_compare(merged, compare_tensor_part(spec::DType::f32, g.data(), e.data(), e.size(), tol, k, parts));
    EXPECT_EQ(merged.ok, whole.ok) << parts;
    EXPECT_EQ(merged.mismatches, whole.mismatches) << parts;
    EXPECT_EQ(merged.mismatches, 2u);
    EXPECT_EQ(merged.max_abs_err, whole.max_abs_err) << parts;
    ASSERT_TRUE(merged.first);
    EXPECT_EQ(merged.first->index, 5003u) << parts;
  }
  // A tensor with fewer elements than parts: the empty parts match.
  CompareResult tiny = compare_tensor_part(spec::DType::f32, g.data(), e.data(), 1, tol, 0, 4);
  EXPECT_TRUE(tiny.ok);
}

TEST(Compare, FormatsMultiDimensionalIndex) {
  EXPECT_EQ(format_index(0, {3, 4}), "[0, 0]");
  EXPECT_EQ(format_index(7, {3, 4}), "[1, 3]");
  EXPECT_EQ(format_index(23, {2, 3, 4}), "[1, 2, 3]");
  EXPECT_EQ(format_index(0, {}), "[]");
}

}  // namespace
}  // namespace kope::eval
