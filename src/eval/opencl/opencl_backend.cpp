// The OpenCL backend: OpenCL C candidates built by PoCL (CPU device) inside the compile sandbox
// and run through the trusted host shim in kope-runner. The ABI is in eval/opencl/ABI.md.
#include "eval/opencl/opencl.h"

#include <sys/stat.h>
#include <unistd.h>

#include <mutex>
#include <regex>

#include <nlohmann/json.hpp>

#include "eval/backend.h"
#include "eval/build_recipe.h"
#include "eval/elf.h"
#include "eval/inspect.h"
#include "eval/native.h"
#include "eval/sandbox.h"
#include "util/fs.h"
#include "util/hash.h"
#include "util/strings.h"
#include "util/subprocess.h"

#ifndef KOPE_OCLC_PATH
#define KOPE_OCLC_PATH ""
#endif
#ifndef KOPE_OPENCL_HOST_PATH
#define KOPE_OPENCL_HOST_PATH ""
#endif

namespace kope::eval::opencl {

namespace {

using json = nlohmann::json;

// Bumped whenever the build recipe changes, so old cache entries are not reused.
constexpr const char* k_recipe = "kope-opencl-build-3";
// Build options every candidate gets: argument info for the ABI check.
constexpr const char* k_base_options = "-cl-kernel-arg-info";
constexpr int64_t k_max_global = (int64_t{1} << 31) - 1;

// A helper executable: $ENV, else beside this executable, else where it was built.
Result<fs::path> find_helper(const char* env, const char* name, const char* built) {
  if (auto p = util::get_env(env)) {
    if (fs::exists(*p)) return fs::path(*p);
    return fail(ErrorKind::unavailable, "${} names {}, which does not exist", env, *p);
  }
  std::error_code ec;
  fs::path self = fs::read_symlink("/proc/self/exe", ec);
  if (!ec && fs::exists(self.parent_path() / name, ec)) return self.parent_path() / name;
  fs::path b = built;
  if (!b.empty() && fs::exists(b, ec)) return b;
  return fail(ErrorKind::unavailable, "cannot find {} (looked beside {} and at '{}'; set ${})", name, self.string(), b.string(), env);
}

// The ICD loader reads /etc/OpenCL/vendors, which the sandboxes do not show; the vendor library
// is named to it directly instead ($OCL_ICD_VENDORS holding a library path for ocl-icd 2.3,
// $OCL_ICD_FILENAMES for newer loaders).
Result<fs::path> find_vendor_library() {
  if (auto p = util::get_env("KOPE_OPENCL_VENDOR")) return fs::path(*p);
  std::error_code ec;
  std::vector<std::string> seen;
  for (const auto& e : fs::directory_iterator("/etc/OpenCL/vendors", ec)) {
    if (e.path().extension() != ".icd") continue;
    auto text = util::read_file(e.path());
    if (!text) continue;
    std::string lib(util::trim(*text));
    seen.push_back(lib);
    if (lib.find("pocl") == std::string::npos) continue;  // the CPU device kope supports
    if (lib.starts_with("/")) {
      if (fs::exists(lib, ec)) return fs::path(lib);
      continue;
    }
    for (const char* dir : {"/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib64", "/usr/lib", "/usr/local/lib"}) {
      fs::path p = fs::path(dir) / lib;
      if (fs::exists(p, ec)) return fs::canonical(p, ec);
    }
  }
  if (seen.empty()) return fail(ErrorKind::unavailable, "no OpenCL platform is registered in /etc/OpenCL/vendors (install pocl-opencl-icd)");
  return fail(ErrorKind::unavailable, "no PoCL platform among the registered OpenCL platforms ({}); install pocl-opencl-icd",
              util::join(seen, ", "));
}

const std::vector<std::string>& allowed_option_prefixes() {
  static const std::vector<std::string> k = {"-D", "-cl-mad-enable", "-cl-no-signed-zeros", "-cl-unsafe-math-optimizations",
                                             "-cl-finite-math-only", "-cl-fast-relaxed-math", "-cl-denorms-are-zero",
                                             "-cl-single-precision-constant", "-cl-std=CL1.2", "-cl-std=CL2.0", "-cl-std=CL3.0"};
  return k;
}

std::string_view cl_type(spec::DType t) {
  switch (t) {
    case spec::DType::f32: return "float";
    case spec::DType::f64: return "double";
    case spec::DType::i32: return "int";
    case spec::DType::i64: return "long";
    case spec::DType::boolean:
    case spec::DType::u8: return "uchar";
    case spec::DType::i8: return "char";
    case spec::DType::i16: return "short";
    case spec::DType::f16:
    case spec::DType::bf16: return "ushort";  // storage bits, as in the C ABI
  }
  return "?";
}

struct KernelArg {
  std::string space, qualifier, type, name;
};

std::vector<KernelArg> parse_args(std::string_view text) {
  std::vector<KernelArg> out;
  for (auto& line : util::split(text, '\n')) {
    auto parts = util::split(util::trim(line), ' ');
    if (parts.size() != 6 || parts[0] != "arg") continue;
    out.push_back({parts[2], parts[3], util::replace_all(parts[4], "_", " "), parts[5]});
  }
  return out;
}

std::string describe_arg(const KernelArg& a) {
  std::string s = a.space == "private" ? "" : "__" + a.space + " ";
  if (a.qualifier == "const" && a.type.ends_with("*")) s += "const ";
  return s + a.type + " " + a.name;
}

// The ABI check: "" when kope_kernel's arguments are the op's, else what differs.
std::string argument_problem(const spec::OpSpec& op, const std::vector<KernelArg>& args) {
  struct Want {
    std::string type;
    bool buffer;
    bool input;
    std::string name;
  };
  std::vector<Want> want;
  for (const auto& t : op.inputs) want.push_back({std::string(cl_type(t.dtype)) + "*", true, true, t.name});
  for (const auto& t : op.outputs) want.push_back({std::string(cl_type(t.dtype)) + "*", true, false, t.name});
  for (const auto& d : op.dims) want.push_back({"long", false, false, d});
  for (const auto& a : op.attrs) want.push_back({std::string(cl_type(a.dtype)), false, false, a.name});
  if (args.size() != want.size()) {
    return fmt::format("kope_kernel takes {} arguments; op {} needs {}", args.size(), op.name, want.size());
  }
  for (size_t i = 0; i < want.size(); ++i) {
    const Want& w = want[i];
    const KernelArg& a = args[i];
    if (a.type != w.type) {
      return fmt::format("argument {} (`{}`) should have type {} (for {} {})", i, describe_arg(a), w.type,
                         w.buffer ? (w.input ? "input" : "output") : "dim or attr", w.name);
    }
    if (w.buffer && a.space != "global" && !(w.input && a.space == "constant")) {
      return fmt::format("argument {} (`{}`) must be a __global pointer", i, describe_arg(a));
    }
    if (w.buffer && !w.input && a.qualifier == "const") {
      return fmt::format("argument {} (`{}`) is the output {} and cannot be const", i, describe_arg(a), w.name);
    }
    if (!w.buffer && a.space != "private") return fmt::format("argument {} (`{}`) must be passed by value", i, describe_arg(a));
  }
  return "";
}

// Splits "a, cdiv(b, c), d" at top-level commas.
std::vector<std::string> split_top_level(std::string_view s) {
  std::vector<std::string> out;
  int depth = 0;
  std::string cur;
  for (char c : s) {
    if (c == '(') ++depth;
    if (c == ')') --depth;
    if (c == ',' && depth == 0) {
      out.emplace_back(util::trim(cur));
      cur.clear();
    } else {
      cur += c;
    }
  }
  out.emplace_back(util::trim(cur));
  return out;
}

}  // namespace

std::string render_signature(const spec::OpSpec& op) {
  std::vector<std::string> args;
  for (const auto& t : op.inputs) args.push_back(fmt::format("__global const {}* {}", cl_type(t.dtype), t.name));
  for (const auto& t : op.outputs) args.push_back(fmt::format("__global {}* {}", cl_type(t.dtype), t.name));
  for (const auto& d : op.dims) args.push_back(fmt::format("long {}", d));
  for (const auto& a : op.attrs) args.push_back(fmt::format("{} {}", cl_type(a.dtype), a.name));
  return fmt::format("__kernel void kope_kernel({})", util::join(args, ", "));
}

Result<Launch> parse_launch(std::string_view source) {
  Launch l;
  bool have_global = false, have_local = false;
  int line_no = 0;
  static const std::regex k_line(R"(^\s*//\s*kope:\s*(global|local)\s*=\s*\((.*)\)\s*$)");
  static const std::regex k_any(R"(^\s*//\s*kope:)");
  for (auto& line : util::split(source, '\n')) {
    ++line_no;
    std::smatch m;
    if (!std::regex_search(line, k_any)) continue;
    if (!std::regex_match(line, m, k_line)) {
      return fail(ErrorKind::usage, "line {}: a `// kope:` line must read `// kope: global=(EXPR[, EXPR[, EXPR]])` or `// kope: local=(N[, N[, N]])`",
                  line_no);
    }
    bool global = m[1] == "global";
    if ((global && have_global) || (!global && have_local)) return fail(ErrorKind::usage, "line {}: `{}` is given twice", line_no, m[1].str());
    auto parts = split_top_level(m[2].str());
    if (parts.empty() || parts.size() > 3) return fail(ErrorKind::usage, "line {}: {} needs 1 to 3 sizes", line_no, m[1].str());
    if (global) {
      for (const auto& p : parts) {
        size_t off = 0;
        auto e = spec::Expr::parse(p, &off);
        if (!e) return fail(ErrorKind::usage, "line {}: global size `{}`: {}", line_no, p, e.error().message);
        l.global.push_back(std::move(*e));
      }
      have_global = true;
    } else {
      for (const auto& p : parts) {
        char* end = nullptr;
        long long v = std::strtoll(p.c_str(), &end, 10);
        if (p.empty() || end == nullptr || *end != '\0' || v < 1 || v > 4096) {
          return fail(ErrorKind::usage, "line {}: local size `{}` must be an integer from 1 to 4096", line_no, p);
        }
        l.local.push_back(v);
      }
      have_local = true;
    }
  }
  if (!have_global) {
    return fail(ErrorKind::usage, "no launch geometry: add a line `// kope: global=(N)` (one expression over the op's dims per "
                                  "NDRange dimension) and optionally `// kope: local=(64)`");
  }
  l.work_dim = static_cast<int>(l.global.size());
  if (!have_local) {
    static const int64_t k_default[3][3] = {{64, 1, 1}, {16, 16, 1}, {8, 8, 4}};
    for (int k = 0; k < l.work_dim; ++k) l.local.push_back(k_default[l.work_dim - 1][k]);
  }
  if (static_cast<int>(l.local.size()) != l.work_dim) {
    return fail(ErrorKind::usage, "global has {} dimensions but local has {}", l.work_dim, l.local.size());
  }
  int64_t product = 1;
  for (int64_t v : l.local) product *= v;
  if (product > 4096) return fail(ErrorKind::usage, "the work-group has {} work-items; the device allows at most 4096", product);
  while (l.local.size() < 3) l.local.push_back(1);
  return l;
}

Result<std::string> render_launch_table(const spec::OpSpec& op, const Launch& launch) {
  std::string out = "kope-opencl-launch 1\n";
  out += fmt::format("tensors {} {}\n", op.inputs.size(), op.outputs.size());
  out += fmt::format("dims {}\n", op.dims.size());
  out += fmt::format("local {} {} {} {}\n", launch.work_dim, launch.local[0], launch.local[1], launch.local[2]);
  for (const auto& a : op.attrs) out += fmt::format("attr {} {:a} {}\n", spec::dtype_name(a.dtype), a.value, a.ivalue);
  for (const auto& c : op.cases) {
    auto dims = op.dim_values(c);
    std::vector<std::string> parts;
    for (int64_t d : c.dims) parts.push_back(std::to_string(d));
    for (int k = 0; k < 3; ++k) {
      int64_t g = 1;
      if (k < launch.work_dim) {
        double v = launch.global[static_cast<size_t>(k)].eval(dims);
        if (!(v >= 0) || v != static_cast<double>(static_cast<int64_t>(v)) || v > static_cast<double>(k_max_global)) {
          return fail(ErrorKind::usage, "global size `{}` is {} for case {} ({}); it must be a whole number from 0 to {}",
                      launch.global[static_cast<size_t>(k)].text(), v, c.index, op.case_label(c), k_max_global);
        }
        g = static_cast<int64_t>(v);
      }
      parts.push_back(std::to_string(g));
    }
    out += "case " + util::join(parts, " ") + "\n";
  }
  return out;
}

std::string option_problem(std::string_view f) {
  for (const auto& ok : allowed_option_prefixes()) {
    if (f == ok || (ok == "-D" && f.starts_with("-D") && f.size() > 2 && f.find_first_of(" \t\n'\"\\") == std::string_view::npos)) return "";
  }
  return fmt::format("'{}' is not an allowed OpenCL build option (allowed: {})", f, util::join(allowed_option_prefixes(), ", "));
}

const Platform& platform() {
  static std::once_flag once;
  static Platform p;
  std::call_once(once, [] {
#if !KOPE_HAVE_OPENCL
    p.problem = "kope was built without the OpenCL backend (KOPE_OPENCL=OFF, or no OpenCL headers/ICD loader at configure time)";
    return;
#endif
    auto oclc = find_helper("KOPE_OCLC", "kope-oclc", KOPE_OCLC_PATH);
    if (!oclc) {
      p.problem = oclc.error().message;
      return;
    }
    p.oclc = *oclc;
    auto host = find_helper("KOPE_OPENCL_HOST", "kope-opencl-host.so", KOPE_OPENCL_HOST_PATH);
    if (!host) {
      p.problem = host.error().message;
      return;
    }
    p.host_shim = *host;
    auto vendor = find_vendor_library();
    if (!vendor) {
      p.problem = vendor.error().message;
      return;
    }
    p.vendor_library = *vendor;
    auto tmp = util::TempDir::create("kope-oclprobe-", fs::temp_directory_path());
    if (!tmp) {
      p.problem = tmp.error().message;
      return;
    }
    util::RunOptions ro;
    ro.spawn.argv = {p.oclc.string(), "probe"};
    ro.spawn.env = std::vector<std::string>{"PATH=/usr/bin:/bin", "LANG=C", "OCL_ICD_VENDORS=" + p.vendor_library.string(),
                                            "OCL_ICD_FILENAMES=" + p.vendor_library.string(),
                                            "POCL_CACHE_DIR=" + tmp->path().string(), "HOME=" + tmp->path().string()};
    ro.timeout = std::chrono::seconds(60);
    auto r = util::run(ro);
    if (!r || !r->status.success()) {
      p.problem = fmt::format("the OpenCL platform does not answer: {}",
                              r ? std::string(util::trim(util::truncate_text(r->err + r->out, 400, 4))) : r.error().message);
      return;
    }
    for (auto& line : util::split(r->out, '\n')) {
      auto sp = line.find(' ');
      if (sp == std::string::npos) continue;
      std::string key = line.substr(0, sp), value = line.substr(sp + 1);
      if (key == "platform") p.platform_name = value;
      if (key == "platform_version") p.platform_version = value;
      if (key == "device") p.device_name = value;
      if (key == "device_version") p.device_version = value;
      if (key == "max_work_group_size") p.max_work_group_size = std::atoll(value.c_str());
      if (key == "compute_units") p.compute_units = std::atoi(value.c_str());
      if (key == "local_mem_size") p.local_mem_bytes = std::atoll(value.c_str());
      if (key == "max_work_item_sizes") {
        p.max_work_item_sizes.clear();
        for (auto& v : util::split(value, ' ')) {
          if (!v.empty()) p.max_work_item_sizes.push_back(std::atoll(v.c_str()));
        }
      }
      if (key == "extensions") p.fp64 = value.find("cl_khr_fp64") != std::string::npos;
    }
    if (p.platform_name.find("Portable Computing Language") == std::string::npos && p.platform_name.find("pocl") == std::string::npos) {
      p.problem = fmt::format("the OpenCL platform is {}, not PoCL", p.platform_name);
      return;
    }
    p.usable = true;
  });
  return p;
}

Target target() { return *Target::parse("opencl-pocl-cpu"); }

std::string Platform::toolchain_id() const {
  return fmt::format("{} | {} | {}", platform_version, device_name, k_base_options);
}

namespace {

// PoCL's build: LLVM maps a lot and runs worker threads.
CompileLimits pocl_limits(const OpenClBackendOptions& o) {
  CompileLimits l = compile_limits(o.compile_timeout, o.compile_memory_bytes);
  l.processes = 64;
  return l;
}

class OpenClBackend final : public Backend {
 public:
  OpenClBackend(const EvaluatorOptions& o, std::unique_ptr<Backend> cpu, Toolchain cpu_tc)
      : m_inspect(o.inspect), m_limits(pocl_limits(o.opencl)), m_cpu(std::move(cpu)), m_cpu_tc(std::move(cpu_tc)),
        m_platform(platform()) {}

