// The backend registry: which kinds of kernel this kope can judge, and the evaluator factory.
#include "eval/backend.h"
#include "eval/opencl/opencl.h"
#include "eval/sandbox.h"

namespace kope::eval {

BackendInfo cpu_backend_info(const HardwareProfile& hw) {
  BackendInfo b;
  b.name = "cpu";
  b.language = "C++ (CPU kernel ABI v1)";
  b.target = hw.target.str();
  b.built = true;
  auto tc = cpu_toolchain();
  if (tc) b.toolchain = tc->id();
  std::string why;
  bool sandbox = sandbox_available(&why);
  auto runner = find_runner();
  b.can_compile = tc.has_value() && sandbox;
  b.usable = b.can_compile && runner.has_value();
  if (!tc) {
    b.detail = "no C++ compiler: " + tc.error().message;
  } else if (!sandbox) {
    b.detail = "the kernel sandbox is unavailable: " + why + " (bubblewrap with user namespaces is required)";
  } else if (!runner) {
    b.detail = runner.error().message;
  } else {
    b.detail = fmt::format("{} cores, sandboxed g++ build, kope-runner with seccomp", hw.cores);
  }
  return b;
}

BackendInfo opencl_backend_info() {
  BackendInfo b;
  b.name = "opencl";
  b.language = "OpenCL C";
  b.target = "opencl-pocl-cpu";
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

std::vector<BackendInfo> list_backends(const HardwareProfile& hw) {
  return {cpu_backend_info(hw), opencl_backend_info(), cuda_backend_info(), ascend_backend_info()};
}

Result<std::unique_ptr<Evaluator>> make_evaluator(std::string_view backend, const HardwareProfile& hw, const CpuEvaluatorOptions& options) {
  if (backend == "cpu") return make_cpu_evaluator(hw, options);
  std::unique_ptr<Backend> b;
  if (backend == "opencl") {
    KOPE_ASSIGN(b, make_opencl_backend(hw, options));
  } else if (backend == "cuda") {
    BackendInfo info = cuda_backend_info();
    if (!info.usable) return fail(ErrorKind::unavailable, "the CUDA backend cannot run kernels here: {}", info.detail);
    KOPE_ASSIGN(b, make_cuda_backend(hw, options));
  } else if (backend == "ascend") {
    BackendInfo info = ascend_backend_info();
    return fail(ErrorKind::unavailable, "the Ascend C backend cannot evaluate here: {} (see src/eval/ascend/ABI.md)", info.detail);
  } else {
    return fail(ErrorKind::usage, "unknown backend '{}' (known: cpu, opencl, cuda, ascend)", backend);
  }
  return make_sandboxed_evaluator(std::move(b), hw, options);
}

}  // namespace kope::eval
