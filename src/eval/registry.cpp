// The backend table (see eval/registry.h) and what is answered from it: the backends a kope
// knows, and the evaluator of one by name.
#include "eval/registry.h"

#include "eval/ascend/ascend.h"
#include "eval/backend.h"
#include "eval/cpu/cpu.h"
#include "eval/cuda/cuda.h"
#include "eval/opencl/opencl.h"
#include "util/strings.h"

namespace kope::eval {

namespace {

// The C++ declaration of kope_kernel (CPU kernels, CUDA's host function, Ascend C).
std::string cpp_signature(const spec::OpSpec& op) { return spec::render_signature(op); }

const BackendRow k_rows[] = {
    {.name = "cpu",
     .language = "C++ (CPU kernel ABI v1)",
     .cli_help = "C++",
     .file_extension = k_cpu_file_extension,
     .fence = "cpp",
     .prompt_folder = "cpu",
     .target = [](const HardwareProfile& hw) { return hw.target; },
     .signature = cpp_signature,
     .describe_device = describe_cpu_device,
     .device_section = cpu_device_section,
     .probe = cpu_backend_info,
     .make_evaluator = [](const HardwareProfile& hw, const EvaluatorOptions& o) { return make_cpu_evaluator(hw, o); },
     .make_backend = make_cpu_backend},
    {.name = "opencl",
     .language = "OpenCL C",
     .cli_help = "OpenCL C on PoCL",
     .file_extension = opencl::k_file_extension,
     .fence = "c",
     .prompt_folder = "opencl",
     .target = [](const HardwareProfile&) { return opencl::target(); },
     .signature = opencl::render_signature,
     .describe_device = opencl::describe_device,
     .device_section = opencl::device_section,
     .probe = [](const HardwareProfile&) { return opencl_backend_info(); },
     .make_evaluator = make_opencl_evaluator,
     .make_backend = make_opencl_backend},
    {.name = "cuda",
     .language = "CUDA C++",
     .cli_help = ".cu, needs a GPU",
     .file_extension = cuda::k_file_extension,
     .fence = "cpp",
     .prompt_folder = "cuda",
     .target = [](const HardwareProfile&) { return cuda::target(); },
     .signature = cpp_signature,
     .describe_device = cuda::describe_device,
     .device_section = cuda::device_section,
     .probe = [](const HardwareProfile&) { return cuda_backend_info(); },
     .make_evaluator = make_cuda_evaluator,
     .make_backend = make_cuda_backend},
    {.name = "ascend",
     .language = "Ascend C",
     .cli_help = "",
     .file_extension = ascend::k_file_extension,
     .fence = "cpp",
     .prompt_folder = "ascend",
     .target = [](const HardwareProfile&) { return ascend::target(); },
     .signature = cpp_signature,
     .describe_device = describe_cpu_device,
     .device_section = cpu_device_section,
     .probe = [](const HardwareProfile&) { return ascend_backend_info(); },
     .make_evaluator = make_ascend_evaluator},
};

}  // namespace

std::span<const BackendRow> backend_rows() { return k_rows; }

const BackendRow* find_backend_row(std::string_view name) {
  for (const auto& r : k_rows) {
    if (r.name == name) return &r;
  }
  return nullptr;
}

const BackendRow& backend_row_or_default(std::string_view name) {
  const BackendRow* r = find_backend_row(name);
  return r ? *r : k_rows[0];
}

std::vector<std::string> backend_name_list() {
  std::vector<std::string> names;
  for (const auto& r : k_rows) names.emplace_back(r.name);
  return names;
}

std::map<std::string, std::string> backend_code_fences() {
  std::map<std::string, std::string> fences;
  for (const auto& r : k_rows) fences.emplace(r.name, r.fence);
  return fences;
}

std::string_view default_backend_name() { return k_rows[0].name; }

std::string backend_names(std::string_view sep, std::string_view last_sep) {
  std::vector<std::string> names = backend_name_list();
  std::string last = names.back();
  names.pop_back();
  return util::join(names, sep) + std::string(last_sep) + last;
}

std::vector<BackendInfo> list_backends(const HardwareProfile& hw) {
  std::vector<BackendInfo> out;
  for (const auto& r : k_rows) {
    BackendInfo b = r.probe(hw);
    b.name = r.name;
    b.language = r.language;
    b.target = r.target(hw).str();
    out.push_back(std::move(b));
  }
  return out;
}

Result<std::unique_ptr<Evaluator>> make_evaluator(std::string_view backend, const HardwareProfile& hw, const EvaluatorOptions& options) {
  const BackendRow* r = find_backend_row(backend);
  if (!r) return fail(ErrorKind::usage, "unknown backend '{}' (known: {})", backend, backend_names());
  return r->make_evaluator(hw, options);
}

Result<std::unique_ptr<Backend>> make_backend(std::string_view name, const HardwareProfile& hw, const EvaluatorOptions& options) {
  const BackendRow* r = find_backend_row(name);
  if (!r) return fail(ErrorKind::usage, "unknown backend '{}' (known: {})", name, backend_names());
  if (!r->make_backend) return fail(ErrorKind::usage, "the {} backend runs no kernels in this kope (its ABI is a definition only)", name);
  return r->make_backend(hw, options);
}

Result<HardwareProfile> backend_profile(std::string_view backend, const HardwareProfile& hw, const EvaluatorOptions& options) {
  KOPE_ASSIGN(auto b, make_backend(backend, hw, options));
  return b->device_profile().value_or(hw);
}

}  // namespace kope::eval