  std::string name() const override { return "opencl"; }
  Target target() const override { return opencl::target(); }
  std::string toolchain_id() const override { return m_platform.toolchain_id(); }
  int threads() const override { return m_cpu->threads(); }

  Result<BuildOutcome> build_candidate(const spec::OpSpec& op, std::string_view source,
                                       const std::vector<std::string>& extra_flags) const override;

  Result<fs::path> build_trusted(const spec::OpSpec& op, const fs::path& source, bool library) const override {
    return m_cpu->build_trusted(op, source, library);
  }

  RunnerOptions runner_options(proto::Mode mode, uint64_t buffer_bytes) const override {
    if (mode == proto::Mode::trusted) return m_cpu->runner_options(mode, buffer_bytes);
    RunnerOptions r = m_cpu->runner_options(mode, buffer_bytes);
    r.threads = 1;  // the runner's OpenMP pool is unused; PoCL brings its own workers
    r.host_shim = true;
    r.companions = {"program_small.bin", "program_large.bin", "launch.txt"};
    r.proc_and_sys = true;  // PoCL reads the CPU topology (hwloc) to pick the device
    r.env = {{"OCL_ICD_VENDORS", m_platform.vendor_library.string()},
             {"OCL_ICD_FILENAMES", m_platform.vendor_library.string()},
             {"POCL_CACHE_DIR", "/tmp/pocl"},
             {"HOME", "/tmp"}};
    // PoCL, LLVM and their worker stacks are address space too.
    r.memory_bytes += 2ull << 30;
    r.processes = static_cast<uint64_t>(std::max(1, m_platform.compute_units)) + 48;
    return r;
  }

