// spec/generate.h — deterministic input data from `init` specs.
//
// The same (seed, case, tensor) gives the same bytes on every machine and compiler: the
// generator uses its own counter-based RNG (SplitMix64 streams per 4096-element block), its own
// logarithm (only + - * / and sqrt, which IEEE 754 rounds exactly) and is compiled with
// -ffp-contract=off. No std:: distribution is used. Thread-safe; large tensors are filled by
// several threads, which does not change the bytes.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kope/spec.h"

namespace kope::spec {

// A seed for one tensor of one case of one evaluation.
uint64_t derive_seed(uint64_t evaluation_seed, uint64_t case_index, uint64_t tensor_index);

// Fills `out` (count elements of `dtype`) from `init` evaluated with `dims`.
void generate(const InitSpec& init, DType dtype, const DimValues& dims, uint64_t seed, void* out,
              size_t count);

// The default init of an input of this dtype: normal(0, 1) for floats, randint(-100, 100) else.
const InitSpec& default_init(DType dtype);

// Fills every input of case `c` into `buffers[i]` (inputs in spec order, each of
// op.byte_size(input, c) bytes).
void generate_inputs(const OpSpec& op, const Case& c, uint64_t evaluation_seed, void* const* buffers);

// Natural logarithm computed with + - * / only (deterministic everywhere); x > 0.
double det_log(double x);

}  // namespace kope::spec
