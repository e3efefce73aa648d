#include "eval/compare.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <type_traits>
#include <vector>

#include "spec/dtype.h"
#include "util/strings.h"

namespace kope::eval {

namespace {

std::string value_text(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  if (v == 0) return std::signbit(v) ? "-0" : "0";
  return fmt::format("{:.9g}", v);
}

template <class T>
CompareResult compare_typed(const T* got, const T* expected, size_t count, const spec::Tolerance& tol) {
  CompareResult r;
  for (size_t i = 0; i < count; ++i) {
    double g = static_cast<double>(got[i]);
    double e = static_cast<double>(expected[i]);
    bool match;
    if constexpr (std::is_integral_v<T>) {
      if (tol.atol == 0 && tol.rtol == 0) {
        match = got[i] == expected[i];
        if (!match) {
          if (!r.first) r.first = Mismatch{i, g, e, std::to_string(got[i]), std::to_string(expected[i])};
          ++r.mismatches;
          r.ok = false;
        }
        continue;
      }
    }
    if (std::isnan(e) || std::isnan(g)) {
      match = std::isnan(e) && std::isnan(g);
    } else if (std::isinf(e) || std::isinf(g)) {
      match = g == e;
    } else {
      double err = std::fabs(g - e);
      if (err > r.max_abs_err) r.max_abs_err = err;
      match = err <= tol.atol + tol.rtol * std::fabs(e);
    }
    if (!match) {
      if (!r.first) r.first = Mismatch{i, g, e, value_text(g), value_text(e)};
      ++r.mismatches;
      r.ok = false;
    }
  }
  return r;
}

// The fast path of the floating-point comparison: a branch-free pass over a chunk that says
// whether every element of it matches (and then the chunk's largest error over its finite
// pairs), evaluated exactly as compare_typed does (in double, the same expressions; this file
// is compiled without floating-point contraction): NaN matches NaN, an infinity only itself, a
// finite pair within the tolerance. A chunk it does not pass goes through compare_typed, which
// finds the mismatches, so the result is the same to the bit: the pass is only faster
// (verifying every timed batch's outputs is on the path of every verdict, and inputs with
// specials() put NaNs and infinities in most chunks).
// One pair by the rule, in double: false on a mismatch; a finite pair's error raises *max_err.
inline bool pair_within(double g, double e, double atol, double rtol, double* max_err) {
  if (std::isnan(e) || std::isnan(g)) return std::isnan(e) && std::isnan(g);
  if (std::isinf(e) || std::isinf(g)) return g == e;
  double err = std::fabs(g - e);
  if (!(err <= atol + rtol * std::fabs(e))) return false;
  *max_err = std::max(*max_err, err);
  return true;
}

#if defined(__GNUC__) && defined(__x86_64__)
#define KOPE_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define KOPE_CLONES
#endif

typedef double f64x4 __attribute__((vector_size(32)));
typedef int64_t i64x4 __attribute__((vector_size(32)));

template <class T>
KOPE_CLONES bool chunk_within(const T* got, const T* expected, size_t count, double atol, double rtol, double* max_err) {
  typedef T lanes __attribute__((vector_size(4 * sizeof(T))));
  const f64x4 va = {atol, atol, atol, atol}, vr = {rtol, rtol, rtol, rtol};
  const f64x4 finite_max = {DBL_MAX, DBL_MAX, DBL_MAX, DBL_MAX};
  f64x4 vmax = {0, 0, 0, 0};
  i64x4 bad = {0, 0, 0, 0};
  size_t i = 0;
  for (; i + 4 <= count; i += 4) {
    lanes g4, e4;
    std::memcpy(&g4, got + i, sizeof g4);
    std::memcpy(&e4, expected + i, sizeof e4);
    f64x4 g = __builtin_convertvector(g4, f64x4), e = __builtin_convertvector(e4, f64x4);
    f64x4 d = g - e;
    f64x4 err = d < 0 ? -d : d;
    f64x4 mag = e < 0 ? -e : e;
    f64x4 gmag = g < 0 ? -g : g;
    i64x4 g_nan = g != g, e_nan = e != e;
    i64x4 nan = g_nan | e_nan;
    i64x4 inf = ~nan & ((mag > finite_max) | (gmag > finite_max));
    i64x4 finite = ~(nan | inf);
    i64x4 match = (g_nan & e_nan) | (inf & (g == e)) | (finite & (err <= va + vr * mag));
    bad |= ~match;
    vmax = (finite & (err > vmax)) != 0 ? err : vmax;
  }
  if ((bad[0] | bad[1] | bad[2] | bad[3]) != 0) return false;
  double m = std::max(std::max(vmax[0], vmax[1]), std::max(vmax[2], vmax[3]));
  for (; i < count; ++i) {
    if (!pair_within(static_cast<double>(got[i]), static_cast<double>(expected[i]), atol, rtol, &m)) return false;
  }
  *max_err = m;
  return true;
}

// The comparison both fast paths share: each chunk through `fast` (whether all of it matches,
// and then its largest error), a chunk it does not pass through `slow` (the element-wise rule,
// which finds the mismatches), the results folded in order. A chunk equal to the bit needs
// neither: by the rule every pair of it matches (NaN with NaN, an infinity with itself) with no
// error, and many honest kernels (copies, max, relu, exact sums) give exactly the reference's
// bits, where memcmp reads the chunk several times faster than the widening pass.
template <class T, class Fast, class Slow>
CompareResult compare_in_chunks(const T* got, const T* expected, size_t count, Fast&& fast, Slow&& slow) {
  constexpr size_t k_chunk = 4096;
  CompareResult r;
  for (size_t i = 0; i < count; i += k_chunk) {
    size_t n = std::min(k_chunk, count - i);
    if (std::memcmp(got + i, expected + i, n * sizeof(T)) == 0) continue;
    double chunk_max = 0;
    if (fast(i, n, &chunk_max)) {
      r.max_abs_err = std::max(r.max_abs_err, chunk_max);
      continue;
    }
    CompareResult c = slow(i, n);
    if (c.first) c.first->index += i;
    merge_compare(r, c);
  }
  return r;
}

template <class T>
CompareResult compare_floating(const T* got, const T* expected, size_t count, const spec::Tolerance& tol) {
  return compare_in_chunks(
      got, expected, count, [&](size_t i, size_t n, double* max_err) { return chunk_within(got + i, expected + i, n, tol.atol, tol.rtol, max_err); },
      [&](size_t i, size_t n) { return compare_typed(got + i, expected + i, n, tol); });
}

// The narrow integer dtypes and bool: exactly equal or a mismatch, whatever the tolerance.
template <class T>
CompareResult compare_exact(const T* got, const T* expected, size_t count) {
  CompareResult r;
  for (size_t i = 0; i < count; ++i) {
    if (got[i] == expected[i]) continue;
    if (!r.first) {
      r.first = Mismatch{i, static_cast<double>(got[i]), static_cast<double>(expected[i]), std::to_string(got[i]),
                         std::to_string(expected[i])};
    }
    ++r.mismatches;
    r.ok = false;
  }
  return r;
}

// f16 and bf16, widened to f32 (exactly): the tolerance plus one unit in the last place of the
// storage format at the expected value, because two honest computations that differ in the
// last f32 bits may round to neighbouring f16/bf16 values.
CompareResult compare_half_slow(spec::DType dtype, const uint16_t* got, const uint16_t* expected, size_t count,
                                const spec::Tolerance& tol) {
  CompareResult r;
  for (size_t i = 0; i < count; ++i) {
    auto g = static_cast<float>(spec::load_element(dtype, got, i));
    auto e = static_cast<float>(spec::load_element(dtype, expected, i));
    spec::Tolerance widened{tol.atol + spec::storage_ulp(dtype, e), tol.rtol};
    CompareResult one = compare_typed(&g, &e, 1, widened);
    r.max_abs_err = std::max(r.max_abs_err, one.max_abs_err);
    if (one.ok) continue;
    if (!r.first) {
      r.first = one.first;
      r.first->index = i;
    }
    ++r.mismatches;
    r.ok = false;
  }
  return r;
}

// The widened values of one half format, and its unit in the last place at a widened value: what
// spec::storage_ulp gives, from the f32 exponent bits (frexp and ldexp are function calls, and
// this runs once per element of every verified output).
struct HalfFormat {
  spec::DType dtype;
  int mantissa_bits, min_exponent;