 private:
  Result<FreshBuild> build_fresh(const fs::path& scratch, std::string_view source, const std::string& options,
                                 const std::string& specialise) const;
  Result<BuildOutcome> conclude(const spec::OpSpec& op, const fs::path& dir, const json& j) const;
  Result<std::vector<std::string>> inspect_work_groups(const fs::path& dir) const;
  Status keep(const fs::path& scratch, const fs::path& staged, const json& j, const std::string& table) const;

  bool m_inspect;
  CompileLimits m_limits;
  std::unique_ptr<Backend> m_cpu;
  Toolchain m_cpu_tc;
  const Platform& m_platform;
};

Result<BuildOutcome> OpenClBackend::conclude(const spec::OpSpec& op, const fs::path& dir, const json& j) const {
  if (j.value("status", "") != "built") return stored_compile_error(j);
  // The ABI: kope_kernel's arguments are the op's.
  KOPE_ASSIGN(std::string args_text, util::read_file(dir / "args.txt"));
  std::string problem = argument_problem(op, parse_args(args_text));
  if (!problem.empty()) return compile_error(problem, "expected: " + opencl::render_signature(op));
  if (m_inspect) {
    KOPE_ASSIGN(std::vector<std::string> findings, inspect_work_groups(dir));
    if (!findings.empty()) {
      BuildOutcome o;
      o.status = BuildOutcome::Status::rejected;
      o.message = "the compiled kernel breaks a rule: " + findings.front();
      o.diagnostics = util::join(findings, "\n");
      return o;
    }
  }
  return built(dir / "kernel.so", j.value("diagnostics", ""));
}

// The inspection, again on every use: the compiled work-group functions may import only what a
// CPU kernel may, run nothing at load time, and contain no raw system calls or clock reads.
// Returns the rules broken, sorted, each once.
Result<std::vector<std::string>> OpenClBackend::inspect_work_groups(const fs::path& dir) const {
  KOPE_ASSIGN(auto policy, SymbolPolicy::for_compiler(m_cpu_tc.compiler));
  std::vector<std::string> findings;
  std::error_code ec;
  int objects = 0;
  for (const auto& e : fs::recursive_directory_iterator(dir / "wg", ec)) {
    if (e.path().extension() != ".so") continue;
    ++objects;
    KOPE_ASSIGN(elf::File f, elf::read(e.path()));
    for (const auto& s : f.sections) {
      for (const char* bad : {".init_array", ".preinit_array", ".ctors", ".fini_array", ".dtors"}) {
        if (s.name == bad && s.size > 0) findings.push_back(fmt::format("code that runs at load or unload time ({} section)", s.name));
      }
    }
    for (const auto& s : f.symbols) {
      if (s.defined || s.name.empty()) continue;
      std::string why = policy->import_problem(s.name);
      if (!why.empty()) findings.push_back(fmt::format("calls {}: {}", display_symbol(s.name), why));
    }
  }
  if (objects == 0) return fail(ErrorKind::internal, "PoCL produced no work-group function for the candidate (in {})", (dir / "wg").string());
  std::string flagged;
  if (auto t = util::read_file(dir / "flagged.txt")) flagged = *t;
  for (auto& f : forbidden_instructions(flagged)) findings.push_back(std::move(f));
  std::sort(findings.begin(), findings.end());
  findings.erase(std::unique(findings.begin(), findings.end()), findings.end());
  return findings;
}

Result<BuildOutcome> OpenClBackend::build_candidate(const spec::OpSpec& op, std::string_view source,
                                                    const std::vector<std::string>& extra_flags) const {
  for (const auto& f : extra_flags) {
    std::string why = option_problem(f);
    if (!why.empty()) return fail(ErrorKind::usage, "extra build option {}", why);
  }
  if (source.size() > m_limits.source_bytes) return compile_error("the source is larger than 1 MiB");
  auto launch = parse_launch(source);
  if (!launch) return compile_error("launch geometry: " + launch.error().message, "see the OpenCL ABI: " + opencl::render_signature(op));
  auto table = render_launch_table(op, *launch);
  if (!table) return compile_error("launch geometry: " + table.error().message);
  std::string options = k_base_options;
  for (const auto& f : extra_flags) options += " " + f;
  std::string specialise = fmt::format("{}-{}-{}-goffs0", launch->local[0], launch->local[1], launch->local[2]);

  KOPE_ASSIGN(std::string host_bytes, util::read_file(m_platform.host_shim));
  std::string key = util::sha256_hex(fmt::format("{}\n{}\n{}\n{}\n{}\n{}\n{}", k_recipe, m_platform.toolchain_id(), options, specialise,
                                                 util::sha256_hex(*table), util::sha256_hex(source), util::sha256_hex(host_bytes)));
  CandidateBuild b;
  b.entry = util::cache_dir() / "eval" / "opencl" / key.substr(0, 2) / key.substr(0, 40);
  b.build = [&](const fs::path& scratch) { return build_fresh(scratch, source, options, specialise); };
  b.keep = [&](const fs::path& scratch, const fs::path& staged, const json& j) { return keep(scratch, staged, j, *table); };
  b.conclude = [&](const fs::path& dir, const json& j) { return conclude(op, dir, j); };
  return run_candidate_build(b);
}

// The most specific line of a failed build: a located error, a missing symbol, then anything
// naming an error.
std::string first_build_error(std::string_view diag) {
  for (std::string_view pattern : {": error: ", "Cannot find symbol", "kope_kernel", "error"}) {
    std::string first = first_line_where(diag, [&](std::string_view line) {
      return line.find(pattern) != std::string_view::npos && line.find("clBuildProgram: error") == std::string_view::npos;
    });
    if (!first.empty()) return first;
  }
  return "";
}

Result<FreshBuild> OpenClBackend::build_fresh(const fs::path& scratch, std::string_view source, const std::string& options,
                                              const std::string& specialise) const {
  KOPE_TRY(util::write_file_atomic(scratch / fmt::format("kernel{}", k_file_extension), source));
  KOPE_ASSIGN(fs::path objdump, objdump_path());
  std::string script = "set -u\n";
  // Two builds: PoCL specialises the work-group function for "small" grids (every dimension
  // narrower than 65535 work-items) and for larger ones; the host shim picks per launch, so the
  // runner never compiles. The -D flags keep the two programs apart in PoCL's cache.
  script += fmt::format("POCL_BINARY_SPECIALIZE_WG={}-smallgrid /kope/oclc build kernel.cl {} program_small.bin args.txt\nrc=$?\n",
                        specialise, util::shell_quote(options + " -DKOPE_SMALL_GRID=1"));
  script += "[ $rc -ne 0 ] && exit $rc\n";
  script += fmt::format("POCL_BINARY_SPECIALIZE_WG={}-largegrid /kope/oclc build kernel.cl {} program_large.bin args_large.txt\nrc=$?\n",
                        specialise, util::shell_quote(options + " -DKOPE_SMALL_GRID=0"));
  script += "[ $rc -ne 0 ] && exit $rc\n";
  script += fmt::format("find pocl -name '*.so' | sort | while read -r f; do {} -d --no-show-raw-insn -w \"$f\"; done | grep -E {} | head -c 1000000 > flagged.txt\n",
                        util::shell_quote(objdump.string()), util::shell_quote(k_disassembly_filter));
  script += "exit 0\n";
  SandboxSpec spec = build_sandbox(scratch, m_limits, std::move(script));
  spec.ro_binds.emplace_back(m_platform.oclc, "/kope/oclc");
  spec.proc = true;
  spec.sys = true;
  spec.env.emplace_back("OCL_ICD_VENDORS", m_platform.vendor_library.string());
  spec.env.emplace_back("OCL_ICD_FILENAMES", m_platform.vendor_library.string());
  spec.env.emplace_back("POCL_CACHE_DIR", "/build/pocl");
  KOPE_ASSIGN(util::RunResult r, run_build_sandbox(spec, m_limits));
  std::vector<std::string> scrub = {"/build", scratch.string()};
  // PoCL compiles a temporary copy of the source: name it as the model wrote it.
  static const std::regex k_temp(R"(pocl/tempfile_[A-Za-z0-9]+\.cl)");
  std::string diag = scrub_diagnostics(std::regex_replace(r.err, k_temp, "kernel.cl"), scrub);
  if (r.err.find("bwrap:") != std::string::npos && !r.status.success()) {
    return fail(ErrorKind::unavailable, "the compile sandbox could not start: {}", util::trim(r.err));
  }
  auto uncached = [&](std::string message) { return FreshBuild{std::nullopt, compile_error(std::move(message), diag)}; };
  if (r.timed_out) return uncached(fmt::format("the OpenCL compiler ran past its time limit ({} s) and was stopped", m_limits.wall.count()));
  if (r.output_capped) return uncached("the OpenCL compiler's output passed its limit and it was stopped");
  int code = r.status.exited ? r.status.code : 128 + r.status.signal;
  if (code == 10) return FreshBuild{compile_error_record(first_build_error(diag), diag), {}};
  if (code == 11) {
    json j = compile_error_record("", diag);
    j["message"] = first_build_error(diag);
    return FreshBuild{std::move(j), {}};
  }
  if (code == 3) return fail(ErrorKind::unavailable, "the OpenCL platform is not usable inside the compile sandbox: {}", util::trim(r.err));
  if (code > 128) return uncached(fmt::format("the OpenCL compiler was killed by {}", util::signal_name(code - 128)));
  if (code != 0) return fail(ErrorKind::internal, "the OpenCL build sandbox {}: {}", r.status.describe(), util::truncate_text(r.err, 2000, 20));
  json j;
  j["status"] = "built";
  j["diagnostics"] = diag.find("warning") != std::string::npos ? diag : std::string();
  return FreshBuild{std::move(j), {}};
}

// What a built entry keeps: both programs, the kernel's arguments, the flagged instructions, the
// compiled work-group functions (for the inspection), the host shim and the launch table.
Status OpenClBackend::keep(const fs::path& scratch, const fs::path& staged, const json& j, const std::string& table) const {
  if (j.value("status", "") != "built") return {};
  std::error_code ec;
  for (const char* f : {"program_small.bin", "program_large.bin", "args.txt", "flagged.txt"}) {
    fs::copy_file(scratch / f, staged / f, fs::copy_options::overwrite_existing, ec);
    if (ec) return fail(ErrorKind::io, "cannot store {} in the compile cache: {}", f, ec.message());
  }
  int n = 0;
  for (const auto& e : fs::recursive_directory_iterator(scratch / "pocl", ec)) {
    if (e.path().extension() != ".so") continue;
    KOPE_TRY(util::make_dirs(staged / "wg"));
    fs::copy_file(e.path(), staged / "wg" / fmt::format("{}-{}", n++, e.path().filename().string()), fs::copy_options::overwrite_existing, ec);
  }
  fs::copy_file(m_platform.host_shim, staged / "kernel.so", fs::copy_options::overwrite_existing, ec);
  if (ec) return fail(ErrorKind::io, "cannot copy the OpenCL host shim: {}", ec.message());
  return util::write_file_atomic(staged / "launch.txt", table);
}

}  // namespace

}  // namespace kope::eval::opencl

