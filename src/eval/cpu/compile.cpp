#include "eval/cpu/compile.h"

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <regex>
#include <set>

#include <nlohmann/json.hpp>

#include "eval/cpu/cpu.h"
#include "eval/isa_check.h"
#include "eval/sandbox.h"
#include "hw/isa.h"
#include "util/fs.h"
#include "util/hash.h"
#include "util/strings.h"
#include "util/subprocess.h"

namespace kope::eval {

namespace {

using json = nlohmann::json;

// Bumped whenever the build recipe changes, so old cache entries are not reused.
constexpr const char* k_recipe = "kope-cpu-build-4";
constexpr const char* k_std = "-std=c++17";

}  // namespace

std::string isa_mismatch_message(std::string_view diagnostics, const Toolchain& tc) {
  // The header an intrinsic is defined in names its instruction set (avx512fintrin.h:
  // avx512f); the intrinsic is the first _mm name on the line.
  static const std::regex k_header(R"(([a-z0-9_]+)intrin\.h:)");
  static const std::regex k_intrinsic(R"(\b(_mm[0-9]*_[A-Za-z0-9_]+|_tile_[A-Za-z0-9_]+)\b)");
  // Clang: "always_inline function '_mm512_add_ps' requires target feature 'avx512f', ...".
  static const std::regex k_clang_feature(R"(requires target feature '([a-z0-9.\-]+)')");
  std::set<std::string> isas, intrinsics;
  for (const auto& line : util::split(diagnostics, '\n')) {
    std::smatch m;
    if (line.find("target specific option mismatch") != std::string::npos) {
      if (std::regex_search(line, m, k_header)) isas.insert(m[1].str());
    } else if (std::regex_search(line, m, k_clang_feature)) {
      isas.insert(m[1].str());
    } else {
      continue;
    }
    if (std::regex_search(line, m, k_intrinsic)) intrinsics.insert(m[1].str());
  }
  if (isas.empty() && intrinsics.empty()) return "";
  std::set<std::string> families;
  for (const auto& isa : isas) {
    if (isa.starts_with("avx512")) {
      families.insert("AVX-512");
    } else if (isa.starts_with("amx")) {
      families.insert("AMX");
    } else {
      std::string upper = isa;
      for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
      families.insert(upper);
    }
  }
  if (families.empty()) {  // no header named: judge by the intrinsics' prefix
    for (const auto& i : intrinsics) families.insert(i.starts_with("_mm512_") ? "AVX-512" : i.starts_with("_tile_") ? "AMX" : "SIMD");
  }
  std::vector<std::string> named(intrinsics.begin(), intrinsics.end());
  if (named.size() > 6) {
    named.resize(6);
    named.push_back("...");
  }
  std::string what = util::join(std::vector<std::string>(isas.begin(), isas.end()), ", ");
  if (!named.empty()) what += (what.empty() ? "" : ": ") + util::join(named, ", ");
  std::string flags = util::join(tc.flags, " ");
  std::string fam = util::join(std::vector<std::string>(families.begin(), families.end()), " and ");
  if (IsaLevel level = isa_level_of_flags(tc.flags); level != IsaLevel::native) {
    return fmt::format("the kernel uses {} instructions ({}) that the target level {} does not have (kernels are compiled with "
                       "{}): use only the ISA extensions the hardware section lists",
                       fam, what, isa_level_name(level), flags);
  }
  return fmt::format("the kernel uses {} instructions ({}) that the compile flags ({}) do not enable: use only the ISA "
                     "extensions the hardware section lists",
                     fam, what, flags);
}

std::string extra_flag_problem(std::string_view f) {
  static const char* const k_denied[] = {"-Wl,", "-Wa,", "-Wp,", "-Xlinker", "-Xassembler", "-Xpreprocessor", "-fplugin",
                                         "-fdump", "-fprofile", "-fauto-profile", "-frecord", "-fdebug-prefix",
                                         "-ffile-prefix", "-fmacro-prefix", "-fstack-usage", "-fcallgraph",
                                         "-fcompare-debug", "-save-temps", "-wrapper", "-specs", "-fopt-info",
                                         "-flto", "-fsyntax-only", "-fdiagnostics-format", "-fno-openmp"};
  if (f.empty()) return "an empty flag";
  for (const char* d : k_denied) {
    if (f.starts_with(d)) return fmt::format("'{}' is not allowed (it reads or writes files, or changes the build)", f);
  }
  for (const char* ok : {"-O", "-f", "-m", "-D", "-U", "-W", "-g"}) {
    if (f.starts_with(ok) && f.find_first_of(" \t\n/") == std::string_view::npos) return "";
  }
  if (f.starts_with("-std=")) return fmt::format("'{}': the language standard is fixed ({})", f, k_std);
  return fmt::format("'{}' is not allowed (only -O, -f, -m, -D, -U, -W and -g flags are)", f);
}

CpuCompiler::CpuCompiler(Toolchain toolchain, CompileLimits limits, bool inspect)
    : m_tc(std::move(toolchain)), m_limits(limits), m_inspect(inspect) {
  auto exe = util::find_executable(m_tc.compiler);
  std::error_code ec;
  m_compiler = exe ? fs::canonical(*exe, ec) : fs::path(m_tc.compiler);
  if (ec) m_compiler = *exe;
}

std::vector<std::string> CpuCompiler::compile_flags(const std::vector<std::string>& extra_flags) const {
  std::vector<std::string> f = m_tc.flags;
  f.push_back(k_std);
  f.push_back("-fPIC");
  for (const auto& e : extra_flags) f.push_back(e);
  return f;
}

Result<fs::path> CpuCompiler::shim_object(const spec::OpSpec& op) const {
  std::string shim = spec::render_entry_shim(op);
  auto flags = compile_flags({});
  std::string key = util::sha256_hex(fmt::format("{}\n{}\n{}\n{}", k_recipe, shim, m_tc.version, util::join(flags, " ")));
  fs::path dir = util::cache_dir() / "eval" / "shim";
  fs::path obj = dir / (key.substr(0, 32) + ".o");
  std::error_code ec;
  if (fs::exists(obj, ec)) return obj;
  KOPE_TRY(util::make_dirs(dir));
  KOPE_ASSIGN(util::TempDir tmp, util::TempDir::create("kope-shim-", dir));
  KOPE_TRY(util::write_file_atomic(tmp.path() / "kope_entry.cpp", shim));
  util::RunOptions ro;
  ro.spawn.argv = {m_compiler.string()};
  for (const auto& f : flags) ro.spawn.argv.push_back(f);
  for (const char* a : {"-c", "kope_entry.cpp", "-o", "kope_entry.o"}) ro.spawn.argv.emplace_back(a);
  ro.spawn.cwd = tmp.path();
  ro.timeout = std::chrono::seconds(120);
  KOPE_ASSIGN(util::RunResult r, util::run(ro));
  if (!r.status.success()) {
    return fail(ErrorKind::internal, "the entry shim of {} does not compile ({}):\n{}", op.name, r.status.describe(),
                util::truncate_text(r.err, 3000, 30));
  }
  if (::rename((tmp.path() / "kope_entry.o").c_str(), obj.c_str()) != 0) {
    return fail(ErrorKind::io, "cannot move the shim object into {}", dir.string());
  }
  return obj;
}

Result<BuildOutcome> CpuCompiler::build(const spec::OpSpec& op, std::string_view source,
                                        const std::vector<std::string>& extra_flags) const {
  for (const auto& f : extra_flags) {
    std::string why = extra_flag_problem(f);
    if (!why.empty()) return fail(ErrorKind::usage, "extra compile flag {}", why);
  }
  KOPE_ASSIGN(std::string above, flags_above_level(extra_flags));
  if (!above.empty()) return compile_error(std::move(above));
  if (source.size() > m_limits.source_bytes) {
    return compile_error(fmt::format("the source is {} long; the limit is {}", util::human_bytes(static_cast<double>(source.size())),
                                     util::human_bytes(static_cast<double>(m_limits.source_bytes))));
  }
  KOPE_ASSIGN(fs::path shim_o, shim_object(op));
  KOPE_ASSIGN(auto policy, SymbolPolicy::for_compiler(m_compiler.string()));
  auto flags = compile_flags(extra_flags);
  std::string shim = spec::render_entry_shim(op);
  std::string key_text = fmt::format("{}\n{}\n{}\n{}\n{}\n{}", k_recipe, m_tc.version, util::join(flags, " "),
                                     util::sha256_hex(shim + spec::render_signature(op)), util::sha256_hex(source), m_compiler.string());
  // Below native the disassembly keeps what the level check reads: an entry built with another
  // filter is not reused. Native keys are unchanged.
  if (std::string isa_filter = isa_disassembly_filter(isa_level_of_flags(m_tc.flags)); !isa_filter.empty()) {
    key_text += "\n" + isa_filter;
  }
  std::string key = util::sha256_hex(key_text);
  CandidateBuild b;
  b.entry = util::cache_dir() / "eval" / "compile" / key.substr(0, 2) / key.substr(0, 40);
  b.build = [&](const fs::path& scratch) { return build_fresh(op, source, flags, shim_o, scratch); };
  b.conclude = [&](const fs::path& dir, const json& stored) { return conclude(op, *policy, dir, stored); };
  return run_candidate_build(b);
}

// Below native, extra -m flags (-mavx512f, -march=native) must not lift the code above the
// level: the extensions the flags add are read from the compiler's predefined macros.
Result<std::string> CpuCompiler::flags_above_level(const std::vector<std::string>& extra_flags) const {
  IsaLevel level = isa_level_of_flags(m_tc.flags);
  if (level == IsaLevel::native) return std::string();
  std::vector<std::string> machine;
  for (const auto& f : extra_flags) {
    if (f.starts_with("-m")) machine.push_back(f);
  }
  if (machine.empty()) return std::string();
  KOPE_ASSIGN(CompilerTarget base, compiler_target(m_tc));
  Toolchain with = m_tc;
  for (const auto& f : machine) with.flags.push_back(f);
  auto lifted = compiler_target(with);
  if (!lifted) return std::string();  // a flag the compiler rejects: the compile reports it
  std::vector<std::string> added;
  for (const auto& ext : lifted->isa_extensions) {
    if (std::find(base.isa_extensions.begin(), base.isa_extensions.end(), ext) == base.isa_extensions.end()) added.push_back(ext);
  }
  if (added.empty()) return std::string();
  return fmt::format("the extra flags {} enable instructions ({}) that the target level {} does not have (kernels are compiled "
                     "with {}): use only the ISA extensions the hardware section lists",
                     util::join(machine, " "), util::join(added, ", "), isa_level_name(level), util::join(m_tc.flags, " "));
}

// Applies the inspection to a built object and turns everything into an outcome.
Result<BuildOutcome> CpuCompiler::conclude(const spec::OpSpec& op, const SymbolPolicy& policy, const fs::path& dir,
                                           const json& stored) const {
  if (stored.value("status", "") == "compile_error") return stored_compile_error(stored);
  KOPE_ASSIGN(BuiltObject obj, read_built_object(dir));
  // Below native, code above the level is a compile error however the source asked for it
  // (pragmas, target attributes, inline asm): an ISA rule, so it holds with `inspect` off too.
  if (IsaLevel level = isa_level_of_flags(m_tc.flags); level != IsaLevel::native) {
    std::vector<IsaViolation> above = instructions_above_level(obj.flagged, level);
    if (!above.empty()) return compile_error(above_level_message(above, level, m_tc.flags), above_level_diagnostics(above));
  }
  ObjectRules rules;
  rules.enforce = m_inspect;
  rules.no_entry = fmt::format("the source defines no kope_kernel; expected: {}", spec::render_signature(op));
  rules.no_entry_diagnostics = stored.value("link_diagnostics", "");
  rules.not_linked = "does not link: " + stored.value("link_message", std::string("the linker failed"));
  return conclude_object_build(dir, stored, policy.inspect(obj.object, obj.flagged), rules);
}

// The compile, disassembly filter and link of one candidate, in one sandbox run.
Result<FreshBuild> CpuCompiler::build_fresh(const spec::OpSpec& op, std::string_view source, const std::vector<std::string>& flags,
                                            const fs::path& shim_o, const fs::path& scratch) const {
  KOPE_TRY(util::write_file_atomic(scratch / fmt::format("kernel{}", k_cpu_file_extension), source));
  // The exact declaration is force-included, so a kernel whose parameters do not match the op
  // fails to compile with a message naming both, instead of running with the wrong arguments.
  KOPE_TRY(util::write_file_atomic(scratch / "kope_signature.h",
                                   fmt::format("// The kernel ABI of op {} (kope).\n#pragma once\n#include <stdint.h>\n{}\n", op.name,
                                               spec::render_signature(op))));
  std::error_code ec;
  fs::copy_file(shim_o, scratch / "kope_entry.o", fs::copy_options::overwrite_existing, ec);
  if (ec) return fail(ErrorKind::io, "cannot copy {}: {}", shim_o.string(), ec.message());
  KOPE_ASSIGN(fs::path objdump, objdump_path());
  std::string marker = step_marker();
  std::string cxx = util::shell_quote(m_compiler.string());
  std::string fl;
  for (const auto& f : flags) fl += " " + util::shell_quote(f);
  std::string script;
  script += "set -u\n";
  script += fmt::format("echo '{}compile' >&2\n", marker);
  script += fmt::format("{}{} -fdiagnostics-color=never -fmax-errors=20 -include kope_signature.h -c kernel.cpp -o kernel.o || exit 10\n",
                        cxx, fl);
  // Below native the raw bytes are shown (an EVEX prefix is seen in them) and the lines above
  // the level are kept too (eval/isa_check.h).
  std::string filter = std::string(k_disassembly_filter) + "|" + marker;
  std::string isa_filter = isa_disassembly_filter(isa_level_of_flags(m_tc.flags));
  if (!isa_filter.empty()) filter += "|" + isa_filter;
  script += fmt::format("{{ {} -d{} -w kernel.o || echo '{}objdump-failed'; }} | grep -E {} | head -c 1000000 > flagged.txt\n",
                        util::shell_quote(objdump.string()), isa_filter.empty() ? " --no-show-raw-insn" : "", marker,
                        util::shell_quote(filter));
  script += fmt::format("echo '{}link' >&2\n", marker);
  script += fmt::format("{}{} -shared -o kernel.so kernel.o kope_entry.o -Wl,-z,defs -Wl,-z,now -Wl,-z,noexecstack || exit 12\n", cxx, fl);

  SandboxSpec spec = build_sandbox(scratch, m_limits, std::move(script));
  // A compiler outside /usr (e.g. $KOPE_CXX=/opt/gcc-13/bin/g++) brings its prefix.
  if (!m_compiler.string().starts_with("/usr/")) {
    fs::path prefix = m_compiler.parent_path().parent_path();
    spec.ro_binds.emplace_back(prefix, prefix.string());
  }
  KOPE_ASSIGN(util::RunResult r, run_build_sandbox(spec, m_limits));

  auto steps = split_steps(r.err, marker);
  std::vector<std::string> scrub = {"/build", scratch.string()};
  std::string compile_diag = scrub_diagnostics(steps["compile"], scrub);
  if (steps.count("setup") && steps["setup"].find("bwrap:") != std::string::npos) {
    return fail(ErrorKind::unavailable, "the compile sandbox could not start: {}", util::trim(steps["setup"]));
  }
  FreshBuild limited = limit_outcome(r, compile_diag);
  if (!limited.uncached.message.empty()) return limited;

  if (r.status.exited && r.status.code == 10) {
    std::string first = isa_mismatch_message(compile_diag, m_tc);
    if (first.empty()) {
      first = first_line_where(compile_diag, [](std::string_view l) { return l.find("error") != std::string_view::npos; });
    }
    return FreshBuild{compile_error_record(first, compile_diag), {}};
  }
  if (!r.status.exited || (r.status.code != 0 && r.status.code != 12)) {
    return fail(ErrorKind::internal, "the build sandbox {}: {}", r.status.describe(), util::truncate_text(r.err, 2000, 20));
  }
  if (steps["inspect"].find(marker + "objdump-failed") != std::string::npos) {
    return fail(ErrorKind::internal, "objdump could not disassemble the candidate object");
  }
  json j;
  j["status"] = "built";
  j["linked"] = r.status.code == 0;
  std::string link_diag = scrub_diagnostics(steps["link"], scrub);
  j["link_diagnostics"] = link_diag;
  std::string first = first_line_where(link_diag, [](std::string_view l) {
    return l.find("undefined reference") != std::string_view::npos || l.find("error") != std::string_view::npos;
  });
  j["link_message"] = first.empty() ? std::string("the linker failed") : first;
  // Flagged instructions travel with the object; "setup" noise never matters here.
  std::string flagged;
  if (auto t = util::read_file(scratch / "flagged.txt")) flagged = *t;
  if (flagged.find(marker) != std::string::npos) return fail(ErrorKind::internal, "objdump could not disassemble the candidate object");
  return FreshBuild{std::move(j), {}};
}

// The machine's limits stopped the compiler: an outcome that is not cached (the message is
// empty when no limit was hit). Limits come first: they are the machine's verdict, not the
// compiler's.
FreshBuild CpuCompiler::limit_outcome(const util::RunResult& r, std::string diagnostics) const {
  int sig = r.status.exited ? 0 : r.status.signal;
  if (r.status.exited && r.status.code > 128 && r.status.code < 128 + 65) sig = r.status.code - 128;
  std::string message;
  auto bytes = [](uint64_t n) { return util::human_bytes(static_cast<double>(n)); };
  if (r.timed_out) {
    message = fmt::format("the compiler ran past its time limit ({} s) and was stopped", m_limits.wall.count());
  } else if (r.output_capped) {
    message = fmt::format("the compiler's output passed {} and it was stopped (first errors below)", bytes(m_limits.output_cap));
  } else if (sig == SIGXCPU) {
    message = fmt::format("the compiler ran past its CPU-time limit ({} s)", m_limits.cpu_seconds);
  } else if (sig == SIGXFSZ || diagnostics.find("File too large") != std::string::npos ||
             diagnostics.find("File size limit exceeded") != std::string::npos) {
    message = fmt::format("the object would exceed the {} file-size limit", bytes(m_limits.object_bytes));
  } else if (diagnostics.find("out of memory") != std::string::npos || diagnostics.find("virtual memory exhausted") != std::string::npos ||
             diagnostics.find("std::bad_alloc") != std::string::npos) {
    message = fmt::format("the compiler ran out of memory (limit {})", bytes(m_limits.memory_bytes));
  } else if (sig != 0) {
    message = fmt::format("the compiler was killed by {}", util::signal_name(sig));
  }
  FreshBuild f;
  if (!message.empty()) f.uncached = compile_error(std::move(message), std::move(diagnostics));
  return f;
}

}  // namespace kope::eval
