// eval/native.h — building and loading *trusted* kernels (references, library baselines).
//
// Candidates never go through this path: they are built and run only in the sandbox. Trusted
// kernels are compiled with the CPU toolchain plus the op's entry shim into a content-addressed
// shared object under cache_dir()/trusted/, and called in-process through kope_entry.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "kope/error.h"
#include "kope/spec.h"

namespace kope::eval {

namespace fs = std::filesystem;

// A compiler and the flags a backend compiles kernels with.
struct Toolchain {
  std::string compiler;            // as invoked ("g++" or a path)
  std::string version;             // first line of `compiler --version`
  std::vector<std::string> flags;  // code-generation flags, e.g. -O3 -march=native -fopenmp

  // "g++ (Debian 12.2.0-14) 12.2.0 | -O3 -march=native -fopenmp": the key memory records.
  std::string id() const;
};

// The CPU C++ toolchain: $KOPE_CXX (default g++) with $KOPE_CXXFLAGS (default "-O3 -march=native
// -fopenmp"; -march=x86-64-v3 -mtune=native under $KOPE_ISA, hw/isa.h). Cached per level; thread-safe.
Result<Toolchain> cpu_toolchain();

// What `tc`'s flags make the compiler generate code for, read from its predefined macros
// (`compiler flags -dM -E -x c++ /dev/null`): the x86 ISA extensions in a fixed order (SSE up
// to AVX-512 subsets, AMX, bit manipulation and crypto; named like their -m options:
// "avx512vbmi2") and the CPU the flags tune for ("znver3"; "" when none is named). Fails with
// unavailable when the compiler cannot be run. Cached per toolchain; thread-safe.
struct CompilerTarget {
  std::string tune;
  std::vector<std::string> isa_extensions;
};
Result<CompilerTarget> compiler_target(const Toolchain& tc);
// The same from a `-dM -E` listing (for tests).
CompilerTarget compiler_target_from_macros(std::string_view macros);

// Link flags for library baselines (oneDNN, OpenBLAS).
const std::vector<std::string>& library_link_flags();

// Builds `source` with the op's entry shim into a shared object (cached by content, flags and
// compiler version). Returns the .so path, or a config error with the compiler's diagnostics.
// The op's reference.py (a PyTorch reference) is built by build_pytorch_reference() instead.
Result<fs::path> build_trusted(const spec::OpSpec& op, const fs::path& source, const Toolchain& tc,
                               const std::vector<std::string>& extra_flags = {});

// One source file of a trusted build: a file (`path`), or generated `text` written as `name`.
struct TrustedSource {
  fs::path path;
  std::string name;
  std::string text;
};

// Compiles `sources` into a shared object under cache_dir()/trusted/, cached by `key_text`
// (everything the object depends on besides the toolchain and `extra_flags`, which are part of
// the key too). Returns the .so path, or a config error with the compiler's diagnostics.
Result<fs::path> compile_trusted(std::string_view key_text, const std::vector<TrustedSource>& sources, const Toolchain& tc,
                                 const std::vector<std::string>& extra_flags);

// The OpenBLAS core type (OPENBLAS_CORETYPE) matching this CPU's ISA: "SkylakeX" with
// AVX-512, "Haswell" with AVX2 + FMA, nullopt otherwise. NativeKernel::load() sets it before
// the first kernel loads unless the user set it, because OpenBLAS 0.3.21 falls back to its
// slowest kernels on CPUs newer than its tables. Thread-safe.
std::optional<std::string> openblas_coretype_for_host();

// A loaded shared object with a kope_entry. Move-only; dlclose on destruction, but the code
// stays mapped (RTLD_NODELETE) so OpenMP runtimes it pulled in are never unloaded.
class NativeKernel {
 public:
  static Result<NativeKernel> load(const fs::path& so_path);
  NativeKernel(NativeKernel&& other) noexcept;
  NativeKernel& operator=(NativeKernel&& other) noexcept;
  NativeKernel(const NativeKernel&) = delete;
  NativeKernel& operator=(const NativeKernel&) = delete;
  ~NativeKernel();

  // Calls the kernel: buffers are inputs then outputs in spec order; dims in spec order.
  void call(void* const* buffers, const int64_t* dims) const { m_entry(buffers, dims); }

 private:
  NativeKernel() = default;
  void* m_handle = nullptr;
  void (*m_entry)(void* const*, const int64_t*) = nullptr;
};

}  // namespace kope::eval
