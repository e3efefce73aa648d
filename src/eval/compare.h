// eval/compare.h — comparing a kernel's output with the reference's.
//
// An element matches when both are NaN, or both are the same infinity, or both are finite and
// |got - expected| <= atol + rtol * |expected|. i32 and i64 use the same rule on exact integers
// (tolerances are normally 0); i16, i8, u8 and bool are always compared exactly. f16 and bf16
// are widened to f32 and allowed one more unit in the last place of their format at the
// expected value. Zero mismatches are allowed. Thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "kope/spec.h"

namespace kope::eval {

struct Mismatch {
  size_t index = 0;       // flat element index in the tensor
  double got = 0;
  double expected = 0;
  std::string got_text;   // exact text ("nan", "-inf", "-0", "1.2345678e-03")
  std::string expected_text;
};

struct CompareResult {
  bool ok = true;
  size_t mismatches = 0;
  double max_abs_err = 0;  // over elements where both sides are finite
  std::optional<Mismatch> first;
};

CompareResult compare_tensor(spec::DType dtype, const void* got, const void* expected, size_t count,
                             const spec::Tolerance& tol);

// Part `part` of `parts` (0 <= part < parts) of compare_tensor: the elements
// [count·part/parts, count·(part+1)/parts), the first mismatch's index counted from the tensor's
// start. Folding the parts' results in order with merge_compare gives compare_tensor's result,
// so the parts of one tensor can be compared on different threads.
CompareResult compare_tensor_part(spec::DType dtype, const void* got, const void* expected, size_t count,
                                  const spec::Tolerance& tol, int part, int parts);
void merge_compare(CompareResult& into, const CompareResult& next);

// "[2, 17]" for a flat index in a tensor of this shape.
std::string format_index(size_t flat, const std::vector<int64_t>& shape);

}  // namespace kope::eval
