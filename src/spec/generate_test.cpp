#include "spec/generate.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "spec/dtype.h"
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

std::string shaped_hash(const char* init, DType dtype, std::vector<int64_t> shape, uint64_t seed) {
  auto spec = InitSpec::parse(init, dtype);
  EXPECT_TRUE(spec) << init;
  size_t n = 1;
  for (int64_t e : shape) n *= static_cast<size_t>(e);
  std::vector<unsigned char> buf(n * dtype_size(dtype));
  generate_shaped(*spec, dtype, {}, shape, seed, buf.data());
  return util::sha256_hex(std::string_view(reinterpret_cast<const char*>(buf.data()), buf.size()));
}

// The same promise for the format-v2 dtypes and generators (values recorded when they were
// introduced; the same rule: never edit them, bump the format).
TEST(Generate, GoldenHashesFormatV2) {
  EXPECT_EQ(shaped_hash("normal(0, 1)", DType::bf16, {10000}, 42), "c818e09fb08232cd0455302a4067f344ae2d650a566024199271ed5e0f911377");
  EXPECT_EQ(shaped_hash("normal(0, 1) | specials(0.05)", DType::f16, {10000}, 42),
            "8389ccf382c1627fcda295dcb78c647285a9a7cfc05d5fdb9393331be84fb159");
  EXPECT_EQ(shaped_hash("randint(-128, 127)", DType::i8, {10000}, 42), "1245bb5e6643d20d0dcef6b204ab1c64e647c9ca646cfc13b665d45daa859ea2");
  EXPECT_EQ(shaped_hash("mask(0.3)", DType::boolean, {10000}, 42), "778bd6136c81788194f70db0d17e2fb9b2c77540c878ea0318fb168808a27f47");
  EXPECT_EQ(shaped_hash("spd(diag = uniform(1, 2), off = uniform(-1, 1))", DType::f32, {3, 40, 40}, 42),
            "8af36781bacc2e8ce6e864a1718460f28d52edcbafe5a91569a646527039220a");
  EXPECT_EQ(shaped_hash("triangular(upper)", DType::f64, {64, 64}, 7), "78bbf97ba29aa6aaf7b1be772177129249952043a5445d53576ce1d598011261");
  EXPECT_EQ(shaped_hash("permutation", DType::i32, {16, 100}, 42), "2e90747415c90374644a8afa0bacfdf77a127b7e17fac44a05a89d5faf36acd1");
  EXPECT_EQ(shaped_hash("index(sqrt(i + 1) * exp(-j / 10) + pow(i, 3) + log(j + 1))", DType::f64, {30, 40}, 1),
            "bdd687043bbf5bbbc2a1e1a29e7f493bdd4d3f6b4f5de6f2c3a15b15d024612f");
}

