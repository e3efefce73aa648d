// Library baselines' configuration: the variables, the runner's report, --library-config best.
#include "eval/library.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <map>
#include <random>
#include <set>

#include <unistd.h>

#include <nlohmann/json.hpp>

#include "eval/backend.h"
#include "eval/measure.h"
#include "eval/native.h"
#include "eval/stats.h"
#include "hw/isa.h"
#include "util/file_lock.h"
#include "util/fs.h"
#include "util/hash.h"
#include "util/strings.h"
#include "util/time.h"

namespace kope::eval {

namespace {

using json = nlohmann::json;

// Bumped when the selection procedure changes, so cached selections are made again.
constexpr const char* k_selection_recipe = "kope-library-best-2";

// "key=value" of a report's part for `library` ("openblas core=Haswell threads=2 ...;").
std::map<std::string, std::string> report_fields(std::string_view report, std::string_view library) {
  std::map<std::string, std::string> out;
  for (const auto& part : util::split(report, ';')) {
    auto words = util::split(util::trim(part), ' ');
    if (words.empty() || words[0] != library) continue;
    for (size_t i = 1; i < words.size(); ++i) {
      auto eq = words[i].find('=');
      if (eq != std::string::npos) out[words[i].substr(0, eq)] = words[i].substr(eq + 1);
    }
  }
  return out;
}

bool iequals(std::string_view a, std::string_view b) { return util::to_lower(a) == util::to_lower(b); }

// The CPU features a named OpenBLAS core type's kernels need.
bool cpu_runs_openblas_core(std::string_view core) {
  bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512cd") &&
                __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
                __builtin_cpu_supports("avx512vl");
  if (core == "Sandybridge") return __builtin_cpu_supports("avx");
  if (core == "Haswell" || core == "Zen") return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  if (core == "SkylakeX") return avx512;
  if (core == "Cooperlake") return avx512 && __builtin_cpu_supports("avx512bf16");
  if (core == "SapphireRapids") return avx512 && __builtin_cpu_supports("avx512bf16") && __builtin_cpu_supports("avx512fp16");
  return false;
}

// The ISA level kernels are compiled for (--isa, hw/isa.h) holds the library baselines too: under
// x86-64-v3 OpenBLAS and oneDNN run their AVX2 code, as they would on an AVX2 machine, so a
// kernel limited to AVX2 is not measured against the library's AVX-512 code.
IsaLevel library_level() {
  auto level = isa_level_from_env();
  return level ? *level : IsaLevel::native;
}

bool openblas_core_within_level(std::string_view core, IsaLevel level) {
  if (level == IsaLevel::native) return true;
  if (iequals(core, "Sandybridge") || iequals(core, "Haswell") || iequals(core, "Zen")) return true;
  return level == IsaLevel::x86_64_v4 && iequals(core, "SkylakeX");
}

bool onednn_isa_within_level(std::string_view isa, IsaLevel level) {
  if (level == IsaLevel::native) return true;
  if (iequals(isa, "SSE41") || iequals(isa, "AVX") || iequals(isa, "AVX2")) return true;
  return level == IsaLevel::x86_64_v4 && iequals(isa, "AVX512_CORE");
}

bool cpu_runs_onednn_isa(std::string_view isa) {
  bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
  if (isa == "SSE41") return __builtin_cpu_supports("sse4.1");
  if (isa == "AVX") return __builtin_cpu_supports("avx");
  if (isa == "AVX2") return __builtin_cpu_supports("avx2");
  if (isa == "AVX2_VNNI") return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("avxvnni");
  if (isa == "AVX512_CORE") return avx512;
  if (isa == "AVX512_CORE_VNNI") return avx512 && __builtin_cpu_supports("avx512vnni");
  if (isa == "AVX512_CORE_BF16") return avx512 && __builtin_cpu_supports("avx512bf16");
  // AMX: oneDNN checks the tile support itself and caps below it when absent (the duplicate of
  // the effective ISA is dropped).
  if (isa == "AVX512_CORE_AMX") return avx512 && __builtin_cpu_supports("avx512bf16");
  return false;
}

json config_to_json(const LibraryConfig& c) {
  return {{"library", c.library}, {"setting", c.setting}, {"core", c.core},       {"threads", c.threads},
          {"version", c.version}, {"env", c.env},         {"forced", c.forced}, {"forced_by", c.forced_by}};
}

LibraryConfig config_from_json(const json& j) {
  LibraryConfig c;
  c.library = j.value("library", "");
  c.setting = j.value("setting", "");
  c.core = j.value("core", "");
  c.threads = j.value("threads", 0);
  c.version = j.value("version", "");
  c.env = j.value("env", "");
  c.forced = j.value("forced", false);
  c.forced_by = j.value("forced_by", "");
  return c;
}

}  // namespace

// --- the variables -----------------------------------------------------------------------------

const std::vector<std::string>& library_env_vars(std::string_view library) {
  static const std::vector<std::string> openblas = {"OPENBLAS_CORETYPE"};
  static const std::vector<std::string> onednn = {"ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA", "ONEDNN_CPU_ISA_HINTS",
                                                  "DNNL_CPU_ISA_HINTS"};
  static const std::vector<std::string> none;
  if (library == "openblas") return openblas;
  if (library == "onednn") return onednn;
  return none;
}

const std::vector<std::string>& all_library_env_vars() {
  static const std::vector<std::string> all = [] {
    std::vector<std::string> v = library_env_vars("openblas");
    for (const auto& n : library_env_vars("onednn")) v.push_back(n);
    return v;
  }();
  return all;
}

LibraryEnv library_env_default() {
  LibraryEnv env;
  const IsaLevel level = library_level();
  for (const auto& name : all_library_env_vars()) {
    std::optional<std::string> v = util::get_env(name.c_str());
    if (v && v->empty()) v.reset();
    if (name == "OPENBLAS_CORETYPE" && !v) v = openblas_coretype_for_host();
    // Below native, a setting above the level (or none, which lets the library use every
    // extension of this CPU) becomes the level's own.
    if (level != IsaLevel::native) {
      bool v3 = level == IsaLevel::x86_64_v3;
      if (name == "OPENBLAS_CORETYPE" && (!v || !openblas_core_within_level(*v, level))) v = v3 ? "Haswell" : "SkylakeX";
      if (name == "ONEDNN_MAX_CPU_ISA" && (!v || !onednn_isa_within_level(*v, level))) v = v3 ? "AVX2" : "AVX512_CORE";
      if (name == "DNNL_MAX_CPU_ISA" && v && !onednn_isa_within_level(*v, level)) v.reset();
    }
    env.emplace_back(name, v);
  }
  return env;
}

std::string library_env_text(const LibraryEnv& env) {
  std::vector<std::string> parts;
  for (const auto& name : all_library_env_vars()) {
    for (const auto& [n, v] : env) {
      if (n == name && v) parts.push_back(n + "=" + *v);
    }
  }
  return util::join(parts, " ");
}

std::string library_forced_by_environment(std::string_view library) {
  std::vector<std::string> parts;
  for (const auto& name : library_env_vars(library)) {
    auto v = util::get_env(name.c_str());
    if (v && !v->empty()) parts.push_back(name + "=" + *v);
  }
  return util::join(parts, ", ");
}

std::string onednn_isa_name(unsigned isa) {
  switch (isa) {
    case 0x0: return "all";
    case 0x1: return "sse41";
    case 0x3: return "avx";
    case 0x7: return "avx2";
    case 0xf: return "avx512_mic";
    case 0x1f: return "avx512_mic_4ops";
    case 0x27: return "avx512_core";
    case 0x67: return "avx512_core_vnni";
    case 0xe7: return "avx512_core_bf16";
    case 0x3e7: return "avx512_core_amx";
    case 0x407: return "avx2_vnni";
    default: return fmt::format("0x{:x}", isa);
  }
}

LibraryConfig parse_library_report(std::string_view report, std::string_view library, std::string_view setting,
                                   const LibraryEnv& env, int candidate_threads) {
  LibraryConfig c;
  c.library = std::string(library);
  c.setting = std::string(setting);
  auto f = report_fields(report, library);
  if (library == "openblas") {
    c.core = f.count("core") ? f["core"] : "";
  } else if (library == "onednn" && f.count("isa")) {
    c.core = onednn_isa_name(static_cast<unsigned>(std::strtoul(f["isa"].c_str(), nullptr, 0)));
  } else if (f.count("config")) {
    c.core = f["config"];  // GPU baselines: "fp32,tf32=off,device=NVIDIA_H200" (eval/cuda/ABI.md)
  }
  c.threads = f.count("threads") ? std::atoi(f["threads"].c_str()) : 0;
  if (f.count("version") && f["version"] != "?") c.version = f["version"];
  LibraryEnv own;
  for (const auto& kv : env) {
    const auto& vars = library_env_vars(library);
    if (std::find(vars.begin(), vars.end(), kv.first) != vars.end()) own.push_back(kv);
  }
  c.env = library_env_text(own);
  mark_library_forced(c, setting, candidate_threads);
  return c;
}

void mark_library_forced(LibraryConfig& c, std::string_view setting, int candidate_threads) {
  c.setting = std::string(setting);
  std::vector<std::string> forced;
  if (setting == "environment") {
    std::string by_env = library_forced_by_environment(c.library);
    if (!by_env.empty()) forced.push_back(by_env);
  }
  if (c.threads > 0 && candidate_threads > 0 && c.threads != candidate_threads) {
    forced.push_back(fmt::format("{} library threads for {} candidate threads", c.threads, candidate_threads));
  }
  c.forced = !forced.empty();
  c.forced_by = util::join(forced, ", ");
}

std::string library_display_name(std::string_view library) {
  if (library == "openblas") return "OpenBLAS";
  if (library == "onednn") return "oneDNN";
  if (library == "cublas") return "cuBLAS";
  if (library == "cublaslt") return "cuBLASLt";
  if (library == "cudnn") return "cuDNN";
  if (library == "cuda-naive") return "cuda-naive (kope)";
  return std::string(library);
}

std::string LibraryConfig::describe() const {
  std::string out = library_display_name(library);
  if (!version.empty()) out += " " + version;
  if (!core.empty()) out += fmt::format(" {} {}", library == "onednn" ? "ISA" : library == "openblas" ? "core" : "config", core);
  if (threads > 0) out += fmt::format(", {} thread{}", threads, threads == 1 ? "" : "s");
  if (forced) out += " (forced by " + forced_by + ")";
  if (!setting.empty() && setting != "environment") out += " (the fastest correct configuration: " + setting + ")";
  return out;
}

std::string LibraryConfig::forced_note() const {
  return forced ? " [library forced: " + forced_by + "]" : std::string();
}

std::vector<LibrarySetting> library_settings_to_try(std::string_view library) {
  std::vector<LibrarySetting> out;
  LibraryEnv base = library_env_default();
  const auto& vars = library_env_vars(library);
  auto with = [&](std::optional<std::string> value_of_first, bool unset_all) {
    LibraryEnv e = base;
    for (auto& [n, v] : e) {
      if (std::find(vars.begin(), vars.end(), n) == vars.end()) continue;
      if (unset_all) v.reset();
      if (n == vars.front() && value_of_first) v = value_of_first;
    }
    return e;
  };
  IsaLevel level = library_level();
  out.push_back({"environment", base, ""});
  // The library's own choice uses every extension of this CPU: not below native.
  if (level == IsaLevel::native) out.push_back({"auto", with(std::nullopt, true), ""});
  if (library == "openblas") {
    for (const char* core : {"Sandybridge", "Haswell", "Zen", "SkylakeX", "Cooperlake", "SapphireRapids"}) {
      if (cpu_runs_openblas_core(core) && openblas_core_within_level(core, level)) {
        out.push_back({fmt::format("openblas:{}", core), with(std::string(core), true), core});
      }
    }
  } else if (library == "onednn") {
    for (const char* isa : {"SSE41", "AVX", "AVX2", "AVX2_VNNI", "AVX512_CORE", "AVX512_CORE_VNNI", "AVX512_CORE_BF16",
                            "AVX512_CORE_AMX"}) {
      if (cpu_runs_onednn_isa(isa) && onednn_isa_within_level(isa, level)) {
        out.push_back({fmt::format("onednn:{}", isa), with(std::string(isa), true), ""});
      }
    }
  }
  return out;
}

std::optional<LibraryEnv> library_env_for_setting(std::string_view library, std::string_view setting) {
  for (auto& s : library_settings_to_try(library)) {
    if (s.name == setting) return s.env;
  }
  return std::nullopt;
}

json library_config_to_json(const LibraryConfig& c) { return config_to_json(c); }
LibraryConfig library_config_from_json(const json& j) { return config_from_json(j); }

// --- --library-config best ---------------------------------------------------------------------

namespace {

fs::path selection_path(const Backend& b, const spec::OpSpec& op) {
  std::string lib_hash;
  if (op.library_path) {
    if (auto t = util::read_file(*op.library_path)) lib_hash = util::sha256_hex(*t);
  }
  std::string key = util::sha256_hex(fmt::format("{}\n{}\n{}\n{}\n{}\n{}\n{}", k_selection_recipe, op.spec_hash, lib_hash, b.threads(),
                                                 b.target().str(), b.toolchain_id(), library_env_text(library_env_default())));
  return util::cache_dir() / "eval" / "baselines" / ("library-best-" + key.substr(0, 32) + ".json");
}

json selection_to_json(const LibrarySelection& s) {
  json trials = json::array();
  for (const auto& t : s.trials) {
    trials.push_back({{"setting", t.setting},
                      {"config", config_to_json(t.config)},
                      {"correct", t.correct},
                      {"problem", t.problem},
                      {"median_us", t.median_us},
                      {"ci95_us", t.ci95_us},
                      {"gflops", t.gflops},
                      {"geomean_us", t.geomean_us}});
  }
  return {{"op", s.op}, {"library", s.library}, {"best", s.best}, {"measured_at", s.measured_at}, {"trials", trials}};
}

std::optional<LibrarySelection> selection_from_json(std::string_view text) {
  try {
    json j = json::parse(text);
    LibrarySelection s;
    s.op = j.at("op").get<std::string>();
    s.library = j.at("library").get<std::string>();
    s.best = j.at("best").get<int>();
    s.measured_at = j.value("measured_at", "");
    for (const auto& t : j.at("trials")) {
      LibraryTrial tr;
      tr.setting = t.at("setting").get<std::string>();
      tr.config = config_from_json(t.at("config"));
      tr.correct = t.at("correct").get<bool>();
      tr.problem = t.value("problem", "");
      tr.median_us = t.at("median_us").get<std::vector<double>>();
      tr.ci95_us = t.at("ci95_us").get<std::vector<double>>();
      tr.gflops = t.value("gflops", std::vector<double>{});
      tr.geomean_us = t.at("geomean_us").get<double>();
      s.trials.push_back(std::move(tr));
    }
    if (s.best >= static_cast<int>(s.trials.size())) return std::nullopt;
    s.cached = true;
    return s;
  } catch (const json::exception&) {
    return std::nullopt;  // a damaged entry is measured again
  }
}

uint64_t random_seed() {
  static thread_local std::mt19937_64 rng(std::random_device{}());
  return rng();
}

}  // namespace

Result<std::optional<LibrarySelection>> select_library_config(const HardwareProfile& hw, const spec::OpSpec& op,
                                                              const EvaluatorOptions& options, const EvalOptions& timing,
                                                              const std::function<void(std::string_view)>& progress) {
  if (!op.library_path) return std::optional<LibrarySelection>();
  KOPE_ASSIGN(auto backend, make_cpu_backend(hw, options));
  fs::path path = selection_path(*backend, op);
  if (!options.refresh_baselines) {
    if (auto text = util::read_file(path)) {
      if (auto s = selection_from_json(*text)) return std::optional<LibrarySelection>(std::move(*s));
    }
  }
  LibrarySelection sel;
  sel.op = op.name;
  sel.library = op.library_name;
  auto say = [&](const std::string& what) {
    if (progress) progress(what);
  };

  // Expected outputs of every case, from the reference. Like every compile and verification,
  // this work holds the machine lock shared: it waits while any kope times, and no timing
  // starts while it runs (the selection runs inside an evaluation, beside other ops' timings).
  KOPE_ASSIGN(util::SharedLock preparing, util::lock_for_work());
  KOPE_ASSIGN(fs::path ref_so, backend->build_trusted(op, op.reference_path, false));
  uint64_t in = 0, out = 0;
  auto page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  for (const auto& c : op.cases) {
    CaseLayout l = layout_case(op, c, k_rotating_sets, k_rotating_sets, page);
    in = std::max(in, l.in_bytes);
    out = std::max(out, l.out_bytes);
  }
  KOPE_ASSIGN(auto ref, Session::start(ref_so, backend->runner_options(proto::Mode::trusted, in + out), in, out));
  if (ref->failure()) return fail(ErrorKind::config, "the reference of {} cannot be started: {}", op.name, ref->failure()->message);
  uint64_t seed = timing.seed.value_or(random_seed());
  std::vector<CaseData> data;
  say(fmt::format("{}: computing reference outputs for {} cases", op.name, op.cases.size()));
  for (const auto& c : op.cases) {
    data.push_back(generate_case_data(op, c, seed ^ (0x9e3779b97f4a7c15ULL * (static_cast<uint64_t>(c.index) + 1)), k_rotating_sets));
    KOPE_TRY(compute_expected(*ref, op, c, data.back(), std::max(std::chrono::milliseconds(600'000), options.min_call_timeout)));
  }
  ref->close();

  auto lib_so = backend->build_trusted(op, *op.library_path, true);
  preparing.release();
  if (!lib_so) return fail(ErrorKind::config, "the library baseline of {} does not build: {}", op.name, lib_so.error().message);
  TimingPlan plan;
  plan.target_ci = timing.target_ci;
  plan.max_seconds = timing.max_seconds_per_case;
  plan.min_batch_seconds = options.min_batch_seconds;
  plan.target_batch_seconds = std::max(options.target_batch_seconds, options.min_batch_seconds);
  plan.min_samples = options.min_samples;
  plan.min_call_timeout = options.min_call_timeout;
  plan.fresh_check = false;
  auto timed = op.timed_cases();
  std::map<std::string, std::string> measured;  // effective configuration -> the setting measured with it
  for (const LibrarySetting& s : library_settings_to_try(op.library_name)) {
    LibraryTrial t;
    t.setting = s.name;
    RunnerOptions ro = backend->runner_options(proto::Mode::trusted, in + out);
    ro.library_env = s.env;
    auto session = Session::start(*lib_so, ro, in, out);
    if (!session) return std::unexpected(session.error());
    if ((*session)->failure()) {
      t.problem = "cannot be loaded: " + (*session)->failure()->message;
      sel.trials.push_back(std::move(t));
      continue;
    }
    t.config = parse_library_report((*session)->library_report(), op.library_name, s.name, s.env, backend->threads());
    if (!s.expect_core.empty() && !iequals(t.config.core, s.expect_core)) {
      t.problem = fmt::format("this build has no core type {} (it ran {})", s.expect_core, t.config.core.empty() ? "?" : t.config.core);
      sel.trials.push_back(std::move(t));
      continue;
    }
    std::string effective = fmt::format("{} {}", t.config.core, t.config.threads);
    if (auto it = measured.find(effective); it != measured.end()) {
      t.problem = fmt::format("the same configuration as {} ({})", it->second, t.config.core);
      sel.trials.push_back(std::move(t));
      continue;
    }
    measured[effective] = s.name;
    say(fmt::format("{}: verifying and timing the library with {} ({})", op.name, s.name, t.config.describe()));
    bool ok = true;
    KOPE_ASSIGN(util::SharedLock verifying, util::lock_for_work());
    for (size_t i = 0; i < op.cases.size() && ok; ++i) {
      KOPE_ASSIGN(VerifyOutcome v, verify_case(**session, op, op.cases[i], data[i], std::chrono::milliseconds(600'000), random_seed()));
      if (v.violation) {
        t.problem = fmt::format("case {}: {}", op.case_label(op.cases[i]), v.violation->message);
        ok = false;
      } else if (!v.check.ok) {
        t.problem = fmt::format("wrong result on case {}: {}", op.case_label(op.cases[i]), v.check.first_mismatch);
        ok = false;
      }
    }
    verifying.release();
    if (ok) {
      KOPE_ASSIGN(util::FileLock lock, util::FileLock::acquire(util::timing_lock_path()));
      std::vector<double> medians;
      for (const spec::Case* c : timed) {
        KOPE_ASSIGN(TimingOutcome o, time_case(**session, op, *c, data[static_cast<size_t>(c->index)], plan, random_seed()));
        if (o.violation) {
          t.problem = fmt::format("failed while timed on {}: {}", op.case_label(*c), o.violation->message);
          ok = false;
          break;
        }
        t.median_us.push_back(o.median_s * 1e6);
        t.ci95_us.push_back(o.ci95_s * 1e6);
        t.gflops.push_back(o.median_s > 0 ? op.flops_for(*c) / o.median_s / 1e9 : 0);
        medians.push_back(o.median_s * 1e6);
      }
      if (ok && !medians.empty()) t.geomean_us = geomean(medians);
    }
    t.correct = ok;
    (*session)->close();
    sel.trials.push_back(std::move(t));
  }
  for (size_t i = 0; i < sel.trials.size(); ++i) {
    const auto& t = sel.trials[i];
    if (!t.correct || (!timed.empty() && !(t.geomean_us > 0))) continue;
    if (sel.best < 0 || t.geomean_us < sel.trials[static_cast<size_t>(sel.best)].geomean_us) sel.best = static_cast<int>(i);
  }
  sel.measured_at = util::now_iso8601(util::TimePrecision::seconds);
  if (util::make_dirs(path.parent_path())) (void)util::write_file_atomic(path, selection_to_json(sel).dump(2));
  return std::optional<LibrarySelection>(std::move(sel));
}

}  // namespace kope::eval
