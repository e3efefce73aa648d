// Dtype names, sizes and the storage conversions of the kernel ABI.
#include "spec/dtype.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

namespace kope::spec {

namespace {

uint32_t bits_of(float v) {
  uint32_t b;
  std::memcpy(&b, &v, sizeof b);
  return b;
}

float float_of(uint32_t b) {
  float v;
  std::memcpy(&v, &b, sizeof v);
  return v;
}

template <class T>
T saturate(double v) {
  if (std::isnan(v)) return 0;
  double t = std::trunc(v);
  if (t <= static_cast<double>(std::numeric_limits<T>::min())) return std::numeric_limits<T>::min();
  if (t >= static_cast<double>(std::numeric_limits<T>::max())) return std::numeric_limits<T>::max();
  return static_cast<T>(t);
}

}  // namespace

std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::f32: return "f32";
    case DType::f64: return "f64";
    case DType::i32: return "i32";
    case DType::i64: return "i64";
    case DType::boolean: return "bool";
    case DType::i8: return "i8";
    case DType::u8: return "u8";
    case DType::i16: return "i16";
    case DType::f16: return "f16";
    case DType::bf16: return "bf16";
  }
  return "?";
}

std::string_view dtype_ctype(DType t) {
  switch (t) {
    case DType::f32: return "float";
    case DType::f64: return "double";
    case DType::i32: return "int32_t";
    case DType::i64: return "int64_t";
    case DType::boolean: return "uint8_t";
    case DType::i8: return "int8_t";
    case DType::u8: return "uint8_t";
    case DType::i16: return "int16_t";
    case DType::f16: return "uint16_t";
    case DType::bf16: return "uint16_t";
  }
  return "?";
}

size_t dtype_size(DType t) {
  switch (t) {
    case DType::f64:
    case DType::i64: return 8;
    case DType::f32:
    case DType::i32: return 4;
    case DType::i16:
    case DType::f16:
    case DType::bf16: return 2;
    case DType::boolean:
    case DType::i8:
    case DType::u8: return 1;
  }
  return 0;
}

bool dtype_is_float(DType t) {
  return t == DType::f32 || t == DType::f64 || t == DType::f16 || t == DType::bf16;
}

bool dtype_is_half(DType t) { return t == DType::f16 || t == DType::bf16; }

std::optional<DType> parse_dtype(std::string_view s) {
  for (DType t : {DType::f32, DType::f64, DType::i32, DType::i64, DType::boolean, DType::i8, DType::u8, DType::i16,
                  DType::f16, DType::bf16}) {
    if (s == dtype_name(t)) return t;
  }
  return std::nullopt;
}

std::string_view dtype_list() { return "f32, f64, f16, bf16, i64, i32, i16, i8, u8 or bool"; }

int64_t dtype_int_min(DType t) {
  switch (t) {
    case DType::i8: return std::numeric_limits<int8_t>::min();
    case DType::i16: return std::numeric_limits<int16_t>::min();
    case DType::i32: return std::numeric_limits<int32_t>::min();
    case DType::i64: return std::numeric_limits<int64_t>::min();
    default: return 0;
  }
}

int64_t dtype_int_max(DType t) {
  switch (t) {
    case DType::boolean: return 1;
    case DType::i8: return std::numeric_limits<int8_t>::max();
    case DType::u8: return std::numeric_limits<uint8_t>::max();
    case DType::i16: return std::numeric_limits<int16_t>::max();
    case DType::i32: return std::numeric_limits<int32_t>::max();
    case DType::i64: return std::numeric_limits<int64_t>::max();
    default: return 0;
  }
}

