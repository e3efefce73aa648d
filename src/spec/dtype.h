// spec/dtype.h — the storage rules of the kernel ABI's dtypes (docs/design.md §2, "Dtypes").
//
// f16 is IEEE 754 binary16 and bf16 the upper 16 bits of an IEEE binary32, both held as
// uint16_t bits; a float is narrowed to either by round-to-nearest-even (overflow gives ±Inf,
// NaN stays a quiet NaN of the same sign), and widened exactly. bool is one byte, 0 or 1.
// Everything here is bit arithmetic, so the results are the same on every machine. Thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kope/spec.h"

namespace kope::spec {

uint16_t f16_from_float(float v);
float f16_to_float(uint16_t bits);
uint16_t bf16_from_float(float v);
float bf16_to_float(uint16_t bits);

// Element i of a buffer of `dtype`, widened to double (exact for every dtype but i64 beyond
// 2^53).
double load_element(DType dtype, const void* data, size_t i);

// Stores `v` as element i: floats narrowed as above, integers truncated toward zero and
// saturated to the dtype's range (NaN stores 0), bool stores v != 0.
void store_element(DType dtype, void* data, size_t i, double v);

// The distance between `v` and the next representable value away from zero in f16 or bf16
// (the unit in the last place of the storage format at v's magnitude); 0 for other dtypes.
double storage_ulp(DType dtype, double v);

}  // namespace kope::spec