namespace kope::eval {

Result<std::unique_ptr<Backend>> make_opencl_backend(const HardwareProfile& hw, const EvaluatorOptions& options) {
  const auto& p = opencl::platform();
  if (!p.usable) return fail(ErrorKind::unavailable, "the OpenCL backend is unusable here: {}", p.problem);
  KOPE_ASSIGN(auto cpu, make_cpu_backend(hw, options));
  KOPE_ASSIGN(Toolchain tc, cpu_toolchain());
  return std::unique_ptr<Backend>(new opencl::OpenClBackend(options, std::move(cpu), std::move(tc)));
}

Result<std::unique_ptr<Evaluator>> make_opencl_evaluator(const HardwareProfile& hw, const EvaluatorOptions& options) {
  KOPE_ASSIGN(auto backend, make_opencl_backend(hw, options));
  return make_sandboxed_evaluator(std::move(backend), hw, options);
}

BackendInfo opencl_backend_info() {
  BackendInfo b;
  b.built = KOPE_HAVE_OPENCL != 0;
  const auto& p = opencl::platform();
  std::string why;
  bool sandbox = sandbox_available(&why);
  b.can_compile = p.usable && sandbox;
  b.usable = b.can_compile && find_runner().has_value();
  if (p.usable) b.toolchain = p.toolchain_id();
  if (!p.usable) {
    b.detail = p.problem;
  } else if (!sandbox) {
    b.detail = "the kernel sandbox is unavailable: " + why;
  } else {
    b.detail = fmt::format("{} on {} ({} compute units{})", p.platform_name, p.device_name, p.compute_units, p.fp64 ? ", fp64" : "");
  }
  return b;
}

}  // namespace kope::eval
