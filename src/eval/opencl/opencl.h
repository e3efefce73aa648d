// eval/opencl/opencl.h — the OpenCL backend's pieces that tests and the CLI reach directly.
//
// The backend itself is made by make_opencl_backend (eval/backend.h). Here: the platform probe
// (PoCL's CPU device, found once per process), the launch-geometry header of a candidate, the
// launch table the host shim reads, the kernel signature for prompts and messages, and the
// backend's row functions. The ABI
// is documented in ABI.md beside this file. Everything here is thread-safe.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "eval/registry.h"
#include "kope/error.h"
#include "kope/eval.h"
#include "kope/hw.h"
#include "kope/spec.h"
#include "kope/target.h"

namespace kope::eval::opencl {

namespace fs = std::filesystem;

// What the OpenCL platform of this machine is, probed once (kope-oclc probe, outside any
// sandbox: it runs no candidate code).
struct Platform {
  bool usable = false;
  std::string problem;            // why not usable: no helper, no PoCL, no CPU device
  fs::path oclc;                  // the kope-oclc helper
  fs::path host_shim;             // kope-opencl-host.so
  fs::path vendor_library;        // PoCL's ICD library, handed to the ICD loader
  std::string platform_name;      // "Portable Computing Language"
  std::string platform_version;   // "OpenCL 3.0 PoCL 3.1+debian ..."
  std::string device_name;        // "pthread-skylake-avx512-..."
  std::string device_version;
  int64_t max_work_group_size = 0;
  std::vector<int64_t> max_work_item_sizes;  // per dimension (CL_DEVICE_MAX_WORK_ITEM_SIZES)
  int64_t local_mem_bytes = 0;    // __local memory per work-group (CL_DEVICE_LOCAL_MEM_SIZE)
  int compute_units = 0;
  bool fp64 = false;
  // The toolchain key memory records: platform version, device, base build options.
  std::string toolchain_id() const;
};
const Platform& platform();

// The `// kope: global=(...)` / `// kope: local=(...)` lines of a candidate.
struct Launch {
  int work_dim = 1;
  std::vector<spec::Expr> global;  // one expression over the op's dims per dimension
  std::vector<int64_t> local;      // always 3 entries (unused dimensions are 1)
};
// Fails with usage naming the line when a `// kope:` line is malformed or global is missing.
Result<Launch> parse_launch(std::string_view source);

// The host shim's launch table: tensor and dim counts, local size, attrs, and the global size
// of every case of the op. Fails with usage when a global size is not a whole number in range.
Result<std::string> render_launch_table(const spec::OpSpec& op, const Launch& launch);

// `__kernel void kope_kernel(__global const float* x, __global float* y, long N, long D)`
std::string render_signature(const spec::OpSpec& op);

// Why an extra build option may not be passed to the OpenCL compiler, or "" when it may.
std::string option_problem(std::string_view option);

// The backend's entries in the backend table (eval/registry.h).
inline constexpr std::string_view k_file_extension = ".cl";  // the candidate is kernel.cl
Target target();                                              // opencl-pocl-cpu
// The platform's facts for the prompt: the CPU PoCL compiles for, its ISA, the device's limits.
void describe_device(HardwareGuide& guide);
// The prompt's lines on PoCL's vectorisation, the device, work-groups and __local memory.
std::string device_section(const HardwareProfile& hw, const HardwareGuide& guide);

}  // namespace kope::eval::opencl

namespace kope::eval {

// The OpenCL evaluator (make_opencl_backend behind the sandboxed evaluator), and what this
// machine has for it.
Result<std::unique_ptr<Evaluator>> make_opencl_evaluator(const HardwareProfile& hw, const EvaluatorOptions& options);
BackendInfo opencl_backend_info();

}  // namespace kope::eval
