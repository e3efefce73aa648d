// eval/cpu/compile.h — building an untrusted CPU candidate: sandboxed compile, inspection, link.
//
// One sandbox run compiles the candidate to an object, filters its disassembly for forbidden
// instructions and links it with the op's entry shim into a shared object; the parent then
// inspects the object (eval/inspect.h). Results are kept in a content-addressed cache under
// cache_dir()/eval/compile, keyed by the source, the shim, the compiler version and every flag;
// a cache hit skips the compiler but the inspection runs again on the cached object, so a hit
// can never skip a rule. Failures that depend on the machine (a timeout, a killed compiler) are
// not cached (the recipe of eval/build_recipe.h). Thread-safe.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "eval/build_recipe.h"
#include "eval/inspect.h"
#include "eval/native.h"
#include "kope/error.h"
#include "kope/spec.h"

namespace kope::eval {

namespace fs = std::filesystem;

class CpuCompiler {
 public:
  // `inspect` = false skips the inspection verdict (tests use it to reach the runtime sandbox
  // with kernels the inspection would reject); the compile itself is unchanged.
  CpuCompiler(Toolchain toolchain, CompileLimits limits, bool inspect);

  // Compiles, inspects and links one candidate for `op`. Errors only when kope cannot run the
  // build (no sandbox, no compiler); a bad candidate is an outcome.
  Result<BuildOutcome> build(const spec::OpSpec& op, std::string_view source,
                             const std::vector<std::string>& extra_flags) const;

  const Toolchain& toolchain() const { return m_tc; }
  // The flags candidates are compiled with (toolchain flags, language standard, PIC, extras).
  std::vector<std::string> compile_flags(const std::vector<std::string>& extra_flags) const;

 private:
  Result<fs::path> shim_object(const spec::OpSpec& op) const;
  // Below native: why `extra_flags` lift the code above the ISA level ("" when they do not).
  Result<std::string> flags_above_level(const std::vector<std::string>& extra_flags) const;
  Result<FreshBuild> build_fresh(const spec::OpSpec& op, std::string_view source, const std::vector<std::string>& flags,
                                 const fs::path& shim_o, const fs::path& scratch) const;
  FreshBuild limit_outcome(const util::RunResult& r, std::string diagnostics) const;
  Result<BuildOutcome> conclude(const spec::OpSpec& op, const SymbolPolicy& policy, const fs::path& dir, const nlohmann::json& stored) const;
  Toolchain m_tc;
  CompileLimits m_limits;
  bool m_inspect;
  fs::path m_compiler;  // resolved absolute path
};

// What a compile error caused by instructions the flags do not enable (GCC: "inlining failed in
// call to 'always_inline' '__m512 _mm512_add_ps(__m512, __m512)': target specific option
// mismatch"; Clang: "always_inline function '_mm512_add_ps' requires target feature 'avx512f'")
// means, naming the instruction sets and intrinsics the kernel used: "the kernel
// uses AVX-512 instructions (avx512f: _mm512_add_ps) that the target level x86-64-v3 does not
// have (...)". "" when the diagnostics show no such mismatch.
std::string isa_mismatch_message(std::string_view diagnostics, const Toolchain& tc);

// Why a user-supplied extra flag may not be passed to the compiler, or "" when it may.
std::string extra_flag_problem(std::string_view flag);

}  // namespace kope::eval
