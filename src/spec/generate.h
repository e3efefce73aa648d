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
#include <vector>

#include "kope/spec.h"

namespace kope::spec {

// A seed for one tensor of one case of one evaluation.
uint64_t derive_seed(uint64_t evaluation_seed, uint64_t case_index, uint64_t tensor_index);

// Fills `out` (count elements of `dtype`) from `init` evaluated with `dims`.
void generate(const InitSpec& init, DType dtype, const DimValues& dims, uint64_t seed, void* out,
              size_t count);

// Fills a tensor of this shape: the structured generators (InitSpec::structured()) by its
// shape, the others as generate() does with the element count.
void generate_shaped(const InitSpec& init, DType dtype, const DimValues& dims, const std::vector<int64_t>& shape, uint64_t seed,
                     void* out);

// The default init of an input of this dtype: normal(0, 1) for floats, randint(-100, 100) else.
const InitSpec& default_init(DType dtype);

// Fills every input of case `c` into `buffers[i]` (inputs in spec order, each of
// op.byte_size(input, c) bytes).
void generate_inputs(const OpSpec& op, const Case& c, uint64_t evaluation_seed, void* const* buffers);

// Copies each inout's initial contents (its input buffer) into its output buffer, as the runner
// does before every call; `buffers` holds the inputs then the outputs, in spec order. For
// callers that run a kernel in-process (tests, benchmarks).
void copy_inouts(const OpSpec& op, const Case& c, void* const* buffers);

// Natural logarithm computed with + - * / only (deterministic everywhere); x > 0.
double det_log(double x);
// e^x and a^b the same way (exp from a fixed Taylor series after an exact range reduction;
// integer powers up to 64 by repeated squaring, others as exp(b log a)). For expressions.
double det_exp(double x);
double det_pow(double a, double b);

}  // namespace kope::spec
