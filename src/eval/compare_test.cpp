#include "eval/compare.h"

#include <cmath>
#include <limits>
#include <vector>

#include <gtest/gtest.h>

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

TEST(Compare, FormatsMultiDimensionalIndex) {
  EXPECT_EQ(format_index(0, {3, 4}), "[0, 0]");
  EXPECT_EQ(format_index(7, {3, 4}), "[1, 3]");
  EXPECT_EQ(format_index(23, {2, 3, 4}), "[1, 2, 3]");
  EXPECT_EQ(format_index(0, {}), "[]");
}

}  // namespace
}  // namespace kope::eval
