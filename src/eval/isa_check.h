// eval/isa_check.h — instructions above an ISA level, found in a compiled candidate's code.
//
// Under `--isa` (hw/isa.h) candidates are compiled with the level's -march, but the source can
// lift its own code above it: `#pragma GCC target`, `__attribute__((target(...)))` and
// `target_clones`, inline asm or `.byte`. Such a kernel compiles, is recorded at the level and
// would fault (SIGILL) on a CPU of exactly that level. So below native the candidate's object
// (kernel.o: the kernel's own code, not the entry shim, the PLT stubs or the runtime libraries)
// is disassembled (`objdump -d -w`, raw bytes shown) and every instruction above the level is a
// compile error (eval/cpu/compile.cpp). Natively nothing here runs.
//
// What is above which level is the one table in isa_check.cpp:
//   - x86-64-v3 (AVX2, FMA): every EVEX-encoded instruction (AVX-512 in any form: zmm,
//     xmm16-31/ymm16-31, {evex} forms of AVX2 instructions, EVEX-only instructions on
//     xmm/ymm), every mask register operand (%k0-%k7), and the extensions below;
//   - x86-64-v4 (AVX-512 F, BW, CD, DQ, VL): the extensions below;
//   - both: VNNI (AVX-VNNI and AVX512-VNNI), IFMA, BF16 (and AVX-NE-CONVERT), FP16, VBMI and
//     VBMI2, VPOPCNTDQ and BITALG, VP2INTERSECT, AMX, Xeon Phi AVX-512, AES/PCLMUL/GFNI/SHA/SM3/SM4,
//     FMA4.
// Every function here is pure and thread-safe.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "hw/isa.h"

namespace kope::eval {

// An extended regular expression (grep -E) keeping, from `objdump -d -w` with raw bytes, the
// lines that hold an instruction above `level` (and only those); "" for native.
std::string isa_disassembly_filter(IsaLevel level);

// The extension of the instruction on one line of `objdump -d -w` output ("AVX-512", "VNNI",
// "AMX", ...) when it is above `level`; "" when it is within the level, for native, and for a
// line that holds no instruction. Raw bytes are needed to see an EVEX encoding whose mnemonic
// and registers are also AVX2's (`62 f3 6d 28 25 d9 96 	vpternlogd $0x96,%ymm1,%ymm2,%ymm3`).
std::string isa_extension_above(std::string_view disassembly_line, IsaLevel level);

struct IsaViolation {
  std::string extension;    // "AVX-512"
  std::string instruction;  // "vaddps %zmm1,%zmm0,%zmm0" (spaces collapsed)
  std::string function;     // readable name of the function it is in; "?" before any header
};

// The instructions above `level` in (filtered) `objdump -d -w` output, in order, at most `limit`.
std::vector<IsaViolation> instructions_above_level(std::string_view disassembly, IsaLevel level, size_t limit = 20);

// The compile error for `found` (not empty), in the style of isa_mismatch_message: "the compiled
// kernel's AVX-512 instructions (vaddps %zmm1,%zmm0,%zmm0, ...) in kope_kernel are above the
// target level x86-64-v3: ..." naming the flags (`flags`) and that pragmas, target attributes and
// inline asm cannot lift a kernel above the level.
std::string above_level_message(const std::vector<IsaViolation>& found, IsaLevel level, const std::vector<std::string>& flags);

// One line per violation ("vaddps %zmm1,%zmm0,%zmm0 in kope_kernel (AVX-512)"), for diagnostics.
std::string above_level_diagnostics(const std::vector<IsaViolation>& found);

}  // namespace kope::eval
