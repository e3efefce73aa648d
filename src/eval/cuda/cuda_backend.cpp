// The CUDA backend: .cu candidates built by nvcc inside the compile sandbox, linked with the
// trusted host shim and run by kope-runner in host-shim mode with the GPU's device nodes bound
// in. The ABI is in eval/cuda/ABI.md.
#include "eval/cuda/cuda.h"
#include "eval/cuda/gpu_probe.h"

#include <elf.h>
#include <sys/stat.h>
#include <unistd.h>

#include <mutex>

#include <nlohmann/json.hpp>

#include "eval/backend.h"
#include "eval/build_recipe.h"
#include "eval/cpu/compile.h"
#include "eval/sandbox.h"
#include "util/fs.h"
#include "util/hash.h"
#include "util/strings.h"
#include "util/subprocess.h"

namespace kope::eval::cuda {

namespace {

using json = nlohmann::json;

constexpr const char* k_recipe = "kope-cuda-build-1";
constexpr const char* k_trusted_recipe = "kope-cuda-trusted-1";
constexpr const char* k_shim =
#include "eval/cuda/host_shim.inc"
    ;
constexpr const char* k_baseline_support =
#include "eval/cuda/baseline_support.inc"
    ;

std::optional<fs::path> find_nvcc() {
  if (auto p = util::get_env("KOPE_NVCC")) return fs::path(*p);
  if (auto p = util::find_executable("nvcc")) return *p;
  std::error_code ec;
  if (fs::exists("/usr/local/cuda/bin/nvcc", ec)) return fs::path("/usr/local/cuda/bin/nvcc");
  std::vector<fs::path> found;
  for (const auto& e : fs::directory_iterator("/usr/local", ec)) {
    if (e.path().filename().string().starts_with("cuda-") && fs::exists(e.path() / "bin" / "nvcc", ec)) found.push_back(e.path() / "bin" / "nvcc");
  }
  std::sort(found.begin(), found.end());
  if (!found.empty()) return found.back();
  return std::nullopt;
}

// Imports a candidate's host object may have beyond the CPU allowlist: nvcc's registration and
// launch plumbing, launching, and read-only queries.
bool cuda_import_allowed(std::string_view name) {
  static const char* const k_exact[] = {"cudaLaunchKernel", "cudaLaunchKernelExC", "cudaLaunchCooperativeKernel", "cudaGetLastError",
                                        "cudaPeekAtLastError", "cudaFuncSetAttribute", "cudaFuncGetAttributes", "cudaFuncSetCacheConfig",
                                        "cudaDeviceGetAttribute", "cudaGetDevice", "cudaGetErrorString", "cudaGetErrorName", "atexit",
                                        "__cxa_atexit", "__cxa_guard_acquire", "__cxa_guard_release", "__cxa_guard_abort",
                                        "_Unwind_Resume", "__gxx_personality_v0"};
  for (const char* e : k_exact) {
    if (name == e) return true;
  }
  return name.starts_with("__cuda") || name.starts_with("cudaOccupancy");
}

std::vector<std::string> nvidia_device_nodes() {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator("/dev", ec)) {
    std::string n = e.path().filename().string();
    if (n.starts_with("nvidia") && !e.is_directory(ec)) out.push_back(e.path().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

std::string_view host_shim_source() { return k_shim; }
std::string_view baseline_support_source() { return k_baseline_support; }

spec::OpSpec with_gpu_baseline(const spec::OpSpec& op) {
  spec::OpSpec out = op;
  out.library_path = op.gpu_library_path;
  out.library_name = op.gpu_library_path ? op.gpu_library_name : std::string();
  return out;
}

std::vector<std::string> baseline_link_flags(const fs::path& cuda_home) {
  fs::path lib = cuda_home / "lib64";
  return {"-L" + lib.string(), "-Xlinker", "-rpath," + lib.string(), "-Xlinker", "--as-needed", "-lcublasLt", "-lcublas", "-lcudnn"};
}

std::string trusted_build_script(const Toolkit& tk, const std::vector<std::string>& flags, std::string_view source_name) {
  std::string nvcc = util::shell_quote(tk.nvcc->string());
  std::string fl;
  for (const auto& f : flags) fl += " " + util::shell_quote(f);
  std::string lf;
  for (const auto& f : baseline_link_flags(tk.cuda_home)) lf += " " + util::shell_quote(f);
  // The three translation units compile side by side (nvcc is slow; machines with a GPU have cores).
  std::string s = "set -eu\n";
  s += fmt::format("{}{} -I. -include kope_signature.h -c {} -o kernel.o &\np1=$!\n", nvcc, fl, util::shell_quote(std::string(source_name)));
  s += fmt::format("{}{} -c kope_host.cu -o kope_host.o &\np2=$!\n", nvcc, fl);
  s += fmt::format("{}{} -Dkope_entry=kope_device_entry -include kope_signature.h -c kope_entry.cu -o kope_entry.o &\np3=$!\n", nvcc, fl);
  s += "wait $p1\nwait $p2\nwait $p3\n";
  s += fmt::format("{} -shared -arch={} -o kernel.so kernel.o kope_host.o kope_entry.o{} -Xlinker -z,now,-z,noexecstack\n", nvcc, tk.arch, lf);
  return s;
}

Result<fs::path> build_trusted_baseline(const spec::OpSpec& op, const fs::path& source) {
  const Toolkit& tk = toolkit();
  if (!tk.problem.empty()) return fail(ErrorKind::unavailable, "the GPU baseline of {} cannot be built: {}", op.name, tk.problem);
  KOPE_ASSIGN(std::string src, util::read_file(source));
  std::string signature = fmt::format("// The kernel ABI of op {} (kope, CUDA: pointers are device pointers).\n#pragma once\n#include "
                                      "<stdint.h>\n{}\n",
                                      op.name, spec::render_signature(op));
  std::string entry = spec::render_entry_shim(op);
  std::vector<std::string> flags = nvcc_flags(tk.arch);
  std::string key = util::sha256_hex(fmt::format("{}\n{}\n{}\n{}\n{}\n{}\n{}\n{}", k_trusted_recipe, tk.toolchain_id(), util::sha256_hex(src),
                                                 util::sha256_hex(signature), util::sha256_hex(entry), util::sha256_hex(k_shim),
                                                 util::sha256_hex(k_baseline_support), util::join(baseline_link_flags(tk.cuda_home), " ")));
  fs::path dir = util::cache_dir() / "eval" / "cuda-trusted" / key.substr(0, 40);
  fs::path so = dir / "kernel.so";
  std::error_code ec;
  if (fs::exists(so, ec)) return so;
  KOPE_TRY(util::make_dirs(dir.parent_path()));
  fs::path scratch = dir.parent_path() / fmt::format(".{}.{}", key.substr(0, 16), ::getpid());
  fs::remove_all(scratch, ec);
  KOPE_TRY(util::make_dirs(scratch));
  std::string name = source.filename().string();
  KOPE_TRY(util::write_file_atomic(scratch / name, src));
  KOPE_TRY(util::write_file_atomic(scratch / "kope_gpu_baseline.h", std::string(k_baseline_support)));
  KOPE_TRY(util::write_file_atomic(scratch / "kope_signature.h", signature));
  KOPE_TRY(util::write_file_atomic(scratch / "kope_entry.cu", entry));
  KOPE_TRY(util::write_file_atomic(scratch / "kope_host.cu", std::string(k_shim)));
  util::RunOptions ro;
  ro.spawn.argv = {"/bin/sh", "-c", trusted_build_script(tk, flags, name)};
  ro.spawn.cwd = scratch;
  ro.timeout = std::chrono::seconds(600);
  KOPE_ASSIGN(util::RunResult r, util::run(ro));
  if (!r.status.success() || r.timed_out) {
    fs::remove_all(scratch, ec);
    return fail(ErrorKind::config, "{}: does not build ({}{}):\n{}", source.string(), r.status.describe(), r.timed_out ? ", timed out" : "",
                util::truncate_text(r.err + r.out, 4000, 40));
  }
  fs::rename(scratch, dir, ec);
  if (ec && !fs::exists(so)) {
    fs::remove_all(scratch, ec);
    return fail(ErrorKind::io, "cannot move the GPU baseline build of {} into {}", op.name, dir.string());
  }
  fs::remove_all(scratch, ec);  // another process stored the same build first
  return so;
}

std::vector<std::string> nvcc_flags(const std::string& arch) {
  return {"-O3", "-std=c++17", fmt::format("-arch={}", arch), "-Xcompiler", "-fPIC", "-Xcompiler", "-fno-gnu-unique"};
}

Target target() { return *Target::parse("cuda-" + util::replace_all(toolkit().arch, "_", "")); }

std::string Toolkit::toolchain_id() const {
  return fmt::format("nvcc {} | {}", nvcc_version, util::join(nvcc_flags(arch), " "));
}

const Toolkit& toolkit() {
  static std::once_flag once;
  static Toolkit t;
  std::call_once(once, [] {
    t.nvcc = find_nvcc();
    t.arch = util::get_env("KOPE_CUDA_ARCH").value_or("");
    if (auto smi = util::find_executable("nvidia-smi")) {
      util::RunOptions ro;
      ro.spawn.argv = {smi->string(), "--query-gpu=name,compute_cap,memory.total", "--format=csv,noheader,nounits"};
      ro.timeout = std::chrono::seconds(30);
      if (auto r = util::run(ro); r && r->status.success()) {
        for (auto& line : util::split(r->out, '\n')) {
          auto parts = util::split(line, ',');
          if (parts.size() < 2) continue;
          Gpu g;
          g.name = std::string(util::trim(parts[0]));
          g.compute_cap = std::string(util::trim(parts[1]));
          if (parts.size() > 2) g.memory_bytes = static_cast<uint64_t>(std::atof(std::string(util::trim(parts[2])).c_str()) * 1048576.0);
          t.gpus.push_back(g);
        }
      }
    }
    t.device_nodes = nvidia_device_nodes();
    if (t.arch.empty() && !t.gpus.empty()) t.arch = "sm_" + util::replace_all(t.gpus.front().compute_cap, ".", "");
    if (t.arch.empty()) t.arch = "sm_90";
    if (!t.nvcc) {
      t.problem = "nvcc was not found ($KOPE_NVCC, PATH, /usr/local/cuda*/bin)";
      return;
    }
    std::error_code ec;
    fs::path real = fs::canonical(*t.nvcc, ec);
    if (!ec) t.nvcc = real;
    t.cuda_home = t.nvcc->parent_path().parent_path();
    util::RunOptions ro;
    ro.spawn.argv = {t.nvcc->string(), "--version"};
    ro.timeout = std::chrono::seconds(30);
    auto r = util::run(ro);
    if (!r || !r->status.success()) {
      t.problem = fmt::format("{} --version failed", t.nvcc->string());
      return;
    }
    for (auto& line : util::split(r->out, '\n')) {
      auto pos = line.find("release ");
      if (pos != std::string::npos) t.nvcc_version = std::string(util::trim(line.substr(pos)));
    }
    if (t.nvcc_version.empty()) t.nvcc_version = "unknown";
  });
  return t;
}

InspectionReport inspect_candidate(const SymbolPolicy& policy, const elf::File& object, std::string_view flagged) {
  InspectionReport rep;
  auto add = [&](std::string finding) { rep.reject(std::move(finding)); };
  if (object.type != ET_REL) add("nvcc did not produce a relocatable object");
  bool registers = false, stub = false, launch = false;
  for (const auto& s : object.symbols) {
    if (s.defined && s.name.find("__sti____cudaRegisterAll") != std::string::npos) registers = true;
    if (s.defined && s.name.find("__device_stub__") != std::string::npos) stub = true;
    if (!s.defined && (s.name == "__cudaLaunchKernel" || s.name == "cudaLaunchKernel" || s.name == "cudaLaunchKernelExC" ||
                       s.name == "cudaLaunchCooperativeKernel" || s.name == "__cudaPushCallConfiguration")) {
      launch = true;
    }
  }
  for (const auto& sec : object.sections) {
    const std::string& n = sec.name;
    bool ctor = sec.type == SHT_INIT_ARRAY || sec.type == SHT_PREINIT_ARRAY || n.starts_with(".init_array") ||
                n.starts_with(".preinit_array") || n.starts_with(".ctors") || n == ".init";
    bool dtor = sec.type == SHT_FINI_ARRAY || n.starts_with(".fini_array") || n.starts_with(".dtors") || n == ".fini";
    // nvcc's fat-binary registration is the one constructor allowed: one entry, with its
    // registration function present.
    if (ctor && sec.size > 0 && !(n == ".init_array" && sec.size <= 8 && registers)) {
      add(fmt::format("has a static constructor (section {}): no code of the candidate may run when it is loaded", n));
    }
    if (dtor && sec.size > 0) add(fmt::format("has a static destructor (section {})", n));
    if ((sec.flags & SHF_WRITE) && (sec.flags & SHF_EXECINSTR)) add(fmt::format("has a writable and executable section ({})", n));
  }
  for (const auto& s : object.symbols) {
    if (s.name.empty()) continue;
    if (!s.defined) {
      if (cuda_import_allowed(s.name)) continue;
      std::string why = policy.import_problem(s.name);
      if (s.name.starts_with("cuda") || s.name.starts_with("cu")) {
        why = "the candidate may only launch kernels: no memory copies, allocation, streams or synchronisation on the host side "
              "(the harness owns the buffers and synchronises)";
      }
      if (!why.empty()) add(fmt::format("imports {}: {}", display_symbol(s.name), why));
      continue;
    }
    if (s.type == STT_GNU_IFUNC) add(fmt::format("defines {} as an indirect function", display_symbol(s.name)));
    if (s.bind == STB_LOCAL) continue;
    if (s.name == "kope_kernel") {
      if (s.type == STT_FUNC) rep.defines_entry = true;
      continue;
    }
    // Interposition: a candidate that defines a CUDA runtime or harness function would replace
    // the shim's (e.g. a fake cudaEventElapsedTime).
    if (s.name.starts_with("cu") || s.name.starts_with("__cuda") || s.name.starts_with("kope_")) {
      add(fmt::format("defines {}, a name of the CUDA runtime or of kope's harness (interposition is not allowed)", display_symbol(s.name)));
      continue;
    }
    std::string why = policy.definition_problem(s.name, s.bind == STB_GLOBAL);
    if (!why.empty()) add(fmt::format("defines {}, which {}", display_symbol(s.name), why));
  }
  for (auto& f : forbidden_instructions(flagged)) add(std::move(f));
  if (!stub || !launch) {
    add("launches no __global__ kernel: the work must run on the GPU (a host-side implementation is a CPU fallback)");
  }
  return rep;
}

namespace {

// nvcc's build: several compilers in turn, large temporary files.
CompileLimits nvcc_limits(const CudaBackendOptions& o) {
  CompileLimits l = compile_limits(o.compile_timeout, o.compile_memory_bytes);
  l.object_bytes = 256ull << 20;
  l.tmp_bytes = 1ull << 30;
  l.processes = 64;
  return l;
}

class CudaBackend final : public Backend {
 public:
  CudaBackend(const EvaluatorOptions& o, std::unique_ptr<Backend> cpu, Toolchain cpu_tc)
      : m_inspect(o.inspect), m_limits(nvcc_limits(o.cuda)), m_cpu(std::move(cpu)), m_cpu_tc(std::move(cpu_tc)), m_tk(toolkit()) {}

  std::string name() const override { return "cuda"; }
  Target target() const override { return cuda::target(); }
  std::string toolchain_id() const override { return m_tk.toolchain_id(); }
  int threads() const override { return m_cpu->threads(); }
  bool device_clock() const override { return true; }
  // The probe's measurement of the first GPU (cached), kope's table where it cannot run.
  std::optional<HardwareProfile> device_profile() const override {
    return profile_from_measurement(m_tk.gpus.empty() ? Gpu{} : m_tk.gpus.front(), m_tk.arch,
                                    m_tk.gpus.empty() ? std::nullopt : device_measurement());
  }

  Result<BuildOutcome> build_candidate(const spec::OpSpec& op, std::string_view source,
                                       const std::vector<std::string>& extra_flags) const override;

  // References are the op's CPU ones; a library baseline is the GPU's (baseline_op).
  Result<fs::path> build_trusted(const spec::OpSpec& op, const fs::path& source, bool library) const override {
    if (library && source.extension().string() == k_file_extension) return build_trusted_baseline(op, source);
    return m_cpu->build_trusted(op, source, library);
  }
  spec::OpSpec baseline_op(const spec::OpSpec& op) const override { return with_gpu_baseline(op); }
  RunnerOptions library_runner_options(uint64_t buffer_bytes) const override {
    RunnerOptions r = runner_options(proto::Mode::candidate, buffer_bytes);
    r.mode = proto::Mode::trusted;  // trusted code: no filter, and kope_host_describe reports the library
    r.env.emplace_back("NVIDIA_TF32_OVERRIDE", "0");  // FP32 stays FP32 in cuBLAS and cuDNN
    return r;
  }
  bool library_device_clock() const override { return true; }

  RunnerOptions runner_options(proto::Mode mode, uint64_t buffer_bytes) const override {
    RunnerOptions r = m_cpu->runner_options(mode, buffer_bytes);
    if (mode == proto::Mode::trusted) return r;
    r.threads = 1;
    r.host_shim = true;
    r.proc_and_sys = true;
    r.devices = m_tk.device_nodes;
    r.device_ioctl = true;
    // Modules load when the context is created (before the filter), not at the first launch.
    r.env = {{"CUDA_MODULE_LOADING", "EAGER"}, {"HOME", "/tmp"}, {"CUDA_CACHE_PATH", "/tmp/nv"}};
    r.memory_bytes = ~uint64_t{0} >> 1;  // the driver reserves huge virtual ranges (UVM)
    r.processes = 128;
    return r;
  }

 private:
  // The files of one candidate's build: what the scratch directory gets and the key covers.
  struct Sources {
    std::string_view kernel;
    std::string signature;  // kope_signature.h
    std::string entry;      // kope_entry.cu
    std::vector<std::string> flags;
  };
  Result<FreshBuild> build_fresh(const spec::OpSpec& op, const Sources& s, const fs::path& scratch) const;
  Result<BuildOutcome> conclude(const fs::path& dir, const json& j) const;

  bool m_inspect;
  CompileLimits m_limits;
  std::unique_ptr<Backend> m_cpu;
  Toolchain m_cpu_tc;
  const Toolkit& m_tk;
};

Result<BuildOutcome> CudaBackend::conclude(const fs::path& dir, const json& j) const {
  if (j.value("status", "") != "built") return stored_compile_error(j);
  KOPE_ASSIGN(auto policy, SymbolPolicy::for_compiler(m_cpu_tc.compiler));
  KOPE_ASSIGN(BuiltObject obj, read_built_object(dir));
  ObjectRules rules;
  rules.enforce = m_inspect;
  rules.no_entry = "the source defines no extern \"C\" host function kope_kernel";
  rules.not_linked = "does not link";
  return conclude_object_build(dir, j, inspect_candidate(*policy, obj.object, obj.flagged), rules);
}

Result<BuildOutcome> CudaBackend::build_candidate(const spec::OpSpec& op, std::string_view source,
                                                  const std::vector<std::string>& extra_flags) const {
  for (const auto& f : extra_flags) {
    std::string why = extra_flag_problem(f);
    if (!why.empty()) return fail(ErrorKind::usage, "extra compile flag {}", why);
  }
  if (source.size() > m_limits.source_bytes) {
    BuildOutcome o;
    o.message = "the source is larger than 1 MiB";
    return o;
  }
  Sources s;
  s.kernel = source;
  s.flags = nvcc_flags(m_tk.arch);
  for (const auto& f : extra_flags) {
    s.flags.emplace_back("-Xcompiler");
    s.flags.push_back(f);
  }
  s.signature = fmt::format("// The kernel ABI of op {} (kope, CUDA: pointers are device pointers).\n#pragma once\n#include "
                            "<stdint.h>\n{}\n",
                            op.name, spec::render_signature(op));
  s.entry = spec::render_entry_shim(op);
  std::string key = util::sha256_hex(fmt::format("{}\n{}\n{}\n{}\n{}\n{}\n{}", k_recipe, m_tk.toolchain_id(), util::join(s.flags, " "),
                                                 util::sha256_hex(s.signature), util::sha256_hex(s.entry), util::sha256_hex(k_shim),
                                                 util::sha256_hex(source)));
  CandidateBuild b;
  b.entry = util::cache_dir() / "eval" / "cuda" / key.substr(0, 2) / key.substr(0, 40);
  b.build = [&](const fs::path& scratch) { return build_fresh(op, s, scratch); };
  b.conclude = [&](const fs::path& dir, const json& j) { return conclude(dir, j); };
  return run_candidate_build(b);
}

Result<FreshBuild> CudaBackend::build_fresh(const spec::OpSpec& op, const Sources& s, const fs::path& scratch) const {
  KOPE_TRY(util::write_file_atomic(scratch / fmt::format("kernel{}", k_file_extension), s.kernel));
  KOPE_TRY(util::write_file_atomic(scratch / "kope_signature.h", s.signature));
  KOPE_TRY(util::write_file_atomic(scratch / "kope_entry.cu", s.entry));
  KOPE_TRY(util::write_file_atomic(scratch / "kope_host.cu", std::string(k_shim)));
  KOPE_ASSIGN(fs::path objdump, objdump_path());
  std::string nvcc = util::shell_quote(m_tk.nvcc->string());
  std::string fl;
  for (const auto& f : s.flags) fl += " " + util::shell_quote(f);
  std::string marker = step_marker();
  std::string script = "set -u\n";
  script += fmt::format("echo '{}compile' >&2\n", marker);
  script += fmt::format("{}{} -include kope_signature.h -c kernel.cu -o kernel.o || exit 10\n", nvcc, fl);
  script += fmt::format("{} -d --no-show-raw-insn -w kernel.o | grep -E {} | head -c 1000000 > flagged.txt\n", util::shell_quote(objdump.string()),
                        util::shell_quote(k_disassembly_filter));
  script += fmt::format("echo '{}link' >&2\n", marker);
  script += fmt::format("{}{} -c kope_host.cu -o kope_host.o || exit 13\n", nvcc, fl);
  script += fmt::format("{}{} -Dkope_entry=kope_device_entry -include kope_signature.h -c kope_entry.cu -o kope_entry.o || exit 13\n",
                        nvcc, fl);
  script += fmt::format("{} -shared -arch={} -o kernel.so kernel.o kope_host.o kope_entry.o -Xlinker -z,now,-z,noexecstack || exit 12\n", nvcc, m_tk.arch);
  SandboxSpec spec = build_sandbox(scratch, m_limits, std::move(script));
  if (!m_tk.cuda_home.string().starts_with("/usr/")) spec.ro_binds.emplace_back(m_tk.cuda_home, m_tk.cuda_home.string());
  KOPE_ASSIGN(util::RunResult r, run_build_sandbox(spec, m_limits));
  auto steps = split_steps(r.err, marker);
  std::vector<std::string> scrub = {"/build", scratch.string()};
  std::string diag = scrub_diagnostics(steps["compile"], scrub);
  if (steps["setup"].find("bwrap:") != std::string::npos) return fail(ErrorKind::unavailable, "the compile sandbox could not start: {}", util::trim(steps["setup"]));
  int code = r.status.exited ? r.status.code : 128 + r.status.signal;
  if (r.timed_out || r.output_capped || code > 128) {
    BuildOutcome o;
    o.message = r.timed_out ? "nvcc ran past its time limit and was stopped"
                            : (r.output_capped ? "nvcc's output passed its limit" : fmt::format("nvcc was killed by {}", util::signal_name(code - 128)));
    o.diagnostics = diag;
    return FreshBuild{std::nullopt, std::move(o)};
  }
  if (code == 10) {
    std::string first = first_line_where(diag, [](std::string_view l) { return l.find("error") != std::string_view::npos; });
    return FreshBuild{compile_error_record(first, diag), {}};
  }
  if (code == 13) {
    return fail(ErrorKind::internal, "the CUDA host shim does not compile for op {}: {}", op.name, util::truncate_text(steps["link"], 2000, 20));
  }
  if (code != 0 && code != 12) {
    return fail(ErrorKind::internal, "the CUDA build sandbox {}: {}", r.status.describe(), util::truncate_text(r.err, 2000, 20));
  }
  json j;
  j["status"] = "built";
  j["linked"] = code == 0;
  j["link_diagnostics"] = scrub_diagnostics(steps["link"], scrub);
  return FreshBuild{std::move(j), {}};
}

}  // namespace

}  // namespace kope::eval::cuda

namespace kope::eval {

BackendInfo cuda_backend_info() {
  BackendInfo b;
  const auto& t = cuda::toolkit();
  b.built = KOPE_HAVE_CUDA != 0;
  if (!b.built) {
    b.detail = "kope was built without the CUDA backend (KOPE_CUDA=OFF)";
    return b;
  }
  if (t.nvcc) b.toolchain = t.toolchain_id();
  std::string why;
  bool sandbox = sandbox_available(&why);
  b.can_compile = t.problem.empty() && sandbox;
  b.usable = b.can_compile && !t.gpus.empty() && !t.device_nodes.empty();
  if (!t.problem.empty()) {
    b.detail = t.problem;
  } else if (!sandbox) {
    b.detail = "the kernel sandbox is unavailable: " + why;
  } else if (t.gpus.empty()) {
    b.detail = fmt::format("no GPU: nvidia-smi {} (compiles for {} work; runs need an NVIDIA GPU and its driver)",
                           util::find_executable("nvidia-smi") ? "lists none" : "is not installed", t.arch);
  } else if (t.device_nodes.empty()) {
    b.detail = "GPUs listed but no /dev/nvidia* device nodes";
  } else {
    b.detail = fmt::format("{} (compute capability {}), building for {}", t.gpus.front().name, t.gpus.front().compute_cap, t.arch);
  }
  return b;
}

Result<std::unique_ptr<Backend>> make_cuda_backend(const HardwareProfile& hw, const EvaluatorOptions& options) {
  BackendInfo info = cuda_backend_info();
  if (!info.can_compile) return fail(ErrorKind::unavailable, "the CUDA backend cannot build here: {}", info.detail);
  KOPE_ASSIGN(auto cpu, make_cpu_backend(hw, options));
  KOPE_ASSIGN(Toolchain tc, cpu_toolchain());
  return std::unique_ptr<Backend>(new cuda::CudaBackend(options, std::move(cpu), std::move(tc)));
}

Result<std::unique_ptr<Evaluator>> make_cuda_evaluator(const HardwareProfile& hw, const EvaluatorOptions& options) {
  BackendInfo info = cuda_backend_info();
  if (!info.usable) return fail(ErrorKind::unavailable, "the CUDA backend cannot run kernels here: {}", info.detail);
  KOPE_ASSIGN(auto backend, make_cuda_backend(hw, options));
  return make_sandboxed_evaluator(std::move(backend), hw, options);
}

}  // namespace kope::eval
