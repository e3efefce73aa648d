#include "eval/native.h"

#include <dlfcn.h>

#include <cstdlib>
#include <map>
#include <mutex>
#include <set>

#include "eval/pytorch_reference.h"
#include "hw/isa.h"
#include "util/fs.h"
#include "util/hash.h"
#include "util/strings.h"
#include "util/subprocess.h"

namespace kope::eval {

std::string Toolchain::id() const { return fmt::format("{} | {}", version, util::join(flags, " ")); }

// $KOPE_CXXFLAGS (default "-O3 -march=native -fopenmp") for the ISA level of $KOPE_ISA
// (hw/isa.h): below native, the -march flag becomes the level's (-march=x86-64-v3 -mtune=native)
// and a -mtune is dropped. Cached per level.
Result<Toolchain> cpu_toolchain() {
  KOPE_ASSIGN(IsaLevel level, isa_level_from_env());
  static std::mutex mu;
  static std::map<IsaLevel, Result<Toolchain>> cached;
  std::lock_guard lock(mu);
  if (auto it = cached.find(level); it != cached.end()) return it->second;
  Toolchain tc;
  tc.compiler = util::get_env("KOPE_CXX").value_or("g++");
  std::string flags = util::get_env("KOPE_CXXFLAGS").value_or("-O3 -march=native -fopenmp");
  for (auto& f : util::split(flags, ' ')) {
    std::string flag(util::trim(f));
    if (flag.empty()) continue;
    if (level != IsaLevel::native && (flag.starts_with("-march=") || flag.starts_with("-mtune="))) {
      if (flag.starts_with("-march=")) {
        for (auto& l : isa_level_flags(level)) tc.flags.push_back(l);
      }
      continue;
    }
    tc.flags.push_back(flag);
  }
  util::RunOptions ro;
  ro.spawn.argv = {tc.compiler, "--version"};
  ro.timeout = std::chrono::seconds(30);
  auto r = util::run(ro);
  Result<Toolchain> out = tc;
  if (!r) {
    out = std::unexpected(Error{ErrorKind::unavailable, fmt::format("the C++ compiler '{}' cannot be run: {}", tc.compiler, r.error().message)});
  } else if (!r->status.success()) {
    out = std::unexpected(Error{ErrorKind::unavailable, fmt::format("'{} --version' {}", tc.compiler, r->status.describe())});
  } else {
    out->version = std::string(util::trim(r->out.substr(0, r->out.find('\n'))));
  }
  cached.emplace(level, out);
  return out;
}

CompilerTarget compiler_target_from_macros(std::string_view macros) {
  // Macro name (without the underscores) and the extension's name, in the order a reader scans
  // them: vector ISA by generation, AVX-512 subsets, AMX, then scalar and crypto extensions.
  static const std::vector<std::pair<std::string, std::string>> k_isa = {
      {"SSE", "sse"}, {"SSE2", "sse2"}, {"SSE3", "sse3"}, {"SSSE3", "ssse3"}, {"SSE4_1", "sse4.1"},
      {"SSE4_2", "sse4.2"}, {"SSE4A", "sse4a"}, {"AVX", "avx"}, {"AVX2", "avx2"}, {"FMA", "fma"},
      {"FMA4", "fma4"}, {"F16C", "f16c"}, {"AVXVNNI", "avxvnni"}, {"AVXIFMA", "avxifma"},
      {"AVXVNNIINT8", "avxvnniint8"}, {"AVXNECONVERT", "avxneconvert"}, {"AVX512F", "avx512f"},
      {"AVX512CD", "avx512cd"}, {"AVX512BW", "avx512bw"}, {"AVX512DQ", "avx512dq"}, {"AVX512VL", "avx512vl"},
      {"AVX512IFMA", "avx512ifma"}, {"AVX512VBMI", "avx512vbmi"}, {"AVX512VBMI2", "avx512vbmi2"},
      {"AVX512BITALG", "avx512bitalg"}, {"AVX512VPOPCNTDQ", "avx512vpopcntdq"},
      {"AVX512VP2INTERSECT", "avx512vp2intersect"}, {"AVX512VNNI", "avx512vnni"}, {"AVX512BF16", "avx512bf16"},
      {"AVX512FP16", "avx512fp16"}, {"AVX512ER", "avx512er"}, {"AVX512PF", "avx512pf"},
      {"AVX5124FMAPS", "avx5124fmaps"}, {"AVX5124VNNIW", "avx5124vnniw"}, {"AMX_TILE", "amx-tile"},
      {"AMX_INT8", "amx-int8"}, {"AMX_BF16", "amx-bf16"}, {"AMX_FP16", "amx-fp16"}, {"GFNI", "gfni"},
      {"VAES", "vaes"}, {"VPCLMULQDQ", "vpclmulqdq"}, {"AES", "aes"}, {"PCLMUL", "pclmul"}, {"SHA", "sha"},
      {"BMI", "bmi"}, {"BMI2", "bmi2"}, {"LZCNT", "lzcnt"}, {"POPCNT", "popcnt"}, {"ADX", "adx"},
      {"MOVBE", "movbe"}, {"PREFETCHWT1", "prefetchwt1"}, {"PRFCHW", "prfchw"}, {"CLFLUSHOPT", "clflushopt"},
      {"CLWB", "clwb"}, {"MOVDIRI", "movdiri"}, {"MOVDIR64B", "movdir64b"}};
  std::set<std::string> defined;
  std::string tune;
  for (auto& raw : util::split(macros, '\n')) {
    std::string_view line = util::trim(raw);
    if (!line.starts_with("#define __")) continue;
    line.remove_prefix(8);
    size_t sp = line.find(' ');
    std::string name(line.substr(0, sp));
    if (name.size() > 4 && name.ends_with("__")) {
      std::string bare = name.substr(2, name.size() - 4);
      defined.insert(bare);
      if (bare.starts_with("tune_")) tune = bare.substr(5);
    }
  }
  CompilerTarget out;
  out.tune = tune;
  for (const auto& [macro, ext] : k_isa) {
    if (defined.contains(macro)) out.isa_extensions.push_back(ext);
  }
  return out;
}

Result<CompilerTarget> compiler_target(const Toolchain& tc) {
  static std::mutex mu;
  static std::map<std::string, CompilerTarget> cache;
  std::lock_guard lock(mu);
  std::string key = tc.compiler + "\n" + tc.id();
  if (auto it = cache.find(key); it != cache.end()) return it->second;
  util::RunOptions ro;
  ro.spawn.argv = {tc.compiler};
  for (const auto& f : tc.flags) ro.spawn.argv.push_back(f);
  for (const char* a : {"-dM", "-E", "-x", "c++", "/dev/null"}) ro.spawn.argv.emplace_back(a);
  ro.timeout = std::chrono::seconds(30);
  KOPE_ASSIGN(util::RunResult r, util::run(ro));
  if (!r.status.success()) {
    return fail(ErrorKind::unavailable, "'{} {} -dM -E' {}: {}", tc.compiler, util::join(tc.flags, " "), r.status.describe(),
                util::truncate_text(r.err, 300, 3));
  }
  CompilerTarget t = compiler_target_from_macros(r.out);
  cache[key] = t;
  return t;
}

const std::vector<std::string>& library_link_flags() {
  static const std::vector<std::string> k = {"-I/usr/include/x86_64-linux-gnu/openblas-pthread", "-ldnnl",
                                             "-lopenblas"};
  return k;
}

Result<fs::path> compile_trusted(std::string_view key_text, const std::vector<TrustedSource>& sources, const Toolchain& tc,
                                 const std::vector<std::string>& extra_flags) {
  std::string key = util::sha256_hex(std::string(key_text) + std::string(1, '\0') + tc.id() + std::string(1, '\0') + util::join(extra_flags, " "));
  fs::path dir = util::cache_dir() / "trusted";
  fs::path so = dir / (key.substr(0, 32) + ".so");
  std::error_code ec;
  if (fs::exists(so, ec)) return so;
  KOPE_TRY(util::make_dirs(dir));
  KOPE_ASSIGN(util::TempDir tmp, util::TempDir::create("kope-build-", dir));
  fs::path out = tmp.path() / "kernel.so";
  util::RunOptions ro;
  ro.spawn.argv = {tc.compiler};
  for (const auto& f : tc.flags) ro.spawn.argv.push_back(f);
  for (const auto& f : {"-std=c++17", "-fPIC", "-shared", "-o"}) ro.spawn.argv.push_back(f);
  ro.spawn.argv.push_back(out.string());
  for (const auto& s : sources) {
    fs::path path = s.path;
    if (path.empty()) {  // generated text: written to the scratch directory
      path = tmp.path() / s.name;
      KOPE_TRY(util::write_file_atomic(path, s.text));
    }
    ro.spawn.argv.push_back(fs::absolute(path).string());
  }
  for (const auto& f : extra_flags) ro.spawn.argv.push_back(f);
  ro.timeout = std::chrono::seconds(300);
  ro.stderr_cap = 64 << 10;
  KOPE_ASSIGN(util::RunResult r, util::run(ro));
  if (!r.status.success()) {
    const TrustedSource& first = sources.front();
    return fail(ErrorKind::config, "{}: does not compile ({}):\n{}", first.path.empty() ? first.name : first.path.string(),
                r.status.describe(), util::truncate_text(r.err, 4000, 40));
  }
  if (::rename(out.c_str(), so.c_str()) != 0) return fail(ErrorKind::io, "cannot move {} into the cache", out.string());
  return so;
}

Result<fs::path> build_trusted(const spec::OpSpec& op, const fs::path& source, const Toolchain& tc,
                               const std::vector<std::string>& extra_flags) {
  if (has_pytorch_reference(op) && source == op.reference_path) return build_pytorch_reference(op, tc);
  KOPE_ASSIGN(std::string src, util::read_file(source));
  std::string shim = spec::render_entry_shim(op);
  std::vector<TrustedSource> sources = {{source, "", ""}, {fs::path(), "kope_entry.cpp", shim}};
  return compile_trusted(src + std::string(1, '\0') + shim, sources, tc, extra_flags);
}

std::optional<std::string> openblas_coretype_for_host() {
  // Intel and AMD parts with AVX-512 run OpenBLAS's SkylakeX kernels; AVX2 parts (Zen
  // included) its Haswell kernels, which is what a correct detection picks for them.
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq")) {
    return "SkylakeX";
  }
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return "Haswell";
  return std::nullopt;
}

