#include "spec/generate.h"

#include <cmath>
#include <cstring>
#include <vector>

#include <gtest/gtest.h>

#include "util/hash.h"

namespace kope::spec {
namespace {

constexpr const char* GOLDEN_NORMAL_F32 =
    "fb1e65d67053f4b7a6bbc09cc44292d127dcbb17808405ffaaf55f110ca59bd2";
constexpr const char* GOLDEN_NORMAL_F64 =
    "c51d3ed815a0c886b05f6017f942dc284bf4d9ff71d5f9dee4decb1c77bdc4f0";
constexpr const char* GOLDEN_UNIFORM_F32 =
    "f4ed3dea1f1be0b03687816cbc8930b67d0c585dc0a167c45a011e87cea7521f";
constexpr const char* GOLDEN_RANDINT_I64 =
    "26dd74ccbe8f5c6149227db01530a2c2cde9f9c43cd94990ae8751dc98bc4c68";
constexpr const char* GOLDEN_SPECIALS_F32 =
    "e5ce1aecd8ac57788dfe74f44769a524f9931efabfcd8cfcd21cd82f635c0b20";
constexpr const char* GOLDEN_ARANGE_F32 =
    "27d6312bc131e13f6768c6b471ea79aabd43eb21dcf010f66de482404295384e";

std::string hash_of(const char* init, DType dtype, size_t n, uint64_t seed, DimValues dims = {}) {
  auto spec = InitSpec::parse(init, dtype);
  EXPECT_TRUE(spec) << init;
  std::vector<unsigned char> buf(n * dtype_size(dtype));
  generate(*spec, dtype, dims, seed, buf.data(), n);
  return util::sha256_hex(std::string_view(reinterpret_cast<const char*>(buf.data()), buf.size()));
}

// Golden hashes: these bytes must never change, on any machine or compiler. If a generator
// change is intended, every stored seed becomes meaningless: bump the format, don't edit these.
TEST(Generate, GoldenHashes) {
  EXPECT_EQ(hash_of("normal(0, 1)", DType::f32, 10000, 42), GOLDEN_NORMAL_F32);
  EXPECT_EQ(hash_of("normal(0, 3)", DType::f64, 10000, 7), GOLDEN_NORMAL_F64);
  EXPECT_EQ(hash_of("uniform(-1, 1)", DType::f32, 10000, 42), GOLDEN_UNIFORM_F32);
  EXPECT_EQ(hash_of("randint(0, N-1)", DType::i64, 10000, 42, {{"N", 97}}), GOLDEN_RANDINT_I64);
  EXPECT_EQ(hash_of("normal(0, 1) | specials(0.05)", DType::f32, 10000, 42), GOLDEN_SPECIALS_F32);
  EXPECT_EQ(hash_of("arange(1, 0.5)", DType::f32, 1000, 1), GOLDEN_ARANGE_F32);
}

TEST(Generate, LargeTensorsAreThreadIndependent) {
  // A tensor big enough to be filled by several threads equals the block-by-block definition.
  size_t n = 3 * 4096 * 64 + 17;
  auto spec = InitSpec::parse("normal(1, 2)", DType::f32);
  std::vector<float> big(n), small(4096 * 2);
  generate(*spec, DType::f32, {}, 99, big.data(), n);
  generate(*spec, DType::f32, {}, 99, small.data(), small.size());
  EXPECT_EQ(std::memcmp(big.data(), small.data(), small.size() * 4), 0);
}

TEST(Generate, DifferentSeedsDiffer) {
  EXPECT_NE(hash_of("normal(0, 1)", DType::f32, 100, 1), hash_of("normal(0, 1)", DType::f32, 100, 2));
  EXPECT_NE(derive_seed(1, 0, 0), derive_seed(1, 0, 1));
  EXPECT_NE(derive_seed(1, 0, 0), derive_seed(1, 1, 0));
}

TEST(Generate, Statistics) {
  size_t n = 200000;
  std::vector<double> v(n);
  generate(*InitSpec::parse("normal(2, 3)", DType::f64), DType::f64, {}, 5, v.data(), n);
  double mean = 0, var = 0;
  for (double x : v) mean += x;
  mean /= static_cast<double>(n);
  for (double x : v) var += (x - mean) * (x - mean);
  var /= static_cast<double>(n);
  EXPECT_NEAR(mean, 2.0, 0.05);
  EXPECT_NEAR(std::sqrt(var), 3.0, 0.05);
  std::vector<int32_t> r(n);
  generate(*InitSpec::parse("randint(-3, 3)", DType::i32), DType::i32, {}, 5, r.data(), n);
  int lo = 0, hi = 0;
  for (int x : r) {
    ASSERT_GE(x, -3);
    ASSERT_LE(x, 3);
    lo += x == -3;
    hi += x == 3;
  }
  EXPECT_GT(lo, 0);
  EXPECT_GT(hi, 0);
}

TEST(Generate, SpecialsAppear) {
  size_t n = 20000;
  std::vector<float> v(n);
  generate(*InitSpec::parse("uniform(1, 2) | specials(0.1)", DType::f32), DType::f32, {}, 3, v.data(), n);
  int nan = 0, inf = 0, negzero = 0, sub = 0;
  for (float x : v) {
    if (std::isnan(x)) ++nan;
    else if (std::isinf(x)) ++inf;
    else if (x == 0 && std::signbit(x)) ++negzero;
    else if (std::fpclassify(x) == FP_SUBNORMAL) ++sub;
  }
  EXPECT_GT(nan, 100);
  EXPECT_GT(inf, 100);
  EXPECT_GT(negzero, 100);
  EXPECT_GT(sub, 100);
}

TEST(Generate, DetLogMatchesLibm) {
  for (double x : {1e-300, 1e-10, 0.1, 0.5, 0.7, 1.0, 1.5, 2.0, 10.0, 1e10, 1e300}) {
    EXPECT_NEAR(det_log(x), std::log(x), 1e-14 * std::max(1.0, std::fabs(std::log(x)))) << x;
  }
}

}  // namespace
}  // namespace kope::spec
