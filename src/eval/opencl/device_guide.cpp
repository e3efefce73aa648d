// The OpenCL backend's facts for the prompt's hardware section: PoCL's CPU device.
#include "eval/cpu/cpu.h"
#include "eval/native.h"
#include "eval/opencl/opencl.h"
#include "util/strings.h"

namespace kope::eval::opencl {

void describe_device(HardwareGuide& g) {
  const auto& p = platform();
  if (!p.usable) return;
  // PoCL names the CPU its LLVM compiles for in the device name: "pthread-haswell-AMD EPYC".
  std::string cpu = p.device_name.starts_with("pthread-") ? p.device_name.substr(8) : "";
  cpu = cpu.substr(0, cpu.find('-'));
  g.compiler_tune = cpu;
  auto tc = cpu_toolchain();
  if (tc && !cpu.empty()) {
    Toolchain as_pocl = *tc;
    as_pocl.flags = {"-march=" + cpu};
    if (auto t = compiler_target(as_pocl)) g.isa_extensions = t->isa_extensions;
  }
  g.local_mem_bytes = p.local_mem_bytes;
  g.max_work_group_size = p.max_work_group_size;
  g.max_work_item_sizes = p.max_work_item_sizes;
  g.compute_units = p.compute_units;
  g.fp64 = p.fp64;
  g.device_name = p.device_name;
}

// PoCL's device is this CPU: the section is the CPU's identity, the OpenCL device, and the CPU's
// caches, peaks and triad curve (the profile the evaluator judges on is the host's).
std::string device_section(const HardwareProfile& hw, const HardwareGuide& guide) {
  const std::vector<std::string>& isa = guide.isa_extensions;
  std::string out = cpu_identity_line(hw, guide);
  std::string for_cpu = guide.compiler_tune.empty() ? "" : fmt::format(" (it compiles for the CPU '{}')", guide.compiler_tune);
  out += fmt::format("- ISA extensions PoCL's compiler vectorises work-items with{}: {}; OpenCL C has no intrinsics\n", for_cpu,
                     isa.empty() ? "unknown" : util::join(isa, ", "));
  if (!guide.device_name.empty()) out += fmt::format("- OpenCL device: {}\n", guide.device_name);
  int units = guide.compute_units > 0 ? guide.compute_units : hw.cores;
  out += fmt::format("- compute units: {} (PoCL runs one work-group at a time on each CPU core)\n", units);
  if (guide.max_work_group_size > 0) {
    std::string per_dim;
    if (!guide.max_work_item_sizes.empty()) {
      std::vector<std::string> dims;
      for (int64_t v : guide.max_work_item_sizes) dims.push_back(std::to_string(v));
      per_dim = fmt::format(", at most ({}) per dimension", util::join(dims, ", "));
    }
    out += fmt::format("- work-group size: at most {} work-items in total{}; kope accepts local sizes whose product is "
                       "at most 4096\n",
                       guide.max_work_group_size, per_dim);
  }
  if (guide.local_mem_bytes > 0) {
    out += fmt::format("- local memory (__local) per work-group: {} (PoCL keeps it in ordinary cached memory)\n",
                       util::human_bytes(static_cast<double>(guide.local_mem_bytes)));
  }
  if (guide.compute_units > 0 || guide.max_work_group_size > 0) {
    out += fmt::format("- double precision (cl_khr_fp64): {}\n", guide.fp64 ? "supported" : "not supported");
  }
  return out + cpu_memory_lines(hw);
}

}  // namespace kope::eval::opencl