namespace {

// OpenBLAS 0.3.21 (Debian 12) does not know CPUs newer than its tables (e.g. family 6 model
// 207) and silently falls back to its SSE3 "Prescott" kernels, a 4-5x slower sgemm/dgemm than
// the same library on a CPU it knows. OpenBLAS reads OPENBLAS_CORETYPE when it is loaded, so
// it is set once, before the first trusted kernel (and with it libopenblas) is loaded, unless
// the user chose a core type.
void pin_openblas_coretype() {
  static std::once_flag once;
  std::call_once(once, [] {
    if (util::get_env("OPENBLAS_CORETYPE")) return;
    if (auto core = openblas_coretype_for_host()) ::setenv("OPENBLAS_CORETYPE", core->c_str(), 0);
  });
}

}  // namespace

Result<NativeKernel> NativeKernel::load(const fs::path& so_path) {
  pin_openblas_coretype();
  // RTLD_NODELETE: dlclose must never unmap a kernel or its dependencies. Unloading the last
  // kernel that pulled in libgomp would unload libgomp under its parked worker threads and
  // crash the process (native_test.cpp). Trusted kernels are few, so keeping them is cheap.
  void* h = ::dlopen(so_path.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
  if (h == nullptr) return fail(ErrorKind::io, "cannot load {}: {}", so_path.string(), ::dlerror());
  void* sym = ::dlsym(h, "kope_entry");
  if (sym == nullptr) {
    ::dlclose(h);
    return fail(ErrorKind::internal, "{} has no kope_entry", so_path.string());
  }
  NativeKernel k;
  k.m_handle = h;
  k.m_entry = reinterpret_cast<void (*)(void* const*, const int64_t*)>(sym);
  return k;
}

NativeKernel::NativeKernel(NativeKernel&& other) noexcept { *this = std::move(other); }

NativeKernel& NativeKernel::operator=(NativeKernel&& other) noexcept {
  if (this != &other) {
    if (m_handle) ::dlclose(m_handle);
    m_handle = other.m_handle;
    m_entry = other.m_entry;
    other.m_handle = nullptr;
    other.m_entry = nullptr;
  }
  return *this;
}

NativeKernel::~NativeKernel() {
  if (m_handle) ::dlclose(m_handle);
}

}  // namespace kope::eval
