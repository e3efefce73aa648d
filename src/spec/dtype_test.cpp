// The storage rules of the ABI's narrow dtypes (spec/dtype.h): exact widening, round-to-nearest-
// even narrowing, saturation of the integers.
#include "spec/dtype.h"

#include <cmath>
#include <cstring>
#include <limits>

#include <gtest/gtest.h>

namespace kope::spec {
namespace {

float float_of(uint32_t b) {
  float v;
  std::memcpy(&v, &b, sizeof v);
  return v;
}

bool is_nan16(DType t, uint16_t h) {
  return t == DType::f16 ? (h & 0x7C00) == 0x7C00 && (h & 0x3FF) != 0 : (h & 0x7F80) == 0x7F80 && (h & 0x7F) != 0;
}

// Every f16 and bf16 value widens exactly and narrows back to itself.
TEST(Dtype, EveryHalfValueRoundTrips) {
  for (uint32_t h = 0; h <= 0xFFFF; ++h) {
    auto bits = static_cast<uint16_t>(h);
    if (!is_nan16(DType::f16, bits)) {
      ASSERT_EQ(f16_from_float(f16_to_float(bits)), bits) << std::hex << h;
    }
    if (!is_nan16(DType::bf16, bits)) {
      ASSERT_EQ(bf16_from_float(bf16_to_float(bits)), bits) << std::hex << h;
    }
  }
  EXPECT_TRUE(std::isnan(f16_to_float(0x7E00)));
  EXPECT_TRUE(std::isnan(bf16_to_float(0x7FC0)));
  EXPECT_TRUE(is_nan16(DType::f16, f16_from_float(std::numeric_limits<float>::quiet_NaN())));
  EXPECT_TRUE(is_nan16(DType::bf16, bf16_from_float(-std::numeric_limits<float>::quiet_NaN())));
  EXPECT_EQ(bf16_from_float(-std::numeric_limits<float>::quiet_NaN()) & 0x8000, 0x8000);
}

TEST(Dtype, NarrowingRoundsToNearestEven) {
  // bf16 keeps 7 mantissa bits: 1 + 2^-8 is halfway between 1 and 1 + 2^-7.
  EXPECT_EQ(bf16_from_float(1.0f + 0x1p-8f), 0x3F80);                       // tie: down to even
  EXPECT_EQ(bf16_from_float(1.0f + 3 * 0x1p-8f), 0x3F82);                   // tie: up to even
  EXPECT_EQ(bf16_from_float(1.0f + 0x1p-8f + 0x1p-20f), 0x3F81);            // above the tie
  EXPECT_EQ(bf16_from_float(float_of(0x7F7FFFFF)), 0x7F80);                 // FLT_MAX rounds to Inf
  // f16: 65504 is the largest finite value; 65520 is the tie with the next (Inf).
  EXPECT_EQ(f16_from_float(65504.0f), 0x7BFF);
  EXPECT_EQ(f16_from_float(65519.0f), 0x7BFF);
  EXPECT_EQ(f16_from_float(65520.0f), 0x7C00);
  EXPECT_EQ(f16_from_float(-1e9f), 0xFC00);
  EXPECT_EQ(f16_from_float(1.0f + 0x1p-11f), 0x3C00);                       // tie: down to even
  EXPECT_EQ(f16_from_float(0x1p-25f), 0x0000);                              // tie with the least subnormal
  EXPECT_EQ(f16_from_float(0x1p-25f * 1.5f), 0x0001);
  EXPECT_EQ(f16_from_float(3 * 0x1p-25f), 0x0002);                          // 1.5 subnormal units: up to even
  EXPECT_EQ(f16_from_float(-0.0f), 0x8000);
  EXPECT_EQ(f16_from_float(0x1p-14f), 0x0400);                              // the least normal
}

#if defined(__FLT16_MAX__)
// The compiler's own _Float16 conversion (IEEE round-to-nearest-even) agrees on a sweep of f32
// bit patterns covering every exponent.
TEST(Dtype, F16AgreesWithTheCompiler) {
  for (uint64_t b = 0; b <= 0xFFFFFFFFull; b += 0x10001ull * 7) {
    float f = float_of(static_cast<uint32_t>(b));
    if (std::isnan(f)) continue;
    auto h = static_cast<_Float16>(f);
    uint16_t want;
    std::memcpy(&want, &h, sizeof want);
    ASSERT_EQ(f16_from_float(f), want) << std::hexfloat << f;
  }
}
#endif

TEST(Dtype, IntegersSaturateAndBoolIsZeroOrOne) {
  int8_t i8[3];
  store_element(DType::i8, i8, 0, 300);
  store_element(DType::i8, i8, 1, -300);
  store_element(DType::i8, i8, 2, -7.9);
  EXPECT_EQ(i8[0], 127);
  EXPECT_EQ(i8[1], -128);
  EXPECT_EQ(i8[2], -7);
  uint8_t u8[2];
  store_element(DType::u8, u8, 0, -1);
  store_element(DType::u8, u8, 1, 255);
  EXPECT_EQ(u8[0], 0);
  EXPECT_EQ(u8[1], 255);
  uint8_t b[3];
  store_element(DType::boolean, b, 0, 0);
  store_element(DType::boolean, b, 1, 5);
  store_element(DType::boolean, b, 2, std::nan(""));
  EXPECT_EQ(b[0], 0);
  EXPECT_EQ(b[1], 1);
  EXPECT_EQ(b[2], 0);
  int16_t s = 0;
  store_element(DType::i16, &s, 0, -40000);
  EXPECT_EQ(s, -32768);
  EXPECT_EQ(load_element(DType::i16, &s, 0), -32768);
}

TEST(Dtype, NamesSizesAndStorageUlp) {
  for (DType t : {DType::f32, DType::f64, DType::i32, DType::i64, DType::boolean, DType::i8, DType::u8, DType::i16,
                  DType::f16, DType::bf16}) {
    EXPECT_EQ(parse_dtype(dtype_name(t)), t);
  }
  EXPECT_EQ(dtype_size(DType::bf16), 2u);
  EXPECT_EQ(dtype_size(DType::boolean), 1u);
  EXPECT_EQ(dtype_ctype(DType::f16), "uint16_t");
  EXPECT_FALSE(parse_dtype("f8"));
  EXPECT_DOUBLE_EQ(storage_ulp(DType::bf16, 1.0), 0x1p-7);
  EXPECT_DOUBLE_EQ(storage_ulp(DType::bf16, -3.0), 0x1p-6);
  EXPECT_DOUBLE_EQ(storage_ulp(DType::f16, 1.0), 0x1p-10);
  EXPECT_DOUBLE_EQ(storage_ulp(DType::f16, 1e-6), 0x1p-24);  // subnormal range
  EXPECT_DOUBLE_EQ(storage_ulp(DType::f32, 1.0), 0);
}

}  // namespace
}  // namespace kope::spec