// The normal generator over many blocks, odd lengths and every float dtype, with and without
// specials: bytes recorded from the scalar polar method before its pairs were computed in bulk
// (fill_normal_block); the bulk path must give them bit for bit.
TEST(Generate, GoldenHashesOfTheNormalPathOverManyBlocks) {
  struct Golden {
    const char* init;
    DType dtype;
    size_t n;
    uint64_t seed;
    const char* sha;
  };
  const Golden golden[] = {
      {"normal(0, 1)", DType::f32, 4096 * 70 + 13, 3,
       "10256de21287d11496aef690487afa994426d9ac052dce8eb1662b0c3f2408af"},
      {"normal(0.5, 2)", DType::f64, 4096 * 9 + 4095, 11,
       "8d7199ae9ee07e14287b26ed439532ae34898abce264fbc3528d863b3f285e11"},
      {"normal(0, 1) | specials(0.01)", DType::f32, 4096 * 66 + 1, 5,
       "f04fb7fa42ccd038bb5ff0cc9e4d440a4fb0f7704e4c7e2cdd3fe28bba06f362"},
      {"normal(-1, 0.25) | specials(0.3)", DType::f64, 4096 * 5 + 7, 6,
       "39b0c43d688b408ca7ffcb9483ed1d7786a61176439af57c012aacc900836e35"},
      {"normal(0, 1) | specials(0.02)", DType::bf16, 4096 * 3 + 3, 8,
       "cd1a60a61ea5a93063ecefb51ba392877d7c8d9c7033d5e9dded12dcce790074"},
      {"normal(2, 3)", DType::f16, 4096 * 2 + 9, 9,
       "17a56e0023f64ac1a3ad9a9628f0a8c22b346fadd6681332eb08766338a8e55f"},
      {"normal(0, 1)", DType::f32, 1, 10,
       "7c519d833539f0ddbb69bd1b354839b3428421cf71144727e48dfacab73832a1"},
      {"normal(0, 1)", DType::f32, 3, 10,
       "afc155ad30d11bdd405d4174426f31ee8dd5260ada59f7eb2551f4a4ddd7970f"},
  };
  for (const auto& g : golden) {
    auto spec = InitSpec::parse(g.init, g.dtype);
    ASSERT_TRUE(spec) << g.init;
    std::vector<unsigned char> buf(g.n * dtype_size(g.dtype));
    generate_shaped(*spec, g.dtype, {}, {static_cast<int64_t>(g.n)}, g.seed, buf.data());
    std::string sha = util::sha256_hex(std::string_view(reinterpret_cast<const char*>(buf.data()), buf.size()));
    EXPECT_EQ(sha, g.sha) << g.init << " " << dtype_name(g.dtype) << " n=" << g.n;
  }
}

// The element-by-element definition of normal(a, b) | specials(p) in f64, as generate.cpp had
// it before the pairs were computed in bulk: the oracle for the test below.
namespace oracle {
uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}
uint64_t mix(uint64_t a, uint64_t b) {
  uint64_t s = a ^ (b * 0xD6E8FEB86659FD93ULL);
  splitmix64(s);
  return splitmix64(s);
}
double uniform01(uint64_t& state) { return static_cast<double>(splitmix64(state) >> 11) * 0x1.0p-53; }
uint64_t below(uint64_t& state, uint64_t range) {
  uint64_t limit = UINT64_MAX - (UINT64_MAX % range);
  for (;;) {
    uint64_t x = splitmix64(state);
    if (x < limit) return x % range;
  }
}
std::vector<uint64_t> normal_f64(double a, double b, double specials, uint64_t seed, size_t n) {
  std::vector<uint64_t> out(n);
  for (size_t begin = 0; begin < n; begin += 4096) {
    uint64_t state = mix(seed, begin / 4096);
    double spare = 0;
    bool have_spare = false;
    for (size_t i = begin; i < std::min(n, begin + 4096); ++i) {
      double z;
      if (have_spare) {
        z = spare;
        have_spare = false;
      } else {
        for (;;) {
          double u = 2.0 * uniform01(state) - 1.0;
          double v = 2.0 * uniform01(state) - 1.0;
          double q = u * u + v * v;
          if (q > 0.0 && q < 1.0) {
            double f = std::sqrt(-2.0 * det_log(q) / q);
            z = u * f;
            spare = v * f;
            break;
          }
        }
        have_spare = true;
      }
      double v = a + b * z;
      std::memcpy(&out[i], &v, 8);
      if (specials > 0 && uniform01(state) < specials) {
        uint64_t pick = below(state, 6);
        const uint64_t fixed[4] = {0x7FF8000000000000ULL, 0x7FF0000000000000ULL, 0xFFF0000000000000ULL, 0x8000000000000000ULL};
        if (pick < 4) {
          out[i] = fixed[pick];
        } else {
          out[i] = (1 + below(state, 0xFFFFFFFFFFFFFULL)) | (pick == 5 ? 0x8000000000000000ULL : 0);
        }
      }
    }
  }
  return out;
}
}  // namespace oracle

