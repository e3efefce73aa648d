#include "eval/cpu/compile.h"

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <random>
#include <regex>

#include <nlohmann/json.hpp>

#include "eval/sandbox.h"
#include "util/fs.h"
#include "util/hash.h"
#include "util/strings.h"
#include "util/subprocess.h"

namespace kope::eval {

namespace {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

// Bumped whenever the build recipe changes, so old cache entries are not reused.
constexpr const char* k_recipe = "kope-cpu-build-4";
constexpr const char* k_std = "-std=c++17";

std::string quote(std::string_view s) { return "'" + util::replace_all(std::string(s), "'", "'\\''") + "'"; }

std::string nonce() {
  static thread_local std::mt19937_64 rng(std::random_device{}());
  return fmt::format("{:016x}", rng());
}

// Splits the combined stderr of the build script at its step markers.
std::map<std::string, std::string> split_steps(std::string_view err, const std::string& marker) {
  std::map<std::string, std::string> out;
  std::string step = "setup";
  for (auto& line : util::split(err, '\n')) {
    if (line.starts_with(marker)) {
      step = std::string(util::trim(line.substr(marker.size())));
      continue;
    }
    out[step] += line;
    out[step] += '\n';
  }
  return out;
}

}  // namespace

Status publish_cache_entry(util::TempDir& staged, const fs::path& entry, const std::string& outcome_json) {
  KOPE_TRY(util::write_file_atomic(staged.path() / "outcome.json", outcome_json));
  if (::rename(staged.path().c_str(), entry.c_str()) == 0) {
    staged.keep();
    ::chmod(entry.c_str(), 0755);
    return {};
  }
  std::error_code ec;
  if (!fs::exists(entry / "outcome.json", ec)) return fail(ErrorKind::io, "cannot store the build in {}", entry.string());
  return {};
}

Status store_native_build(const fs::path& scratch, const fs::path& entry, const std::string& outcome_json) {
  KOPE_TRY(util::make_dirs(entry.parent_path()));
  KOPE_ASSIGN(util::TempDir staged, util::TempDir::create("tmp-", entry.parent_path()));
  std::error_code ec;
  for (const char* f : {"kernel.o", "kernel.so", "flagged.txt"}) {
    if (fs::exists(scratch / f, ec)) {
      fs::copy_file(scratch / f, staged.path() / f, fs::copy_options::overwrite_existing, ec);
      if (ec) return fail(ErrorKind::io, "cannot store {} in the compile cache: {}", f, ec.message());
    }
  }
  return publish_cache_entry(staged, entry, outcome_json);
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

std::string scrub_diagnostics(std::string_view text, const std::vector<std::string>& scratch_paths, size_t max_lines,
                              size_t max_bytes) {
  std::string s(text);
  for (const auto& p : scratch_paths) {
    if (!p.empty()) s = util::replace_all(std::move(s), p + "/", "");
  }
  static const std::regex k_tmp("/tmp/cc[A-Za-z0-9]{6}\\.[A-Za-z]+");
  s = std::regex_replace(s, k_tmp, "<temporary file>");
  static const std::regex k_ansi("\x1b\\[[0-9;]*[mK]");
  s = std::regex_replace(s, k_ansi, "");
  // Group lines into blocks: a block starts at a located diagnostic or a context header.
  static const std::regex k_start(R"(^([^ ].*:[0-9]+:[0-9]+: |[^ ].*: In |In file included from |[^ ]+: (error|warning|fatal error|note): |collect2: |/usr/bin/ld: ))");
  static const std::regex k_error(R"((error|fatal error): |undefined reference|collect2: )");
  std::vector<std::vector<std::string>> blocks;
  bool context_open = false;
  for (auto& line : util::split(s, '\n')) {
    bool starts = std::regex_search(line, k_start) && line.find(": note: ") == std::string::npos;
    bool context = line.find(": In ") != std::string::npos || line.starts_with("In file included from") ||
                   line.starts_with("                 from ");
    if (blocks.empty() || (starts && !context_open)) blocks.emplace_back();
    blocks.back().push_back(line);
    context_open = context;
  }
  std::vector<std::string> ordered;
  for (int pass = 0; pass < 2; ++pass) {
    for (const auto& b : blocks) {
      bool is_error = false;
      for (const auto& l : b) is_error = is_error || std::regex_search(l, k_error);
      if ((pass == 0) != is_error) continue;
      for (const auto& l : b) ordered.push_back(l);
    }
  }
  while (!ordered.empty() && util::trim(ordered.back()).empty()) ordered.pop_back();
  std::string out;
  size_t shown = 0;
  for (; shown < ordered.size() && shown < max_lines; ++shown) {
    if (out.size() + ordered[shown].size() + 1 > max_bytes) break;
    out += ordered[shown];
    out += '\n';
  }
  if (shown < ordered.size()) out += fmt::format("[... {} more lines]\n", ordered.size() - shown);
  return out;
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
  auto t0 = Clock::now();
  BuildOutcome out;
  auto done = [&](BuildOutcome o) {
    o.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    return o;
  };
  for (const auto& f : extra_flags) {
    std::string why = extra_flag_problem(f);
    if (!why.empty()) return fail(ErrorKind::usage, "extra compile flag {}", why);
  }
  if (source.size() > m_limits.source_bytes) {
    out.status = BuildOutcome::Status::compile_error;
    out.message = fmt::format("the source is {} long; the limit is {}", util::human_bytes(static_cast<double>(source.size())),
                              util::human_bytes(static_cast<double>(m_limits.source_bytes)));
    return done(out);
  }
  KOPE_ASSIGN(fs::path shim_o, shim_object(op));
  KOPE_ASSIGN(auto policy, SymbolPolicy::for_compiler(m_compiler.string()));
  auto flags = compile_flags(extra_flags);
  std::string shim = spec::render_entry_shim(op);
  std::string key = util::sha256_hex(fmt::format("{}\n{}\n{}\n{}\n{}\n{}", k_recipe, m_tc.version, util::join(flags, " "),
                                                 util::sha256_hex(shim + spec::render_signature(op)), util::sha256_hex(source),
                                                 m_compiler.string()));
  fs::path entry = util::cache_dir() / "eval" / "compile" / key.substr(0, 2) / key.substr(0, 40);

  // Applies the inspection to a built object and turns everything into an outcome.
  auto conclude = [&](const fs::path& dir, const json& j, bool cached) -> Result<BuildOutcome> {
    BuildOutcome o;
    o.cached = cached;
    std::string status = j.value("status", "");
    if (status == "compile_error") {
      o.status = BuildOutcome::Status::compile_error;
      o.message = j.value("message", "does not compile");
      o.diagnostics = j.value("diagnostics", "");
      return done(o);
    }
    KOPE_ASSIGN(elf::File obj, elf::read(dir / "kernel.o"));
    std::string flagged;
    if (auto t = util::read_file(dir / "flagged.txt")) flagged = *t;
    o.inspection = policy->inspect(obj, flagged);
    if (m_inspect && o.inspection.rejected) {
      o.status = BuildOutcome::Status::rejected;
      o.message = o.inspection.reason;
      o.diagnostics = util::join(o.inspection.findings, "\n");
      return done(o);
    }
    if (!o.inspection.defines_entry) {
      o.status = BuildOutcome::Status::compile_error;
      o.message = fmt::format("the source defines no kope_kernel; expected: {}", spec::render_signature(op));
      o.diagnostics = j.value("link_diagnostics", "");
      return done(o);
    }
    if (!j.value("linked", false)) {
      o.status = BuildOutcome::Status::compile_error;
      o.message = "does not link: " + j.value("link_message", std::string("the linker failed"));
      o.diagnostics = j.value("link_diagnostics", "");
      return done(o);
    }
    o.status = BuildOutcome::Status::ok;
    o.shared_object = dir / "kernel.so";
    o.message = "built";
    if (!o.inspection.notes.empty()) o.diagnostics = util::join(o.inspection.notes, "\n");
    return done(o);
  };

  std::error_code ec;
  if (fs::exists(entry / "outcome.json", ec)) {
    auto text = util::read_file(entry / "outcome.json");
    if (text) {
      try {
        return conclude(entry, json::parse(*text), true);
      } catch (const json::exception&) {
        // A damaged entry: rebuild it below.
      }
    }
  }

  // A fresh build in a private scratch directory, inside the sandbox.
  KOPE_ASSIGN(util::TempDir scratch, util::TempDir::create("kope-cc-", sandbox_scratch_parent()));
  KOPE_TRY(util::write_file_atomic(scratch.path() / "kernel.cpp", source));
  // The exact declaration is force-included, so a kernel whose parameters do not match the op
  // fails to compile with a message naming both, instead of running with the wrong arguments.
  KOPE_TRY(util::write_file_atomic(scratch.path() / "kope_signature.h",
                                   fmt::format("// The kernel ABI of op {} (kope).\n#pragma once\n#include <stdint.h>\n{}\n", op.name,
                                               spec::render_signature(op))));
  fs::copy_file(shim_o, scratch.path() / "kope_entry.o", fs::copy_options::overwrite_existing, ec);
  if (ec) return fail(ErrorKind::io, "cannot copy {}: {}", shim_o.string(), ec.message());
  static const auto objdump = util::find_executable("objdump");
  if (!objdump) return fail(ErrorKind::unavailable, "objdump (binutils) is not installed; it is needed to inspect candidates");
  std::string marker = "@@kope-" + nonce() + " ";
  std::string cxx = quote(m_compiler.string());
  std::string fl;
  for (const auto& f : flags) fl += " " + quote(f);
  std::string script;
  script += "set -u\n";
  script += fmt::format("echo '{}compile' >&2\n", marker);
  script += fmt::format("{}{} -fdiagnostics-color=never -fmax-errors=20 -include kope_signature.h -c kernel.cpp -o kernel.o || exit 10\n",
                        cxx, fl);
  script += fmt::format("{{ {} -d --no-show-raw-insn -w kernel.o || echo '{}objdump-failed'; }} | grep -E {} | head -c 1000000 > flagged.txt\n",
                        quote(objdump->string()), marker, quote(std::string(k_disassembly_filter) + "|" + marker));
  script += fmt::format("echo '{}link' >&2\n", marker);
  script += fmt::format("{}{} -shared -o kernel.so kernel.o kope_entry.o -Wl,-z,defs -Wl,-z,now -Wl,-z,noexecstack || exit 12\n", cxx, fl);

  SandboxSpec spec;
  spec.uid = prepare_sandbox_uid({scratch.path()});
  spec.rw_binds.emplace_back(scratch.path(), "/build");
  spec.chdir = "/build";
  spec.tmp_bytes = m_limits.tmp_bytes;
  spec.env = {{"PATH", "/usr/bin:/bin"}, {"LANG", "C"}, {"LC_ALL", "C"}, {"TMPDIR", "/tmp"}, {"HOME", "/tmp"}};
  // A compiler outside /usr (e.g. $KOPE_CXX=/opt/gcc-13/bin/g++) brings its prefix.
  if (!m_compiler.string().starts_with("/usr/")) {
    fs::path prefix = m_compiler.parent_path().parent_path();
    spec.ro_binds.emplace_back(prefix, prefix.string());
  }
  // The script travels on the command line, not as a file in the writable scratch directory the
  // compiler shares with it.
  spec.command = {"/bin/sh", "-c", script};
  KOPE_ASSIGN(auto argv, sandbox_argv(spec));
  util::RunOptions ro;
  ro.spawn.argv = std::move(argv);
  ro.spawn.env = std::vector<std::string>{"PATH=/usr/bin:/bin", "LANG=C"};
  ro.spawn.limits.cpu_seconds = m_limits.cpu_seconds;
  ro.spawn.limits.address_space_bytes = m_limits.memory_bytes;
  ro.spawn.limits.file_size_bytes = m_limits.object_bytes;
  ro.spawn.limits.open_files = 256;
  ro.spawn.limits.processes = 32;
  ro.timeout = m_limits.wall;
  ro.stdout_cap = 64 << 10;
  ro.stderr_cap = m_limits.output_cap;
  ro.kill_on_output_cap = true;
  KOPE_ASSIGN(util::RunResult r, util::run(ro));

  auto steps = split_steps(r.err, marker);
  std::vector<std::string> scrub = {"/build", scratch.path().string()};
  std::string compile_diag = scrub_diagnostics(steps["compile"], scrub);
  if (steps.count("setup") && steps["setup"].find("bwrap:") != std::string::npos) {
    return fail(ErrorKind::unavailable, "the compile sandbox could not start: {}", util::trim(steps["setup"]));
  }
  // Limits first: they are the machine's verdict, not the compiler's.
  int sig = r.status.exited ? 0 : r.status.signal;
  if (r.status.exited && r.status.code > 128 && r.status.code < 128 + 65) sig = r.status.code - 128;
  auto limit_outcome = [&](std::string message) {
    out.status = BuildOutcome::Status::compile_error;
    out.message = std::move(message);
    out.diagnostics = compile_diag;
    return done(out);
  };
  if (r.timed_out) return limit_outcome(fmt::format("the compiler ran past its time limit ({} s) and was stopped", m_limits.wall.count()));
  if (r.output_capped) {
    return limit_outcome(fmt::format("the compiler's output passed {} and it was stopped (first errors below)",
                                     util::human_bytes(static_cast<double>(m_limits.output_cap))));
  }
  if (sig == SIGXCPU) return limit_outcome(fmt::format("the compiler ran past its CPU-time limit ({} s)", m_limits.cpu_seconds));
  if (sig == SIGXFSZ || compile_diag.find("File too large") != std::string::npos ||
      compile_diag.find("File size limit exceeded") != std::string::npos) {
    return limit_outcome(fmt::format("the object would exceed the {} file-size limit", util::human_bytes(static_cast<double>(m_limits.object_bytes))));
  }
  if (compile_diag.find("out of memory") != std::string::npos || compile_diag.find("virtual memory exhausted") != std::string::npos ||
      compile_diag.find("std::bad_alloc") != std::string::npos) {
    return limit_outcome(fmt::format("the compiler ran out of memory (limit {})", util::human_bytes(static_cast<double>(m_limits.memory_bytes))));
  }
  if (sig != 0) return limit_outcome(fmt::format("the compiler was killed by {}", util::signal_name(sig)));

  json j;
  if (r.status.exited && r.status.code == 10) {
    j["status"] = "compile_error";
    std::string first;
    for (auto& line : util::split(compile_diag, '\n')) {
      if (line.find("error") != std::string::npos) {
        first = line;
        break;
      }
    }
    j["message"] = first.empty() ? std::string("does not compile") : "does not compile: " + std::string(util::trim(first)).substr(0, 300);
    j["diagnostics"] = compile_diag;
  } else if (r.status.exited && (r.status.code == 0 || r.status.code == 12)) {
    if (steps["inspect"].find(marker + "objdump-failed") != std::string::npos) {
      return fail(ErrorKind::internal, "objdump could not disassemble the candidate object");
    }
    j["status"] = "built";
    j["linked"] = r.status.code == 0;
    std::string link_diag = scrub_diagnostics(steps["link"], scrub);
    j["link_diagnostics"] = link_diag;
    std::string first;
    for (auto& line : util::split(link_diag, '\n')) {
      if (line.find("undefined reference") != std::string::npos || line.find("error") != std::string::npos) {
        first = std::string(util::trim(line)).substr(0, 300);
        break;
      }
    }
    j["link_message"] = first.empty() ? std::string("the linker failed") : first;
    // Flagged instructions travel with the object; "setup" noise never matters here.
    std::string flagged;
    if (auto t = util::read_file(scratch.path() / "flagged.txt")) flagged = *t;
    if (flagged.find(marker) != std::string::npos) return fail(ErrorKind::internal, "objdump could not disassemble the candidate object");
  } else {
    return fail(ErrorKind::internal, "the build sandbox {}: {}", r.status.describe(), util::truncate_text(r.err, 2000, 20));
  }

  // Store the entry atomically: build it beside the final place, then rename.
  KOPE_TRY(store_native_build(scratch.path(), entry, j.dump(2)));
  return conclude(entry, j, false);
}

}  // namespace kope::eval
