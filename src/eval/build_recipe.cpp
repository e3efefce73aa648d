#include "eval/build_recipe.h"

#include <sys/stat.h>
#include <unistd.h>

#include <random>
#include <regex>

#include "util/hash.h"
#include "util/strings.h"

namespace kope::eval {

namespace {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

// Writes `outcome_json` as the outcome.json of `staged` (a directory beside `entry`), then
// renames it into place atomically. Losing the race to another process that stored the same
// entry first is not an error.
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

// The cached entry concluded, or nullopt when there is none or it is damaged (then rebuilt).
std::optional<Result<BuildOutcome>> conclude_cached(const CandidateBuild& b) {
  std::error_code ec;
  if (!fs::exists(b.entry / "outcome.json", ec)) return std::nullopt;
  auto text = util::read_file(b.entry / "outcome.json");
  if (!text) return std::nullopt;
  try {
    return b.conclude(b.entry, json::parse(*text));
  } catch (const json::exception&) {
    return std::nullopt;
  }
}

}  // namespace

Result<BuildOutcome> run_candidate_build(const CandidateBuild& b) {
  auto t0 = Clock::now();
  auto finish = [&](Result<BuildOutcome> o, bool cached) -> Result<BuildOutcome> {
    if (!o) return o;
    o->cached = cached;
    o->seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    return o;
  };
  if (auto cached = conclude_cached(b)) return finish(std::move(*cached), true);

  KOPE_ASSIGN(util::TempDir scratch, util::TempDir::create("kope-cc-", sandbox_scratch_parent()));
  KOPE_ASSIGN(FreshBuild fresh, b.build(scratch.path()));
  if (!fresh.stored) return finish(std::move(fresh.uncached), false);
  // Store the entry atomically: build it beside the final place, then rename.
  KOPE_TRY(util::make_dirs(b.entry.parent_path()));
  KOPE_ASSIGN(util::TempDir staged, util::TempDir::create("tmp-", b.entry.parent_path()));
  KOPE_TRY(b.keep ? b.keep(scratch.path(), staged.path(), *fresh.stored) : keep_object_build(scratch.path(), staged.path()));
  KOPE_TRY(publish_cache_entry(staged, b.entry, fresh.stored->dump(2)));
  return finish(b.conclude(b.entry, *fresh.stored), false);
}

Status keep_object_build(const fs::path& scratch, const fs::path& staged) {
  std::error_code ec;
  for (const char* f : {"kernel.o", "kernel.so", "flagged.txt"}) {
    if (fs::exists(scratch / f, ec)) {
      fs::copy_file(scratch / f, staged / f, fs::copy_options::overwrite_existing, ec);
      if (ec) return fail(ErrorKind::io, "cannot store {} in the compile cache: {}", f, ec.message());
    }
  }
  return {};
}

CompileLimits compile_limits(std::chrono::seconds timeout, uint64_t memory_bytes) {
  CompileLimits l;
  l.wall = timeout;
  l.cpu_seconds = static_cast<uint64_t>(timeout.count());
  l.memory_bytes = memory_bytes;
  return l;
}

SandboxSpec build_sandbox(const fs::path& scratch, const CompileLimits& limits, std::string script) {
  SandboxSpec spec;
  spec.uid = prepare_sandbox_uid({scratch});
  spec.rw_binds.emplace_back(scratch, "/build");
  spec.chdir = "/build";
  spec.tmp_bytes = limits.tmp_bytes;
  spec.env = {{"PATH", "/usr/bin:/bin"}, {"LANG", "C"}, {"LC_ALL", "C"}, {"TMPDIR", "/tmp"}, {"HOME", "/tmp"}};
  spec.command = {"/bin/sh", "-c", std::move(script)};
  return spec;
}

Result<util::RunResult> run_build_sandbox(const SandboxSpec& spec, const CompileLimits& limits) {
  KOPE_ASSIGN(auto argv, sandbox_argv(spec));
  util::RunOptions ro;
  ro.spawn.argv = std::move(argv);
  ro.spawn.env = std::vector<std::string>{"PATH=/usr/bin:/bin", "LANG=C"};
  ro.spawn.limits.cpu_seconds = limits.cpu_seconds;
  ro.spawn.limits.address_space_bytes = limits.memory_bytes;
  ro.spawn.limits.file_size_bytes = limits.object_bytes;
  ro.spawn.limits.open_files = 256;
  ro.spawn.limits.processes = limits.processes;
  ro.timeout = limits.wall;
  ro.stdout_cap = 64 << 10;
  ro.stderr_cap = limits.output_cap;
  ro.kill_on_output_cap = true;
  return util::run(ro);
}

Result<fs::path> objdump_path() {
  static const auto objdump = util::find_executable("objdump");
  if (!objdump) return fail(ErrorKind::unavailable, "objdump (binutils) is not installed; it is needed to inspect candidates");
  return *objdump;
}

std::string step_marker() {
  static thread_local std::mt19937_64 rng(std::random_device{}());
  return fmt::format("@@kope-{:016x} ", rng());
}

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

std::string first_line_where(std::string_view text, const std::function<bool(std::string_view)>& matches) {
  for (auto& line : util::split(text, '\n')) {
    if (matches(line)) return std::string(util::trim(line)).substr(0, 300);
  }
  return "";
}

json compile_error_record(std::string_view first_error, std::string diagnostics) {
  json j;
  j["status"] = "compile_error";
  j["message"] = first_error.empty() ? std::string("does not compile") : "does not compile: " + std::string(first_error);
  j["diagnostics"] = std::move(diagnostics);
  return j;
}

BuildOutcome compile_error(std::string message, std::string diagnostics) {
  BuildOutcome o;
  o.status = BuildOutcome::Status::compile_error;
  o.message = std::move(message);
  o.diagnostics = std::move(diagnostics);
  return o;
}

BuildOutcome stored_compile_error(const json& stored) {
  return compile_error(stored.value("message", "does not compile"), stored.value("diagnostics", ""));
}

BuildOutcome built(fs::path shared_object, std::string diagnostics) {
  BuildOutcome o;
  o.status = BuildOutcome::Status::ok;
  o.shared_object = std::move(shared_object);
  o.message = "built";
  o.diagnostics = std::move(diagnostics);
  return o;
}

BuildOutcome conclude_object_build(const fs::path& dir, const json& stored, InspectionReport inspection, const ObjectRules& rules) {
  BuildOutcome o;
  if (rules.enforce && inspection.rejected) {
    o.status = BuildOutcome::Status::rejected;
    o.message = inspection.reason;
    o.diagnostics = util::join(inspection.findings, "\n");
  } else if (!inspection.defines_entry) {
    o = compile_error(rules.no_entry, rules.no_entry_diagnostics);
  } else if (!stored.value("linked", false)) {
    o = compile_error(rules.not_linked, stored.value("link_diagnostics", ""));
  } else {
    o = built(dir / "kernel.so", util::join(inspection.notes, "\n"));
  }
  o.inspection = std::move(inspection);
  return o;
}

Result<BuiltObject> read_built_object(const fs::path& dir) {
  BuiltObject b;
  KOPE_ASSIGN(b.object, elf::read(dir / "kernel.o"));
  if (auto t = util::read_file(dir / "flagged.txt")) b.flagged = *t;
  return b;
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

}  // namespace kope::eval
