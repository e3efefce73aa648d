#include "eval/compare.h"

#include <algorithm>
#include <cmath>
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
CompareResult compare_half(spec::DType dtype, const uint16_t* got, const uint16_t* expected, size_t count,
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

}  // namespace

CompareResult compare_tensor(spec::DType dtype, const void* got, const void* expected, size_t count,
                             const spec::Tolerance& tol) {
  switch (dtype) {
    case spec::DType::f32: return compare_typed(static_cast<const float*>(got), static_cast<const float*>(expected), count, tol);
    case spec::DType::f64: return compare_typed(static_cast<const double*>(got), static_cast<const double*>(expected), count, tol);
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