uint16_t f16_from_float(float v) {
  uint32_t x = bits_of(v);
  auto sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  uint32_t a = x & 0x7FFFFFFFu;
  if (a > 0x7F800000u) return static_cast<uint16_t>(sign | 0x7E00u | ((a >> 13) & 0x3FFu));  // quiet NaN
  if (a >= 0x477FF000u) return static_cast<uint16_t>(sign | 0x7C00u);  // 65520 and above round to Inf
  if (a < 0x38800000u) {
    // Below 2^-14 the result is subnormal: round(|v| / 2^-24) to nearest even.
    if (a <= 0x33000000u) return sign;  // at most 2^-25: rounds to zero
    uint32_t e = a >> 23;
    uint32_t m = (a & 0x7FFFFFu) | 0x800000u;
    uint32_t shift = 126 - e;  // |v| = m * 2^(e-150), so |v| / 2^-24 = m / 2^(126-e)
    uint32_t q = m >> shift;
    uint32_t rest = m & ((1u << shift) - 1);
    uint32_t half = 1u << (shift - 1);
    if (rest > half || (rest == half && (q & 1u))) ++q;
    return static_cast<uint16_t>(sign | q);
  }
  // Normal: round the 13 dropped mantissa bits to nearest even, then rebias 127 -> 15. A carry
  // into the exponent is the correct rounding up.
  uint32_t r = a + 0xFFFu + ((a >> 13) & 1u) - 0x38000000u;
  return static_cast<uint16_t>(sign | (r >> 13));
}

float f16_to_float(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t e = (h >> 10) & 0x1Fu;
  uint32_t m = h & 0x3FFu;
  if (e == 0x1F) return float_of(sign | 0x7F800000u | (m << 13));
  if (e == 0) {
    float mag = static_cast<float>(m) * 0x1p-24f;  // exact: m < 2^10
    return sign ? -mag : mag;
  }
  return float_of(sign | ((e + 112) << 23) | (m << 13));
}

uint16_t bf16_from_float(float v) {
  uint32_t x = bits_of(v);
  if ((x & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);  // quiet NaN
  return static_cast<uint16_t>((x + 0x7FFFu + ((x >> 16) & 1u)) >> 16);
}

float bf16_to_float(uint16_t bits) { return float_of(static_cast<uint32_t>(bits) << 16); }

double load_element(DType dtype, const void* data, size_t i) {
  switch (dtype) {
    case DType::f32: return static_cast<const float*>(data)[i];
    case DType::f64: return static_cast<const double*>(data)[i];
    case DType::i32: return static_cast<const int32_t*>(data)[i];
    case DType::i64: return static_cast<double>(static_cast<const int64_t*>(data)[i]);
    case DType::boolean:
    case DType::u8: return static_cast<const uint8_t*>(data)[i];
    case DType::i8: return static_cast<const int8_t*>(data)[i];
    case DType::i16: return static_cast<const int16_t*>(data)[i];
    case DType::f16: return f16_to_float(static_cast<const uint16_t*>(data)[i]);
    case DType::bf16: return bf16_to_float(static_cast<const uint16_t*>(data)[i]);
  }
  return 0;
}

void store_element(DType dtype, void* data, size_t i, double v) {
  switch (dtype) {
    case DType::f32: static_cast<float*>(data)[i] = static_cast<float>(v); break;
    case DType::f64: static_cast<double*>(data)[i] = v; break;
    case DType::i32: static_cast<int32_t*>(data)[i] = saturate<int32_t>(v); break;
    case DType::i64: static_cast<int64_t*>(data)[i] = saturate<int64_t>(v); break;
    case DType::boolean: static_cast<uint8_t*>(data)[i] = (v != 0 && !std::isnan(v)) ? 1 : 0; break;
    case DType::i8: static_cast<int8_t*>(data)[i] = saturate<int8_t>(v); break;
    case DType::u8: static_cast<uint8_t*>(data)[i] = saturate<uint8_t>(v); break;
    case DType::i16: static_cast<int16_t*>(data)[i] = saturate<int16_t>(v); break;
    case DType::f16: static_cast<uint16_t*>(data)[i] = f16_from_float(static_cast<float>(v)); break;
    case DType::bf16: static_cast<uint16_t*>(data)[i] = bf16_from_float(static_cast<float>(v)); break;
  }
}

double storage_ulp(DType dtype, double v) {
  if (!dtype_is_half(dtype) || !std::isfinite(v)) return 0;
  int mantissa_bits = dtype == DType::f16 ? 10 : 7;
  int min_exponent = dtype == DType::f16 ? -14 : -126;  // of the smallest normal
  int e = 0;
  std::frexp(v, &e);  // |v| in [2^(e-1), 2^e)
  int exponent = v == 0 ? min_exponent : std::max(e - 1, min_exponent);
  return std::ldexp(1.0, exponent - mantissa_bits);
}

}  // namespace kope::spec