TEST(Generate, TheNormalPathEqualsItsElementByElementDefinition) {
  std::mt19937_64 rng(2024);
  for (int trial = 0; trial < 40; ++trial) {
    size_t n = 1 + rng() % (4096 * 3);
    double a = static_cast<double>(static_cast<int>(rng() % 7) - 3) / 4, b = 0.25 + static_cast<double>(rng() % 8);
    double specials = trial % 2 ? static_cast<double>(rng() % 30) / 100 : 0.0;
    uint64_t seed = rng();
    std::string init = specials > 0 ? fmt::format("normal({}, {}) | specials({})", a, b, specials) : fmt::format("normal({}, {})", a, b);
    auto spec = InitSpec::parse(init, DType::f64);
    ASSERT_TRUE(spec) << init;
    std::vector<uint64_t> got(n);
    generate(*spec, DType::f64, {}, seed, got.data(), n);
    ASSERT_EQ(got, oracle::normal_f64(a, b, specials, seed, n)) << init << " n=" << n << " seed=" << seed;
  }
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

// A narrow dtype draws the same values as f64 from the same seed and stores them by the ABI's
// rules (spec/dtype.h): bf16/f16 rounded to nearest even from the f32 value, integers exact.
TEST(Generate, NarrowDtypesStoreTheSameDraws) {
  size_t n = 5000;
  std::vector<double> wide(n);
  generate(*InitSpec::parse("normal(0, 2)", DType::f64), DType::f64, {}, 11, wide.data(), n);
  for (DType t : {DType::f16, DType::bf16}) {
    std::vector<uint16_t> bits(n);
    generate(*InitSpec::parse("normal(0, 2)", t), t, {}, 11, bits.data(), n);
    for (size_t i = 0; i < n; ++i) {
      uint16_t want = t == DType::f16 ? f16_from_float(static_cast<float>(wide[i])) : bf16_from_float(static_cast<float>(wide[i]));
      ASSERT_EQ(bits[i], want) << dtype_name(t) << " element " << i;
    }
  }
  std::vector<int64_t> ints(n);
  generate(*InitSpec::parse("randint(-128, 127)", DType::i64), DType::i64, {}, 4, ints.data(), n);
  std::vector<int8_t> i8(n);
  generate(*InitSpec::parse("randint(-128, 127)", DType::i8), DType::i8, {}, 4, i8.data(), n);
  for (size_t i = 0; i < n; ++i) ASSERT_EQ(i8[i], ints[i]) << i;
}

TEST(Generate, NarrowIntegerRangesAndBool) {
  size_t n = 20000;
  std::vector<uint8_t> u(n);
  generate(default_init(DType::u8), DType::u8, {}, 2, u.data(), n);
  int zeros = 0, top = 0;
  for (uint8_t x : u) {
    zeros += x == 0;
    top += x == 255;
  }
  EXPECT_GT(zeros, 0);
  EXPECT_GT(top, 0);
  std::vector<uint8_t> b(n);
  generate(default_init(DType::boolean), DType::boolean, {}, 2, b.data(), n);
  int ones = 0;
  for (uint8_t x : b) {
    ASSERT_LE(x, 1);
    ones += x;
  }
  EXPECT_NEAR(ones, 10000, 500);
  // A dim-dependent range beyond the dtype is saturated, never wrapped.
  std::vector<int8_t> s(n);
  generate(*InitSpec::parse("randint(0, N)", DType::i8), DType::i8, {{"N", 1000}}, 2, s.data(), n);
  for (int8_t x : s) ASSERT_GE(x, 0);
}

TEST(Generate, HalfSpecials) {
  size_t n = 20000;
  for (DType t : {DType::f16, DType::bf16}) {
    std::vector<uint16_t> v(n);
    generate(*InitSpec::parse("uniform(1, 2) | specials(0.1)", t), t, {}, 3, v.data(), n);
    int nan = 0, inf = 0, negzero = 0, sub = 0;
    for (uint16_t h : v) {
      float x = t == DType::f16 ? f16_to_float(h) : bf16_to_float(h);
      if (std::isnan(x)) ++nan;
      else if (std::isinf(x)) ++inf;
      else if (x == 0 && std::signbit(x)) ++negzero;
      else if (std::fabs(x) < (t == DType::f16 ? 0x1p-14f : 0x1p-126f) && x != 0) ++sub;
    }
    EXPECT_GT(nan, 100) << dtype_name(t);
    EXPECT_GT(inf, 100) << dtype_name(t);
    EXPECT_GT(negzero, 100) << dtype_name(t);
    EXPECT_GT(sub, 100) << dtype_name(t);
  }
}

std::vector<double> shaped(const char* init, DType dtype, std::vector<int64_t> shape, uint64_t seed, DimValues dims = {}) {
  auto spec = InitSpec::parse(init, dtype);
  EXPECT_TRUE(spec) << init << ": " << spec.error().message;
  size_t n = 1;
  for (int64_t e : shape) n *= static_cast<size_t>(e);
  std::vector<unsigned char> buf(n * dtype_size(dtype));
  EXPECT_EQ(spec->shape_problem(shape), "");
  generate_shaped(*spec, dtype, dims, shape, seed, buf.data());
  std::vector<double> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = load_element(dtype, buf.data(), i);
  return v;
}

TEST(Generate, TriangularHasItsZerosAndDiagonal) {
  const size_t n = 7;
  auto lower = shaped("triangular(lower, diag = uniform(1, 2), off = uniform(-3, 3))", DType::f64, {2, n, n}, 5);
  auto upper = shaped("triangular(upper)", DType::f32, {n, n}, 5);
  bool off_nonzero = false;
  for (size_t b = 0; b < 2; ++b) {
    for (size_t i = 0; i < n; ++i) {
      for (size_t j = 0; j < n; ++j) {
        double v = lower[b * n * n + i * n + j];
        if (j > i) {
          EXPECT_EQ(v, 0.0);
        } else if (j == i) {
          EXPECT_TRUE(v >= 1 && v < 2) << v;
        } else {
          EXPECT_TRUE(v >= -3 && v < 3) << v;
          if (b == 0) {
            EXPECT_EQ(upper[i * n + j], 0.0);
          }
        }
        off_nonzero |= j < i && v != 0;
      }
    }
  }
  EXPECT_TRUE(off_nonzero);
  EXPECT_NE(InitSpec::parse("triangular(lower)", DType::f32)->shape_problem({3, 4}), "");
}

// spd is symmetric and strictly diagonally dominant with a positive diagonal (so positive
// definite); diag_dominant is dominant row by row.
TEST(Generate, SpdAndDiagDominant) {
  const size_t n = 9;
  for (const char* init : {"spd(diag = uniform(0.5, 1))", "diag_dominant(off = normal(0, 2))"}) {
    auto a = shaped(init, DType::f64, {n, n}, 3);
    bool symmetric = true;
    for (size_t i = 0; i < n; ++i) {
      double row = 0;
      for (size_t j = 0; j < n; ++j) {
        if (j != i) row += std::fabs(a[i * n + j]);
        symmetric = symmetric && a[i * n + j] == a[j * n + i];
      }
      EXPECT_GT(a[i * n + i], row) << init << " row " << i;
    }
    EXPECT_EQ(symmetric, std::string(init).starts_with("spd")) << init;
  }
}

TEST(Generate, IndexPermutationOnehotMask) {
  auto idx = shaped("index(i * 10 + j + N)", DType::i32, {3, 4}, 1, {{"N", 100}});
  EXPECT_EQ(idx[0], 100);
  EXPECT_EQ(idx[1 * 4 + 2], 112);
  EXPECT_EQ(idx[11], 123);
  auto f = shaped("index(sqrt(i + 1) + pow(j, 2) + exp(0) + log(1))", DType::f64, {2, 3}, 1);
  EXPECT_DOUBLE_EQ(f[1 * 3 + 2], std::sqrt(2.0) + 4 + 1);
  auto perm = shaped("permutation", DType::i64, {5, 33}, 7);
  for (size_t r = 0; r < 5; ++r) {
    std::vector<double> row(perm.begin() + static_cast<long>(r * 33), perm.begin() + static_cast<long>((r + 1) * 33));
    std::sort(row.begin(), row.end());
    for (size_t k = 0; k < 33; ++k) ASSERT_EQ(row[k], static_cast<double>(k));
  }
  EXPECT_NE(std::vector<double>(perm.begin(), perm.begin() + 33), std::vector<double>(perm.begin() + 33, perm.begin() + 66));
  auto hot = shaped("onehot", DType::f32, {6, 10}, 7);
  for (size_t r = 0; r < 6; ++r) {
    double sum = 0;
    for (size_t k = 0; k < 10; ++k) sum += hot[r * 10 + k];
    EXPECT_EQ(sum, 1.0);
  }
  auto mask = shaped("mask(0.25)", DType::boolean, {20000}, 3);
  double ones = 0;
  for (double v : mask) ones += v;
  EXPECT_NEAR(ones, 5000, 300);
  // Deterministic: the same seed gives the same bytes.
  EXPECT_EQ(shaped("permutation", DType::i32, {4, 50}, 9), shaped("permutation", DType::i32, {4, 50}, 9));
  EXPECT_EQ(shaped("spd", DType::f32, {16, 16}, 9), shaped("spd", DType::f32, {16, 16}, 9));
}

TEST(Generate, MalformedStructuredGenerators) {
  struct Bad {
    const char* init;
    DType dtype;
    const char* expect;
  };
  for (const Bad& b : {Bad{"triangular(diag = uniform(1, 2))", DType::f32, "needs lower or upper first"},
                       Bad{"triangular(lower, diagonal = uniform(1, 2))", DType::f32, "should be diag = G or off = G"},
                       Bad{"spd(diag = spd())", DType::f32, "is not a plain generator"},
                       Bad{"spd()", DType::i32, "makes a float matrix, not i32"},
                       Bad{"index(i, j)", DType::f32, "index() takes 1 argument, got 2"},
                       Bad{"permutation(3)", DType::i32, "permutation() takes 0 arguments"},
                       Bad{"permutation", DType::boolean, "needs a numeric dtype"},
                       Bad{"mask(1.5)", DType::boolean, "constant probability in [0, 1]"},
                       Bad{"mask(N)", DType::boolean, "constant probability"},
                       Bad{"onehot | specials(0.1)", DType::f32, "plain generators only"},
                       Bad{"gauss(0, 1)", DType::f32, "unknown generator 'gauss'"},
                       Bad{"index(sqrt(i, j))", DType::f32, "expected ')' after sqrt(x)"}}) {
    auto r = InitSpec::parse(b.init, b.dtype);
    ASSERT_FALSE(r) << b.init;
    EXPECT_NE(r.error().message.find(b.expect), std::string::npos) << b.init << ": " << r.error().message;
  }
  EXPECT_NE(InitSpec::parse("index(k)", DType::f32)->shape_problem({4, 4}), "");
  EXPECT_NE(InitSpec::parse("onehot", DType::f32)->shape_problem({}), "");
}

TEST(Generate, DeterministicExpFunctions) {
  for (double x : {-700.0, -20.0, -1.0, -1e-9, 0.0, 0.5, 1.0, 3.7, 50.0, 700.0}) {
    EXPECT_NEAR(det_exp(x), std::exp(x), 4e-16 * std::exp(x)) << x;
  }
  EXPECT_EQ(det_pow(2, 10), 1024);
  EXPECT_EQ(det_pow(2, -2), 0.25);
  EXPECT_NEAR(det_pow(2, 0.5), std::sqrt(2.0), 1e-15);
  EXPECT_TRUE(std::isnan(det_pow(-2, 0.5)));
}

TEST(Generate, DetLogMatchesLibm) {
  for (double x : {1e-300, 1e-10, 0.1, 0.5, 0.7, 1.0, 1.5, 2.0, 10.0, 1e10, 1e300}) {
    EXPECT_NEAR(det_log(x), std::log(x), 1e-14 * std::max(1.0, std::fabs(std::log(x)))) << x;
  }
}

}  // namespace
}  // namespace kope::spec
