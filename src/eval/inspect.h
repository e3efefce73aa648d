// eval/inspect.h — the rules a compiled CPU candidate must obey before it is ever loaded.
//
// The object file (candidate.o, before linking) is checked for:
//   - definitions of names that belong to the C library, libm, libgomp, libgcc, the dynamic
//     loader or (strong definitions) libstdc++: interposition, e.g. a patched clock_gettime;
//   - imports outside an allowlist (math, OpenMP, allocation, mem*/str* basics, printing,
//     exceptions, libgcc helpers): processes, threads, files, sockets, dynamic loading, raw
//     system calls, clocks, the environment, and calls into BLAS/oneDNN or the reference;
//   - code that runs at load time: .init_array/.ctors/.preinit_array/.init sections (static
//     constructors), destructors, and GNU indirect functions (their resolvers run at load);
//   - instructions found by disassembly: syscall/sysenter/int N (raw system calls) and
//     rdtsc/rdtscp (reading the clock).
// Trusted kernels (references, library baselines) are not inspected. Thread-safe.
#pragma once

#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "eval/elf.h"
#include "kope/error.h"

namespace kope::eval {

struct InspectionReport {
  bool rejected = false;
  std::string reason;                 // the first rule broken, one line; empty when accepted
  std::vector<std::string> findings;  // every rule broken, one line each
  std::vector<std::string> notes;     // worth knowing, not fatal (e.g. writable static data)
  bool defines_entry = false;         // kope_kernel is defined as a global function

  // Records a broken rule: the first one becomes the reason; at most 30 findings are kept.
  void reject(std::string finding);
};

// The export lists of the runtime libraries a toolchain links against.
class SymbolPolicy {
 public:
  // Finds libc, libm, libmvec, libstdc++, libgomp, libgcc_s, the dynamic loader and libgcc.a
  // through `compiler -print-search-dirs` and reads their symbol tables. Fails with unavailable
  // when a library cannot be found or read. Cached per compiler in the process.
  static Result<std::shared_ptr<const SymbolPolicy>> for_compiler(const std::string& compiler);

  // Builds a policy from explicit name lists (for tests).
  SymbolPolicy(std::unordered_set<std::string> c_runtime, std::unordered_set<std::string> math,
               std::unordered_set<std::string> openmp, std::unordered_set<std::string> gcc_helpers,
               std::unordered_set<std::string> cxx_runtime);

  // Applies every rule to a relocatable object. `flagged_instructions` is the filtered
  // disassembly (see k_disassembly_filter): function header lines and offending instructions.
  InspectionReport inspect(const elf::File& object, std::string_view flagged_instructions) const;

  // Why an imported name is not allowed, or "" when it is.
  std::string import_problem(std::string_view name) const;
  // Why a defined global name is not allowed, or "" when it is.
  std::string definition_problem(std::string_view name, bool strong) const;

 private:
  std::unordered_set<std::string> m_c_runtime;    // libc, ld.so
  std::unordered_set<std::string> m_math;         // libm, libmvec
  std::unordered_set<std::string> m_openmp;       // libgomp
  std::unordered_set<std::string> m_gcc_helpers;  // libgcc.a, libgcc_s
  std::unordered_set<std::string> m_cxx_runtime;  // libstdc++
};

// An extended regular expression (grep -E) that keeps, from `objdump -d --no-show-raw-insn`,
// the function header lines and the instructions the inspection forbids.
extern const char* const k_disassembly_filter;

// Parses the filtered disassembly into findings: "syscall in kope_kernel".
std::vector<std::string> forbidden_instructions(std::string_view flagged);

// One line of `objdump -d -w` output, with or without raw bytes: the function a header line
// ("0000000000000000 <kope_kernel>:") opens, readable (display_symbol), or "" for other lines;
// and the instruction of an instruction line ("   4:\t0f 05 \tsyscall" and "   4:\tsyscall" give
// "syscall"), the trimmed line itself when it has no tab.
std::string disassembled_function(std::string_view line);
std::string_view disassembled_instruction(std::string_view line);

// The symbols of the candidate's own writable static data (mangled names, in symbol-table order):
// defined objects and thread-locals in writable sections (common symbols included), without
// what the compiler and runtime add on its behalf (exception personality references, guard
// variables, OpenMP's critical-section locks and outlined data, vtables and typeinfo, the
// standard library's statics) and without relocation-only constant data (.data.rel.ro).
std::vector<std::string> writable_static_data(const elf::File& object);

// A readable form of a (possibly mangled) symbol name, bounded in length.
std::string display_symbol(std::string_view name);

}  // namespace kope::eval