  explicit HalfFormat(spec::DType t)
      : dtype(t), mantissa_bits(t == spec::DType::f16 ? 10 : 7), min_exponent(t == spec::DType::f16 ? -14 : -126) {}

  float widen(uint16_t bits) const {
    if (dtype == spec::DType::bf16) return spec::bf16_to_float(bits);
    return spec::f16_to_float(bits);
  }
  // For a finite v: 2^(max(exponent of v, min_exponent) - mantissa_bits), zero and the f32
  // subnormals (exponent bits 0) at min_exponent, as storage_ulp does.
  double ulp(float v) const {
    uint32_t x;
    std::memcpy(&x, &v, sizeof x);
    int biased = static_cast<int>((x >> 23) & 0xFF);
    int exponent = biased == 0 ? min_exponent : std::max(biased - 127, min_exponent);
    uint64_t bits = static_cast<uint64_t>(exponent - mantissa_bits + 1023) << 52;
    double u;
    std::memcpy(&u, &bits, sizeof u);
    return u;
  }
};

// The fast path of compare_half_slow, as chunk_within is compare_typed's: whether every element
// of a chunk matches by the same rule, evaluated the same way (the same doubles, the same
// expressions), and the chunk's largest error; a chunk it does not pass goes through
// compare_half_slow, so the result is the same to the bit.
bool half_chunk_within(const HalfFormat& f, const uint16_t* got, const uint16_t* expected, size_t count,
                       const spec::Tolerance& tol, double* max_err) {
  double m = 0;
  for (size_t i = 0; i < count; ++i) {
    float gf = f.widen(got[i]), ef = f.widen(expected[i]);
    // The unit in the last place only matters (and is only defined) for a finite expected value.
    double atol = std::isfinite(ef) ? tol.atol + f.ulp(ef) : tol.atol;
    if (!pair_within(static_cast<double>(gf), static_cast<double>(ef), atol, tol.rtol, &m)) return false;
  }
  *max_err = m;
  return true;
}

CompareResult compare_half(spec::DType dtype, const uint16_t* got, const uint16_t* expected, size_t count,
                           const spec::Tolerance& tol) {
  HalfFormat f(dtype);
  return compare_in_chunks(
      got, expected, count, [&](size_t i, size_t n, double* max_err) { return half_chunk_within(f, got + i, expected + i, n, tol, max_err); },
      [&](size_t i, size_t n) { return compare_half_slow(dtype, got + i, expected + i, n, tol); });
}

}  // namespace

CompareResult compare_tensor(spec::DType dtype, const void* got, const void* expected, size_t count,
                             const spec::Tolerance& tol) {
  switch (dtype) {
    case spec::DType::f32: return compare_floating(static_cast<const float*>(got), static_cast<const float*>(expected), count, tol);
    case spec::DType::f64: return compare_floating(static_cast<const double*>(got), static_cast<const double*>(expected), count, tol);
    case spec::DType::i32: return compare_typed(static_cast<const int32_t*>(got), static_cast<const int32_t*>(expected), count, tol);
    case spec::DType::i64: return compare_typed(static_cast<const int64_t*>(got), static_cast<const int64_t*>(expected), count, tol);
    case spec::DType::boolean:
    case spec::DType::u8: return compare_exact(static_cast<const uint8_t*>(got), static_cast<const uint8_t*>(expected), count);
    case spec::DType::i8: return compare_exact(static_cast<const int8_t*>(got), static_cast<const int8_t*>(expected), count);
    case spec::DType::i16: return compare_exact(static_cast<const int16_t*>(got), static_cast<const int16_t*>(expected), count);
    case spec::DType::f16:
    case spec::DType::bf16:
      return compare_half(dtype, static_cast<const uint16_t*>(got), static_cast<const uint16_t*>(expected), count, tol);
  }
  return {};
}

CompareResult compare_tensor_part(spec::DType dtype, const void* got, const void* expected, size_t count,
                                  const spec::Tolerance& tol, int part, int parts) {
  auto at = [&](int k) { return count * static_cast<size_t>(k) / static_cast<size_t>(parts); };
  size_t first = at(part), n = at(part + 1) - first;
  size_t esize = spec::dtype_size(dtype);
  CompareResult r = compare_tensor(dtype, static_cast<const uint8_t*>(got) + first * esize,
                                   static_cast<const uint8_t*>(expected) + first * esize, n, tol);
  if (r.first) r.first->index += first;
  return r;
}

void merge_compare(CompareResult& into, const CompareResult& next) {
  into.ok = into.ok && next.ok;
  into.mismatches += next.mismatches;
  into.max_abs_err = std::max(into.max_abs_err, next.max_abs_err);
  if (!into.first && next.first) into.first = next.first;
}

std::string format_index(size_t flat, const std::vector<int64_t>& shape) {
  std::vector<std::string> parts(shape.size());
  for (size_t k = shape.size(); k-- > 0;) {
    auto dim = static_cast<size_t>(shape[k] > 0 ? shape[k] : 1);
    parts[k] = std::to_string(flat % dim);
    flat /= dim;
  }
  return "[" + util::join(parts, ", ") + "]";
}

}  // namespace kope::eval
