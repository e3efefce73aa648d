// eval/registry.h — every backend kope knows, one row each.
//
// A row says what the rest of kope needs to know of a backend without naming it: the name the
// CLI and run configs use, the target its candidates are judged for, its kernels' language
// (file extension, code-fence language, kernel signature), its prompt templates, the facts of
// its device for the prompt's hardware section, what this machine has for it, and the factory
// of its evaluator (which reads the common EvaluatorOptions and the backend's own). Adding a
// backend is one folder under src/eval/ and one row in registry.cpp. Rows are constant and
// their functions thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kope/eval.h"
#include "kope/hw.h"
#include "kope/spec.h"
#include "kope/target.h"

namespace kope::eval {

// What the prompt's hardware section shows beyond the profile: facts of the toolchain and the
// device. Empty fields are unknown.
struct HardwareGuide {
  std::string backend = "cpu";
  std::vector<std::string> isa_extensions;  // what the compile flags enable ("avx512vbmi2", ...)
  std::string compiler_tune;                // the CPU the flags tune for ("znver3"), may be empty
  std::string microarchitecture;            // from CPUID ("Zen 5"), empty when not identified
  int cpu_family = 0, cpu_model = 0;        // CPUID display family and model (0: unknown)
  // OpenCL: the device's limits (0 / empty when unknown).
  int64_t local_mem_bytes = 0;
  int64_t max_work_group_size = 0;
  std::vector<int64_t> max_work_item_sizes;
  int compute_units = 0;
  bool fp64 = false;
  std::string device_name;
  // CUDA (device_name and compute_units = SMs above): the GPU's facts, measured by kope's GPU
  // probe where it ran (eval/cuda/gpu_probe.h), kope's table otherwise (`peaks_source` says).
  std::string compute_capability;  // "9.0"
  std::string arch;                // what candidates are compiled for ("sm_90")
  std::string toolkit;             // "nvcc release 13.0, V13.0.88"
  uint64_t device_memory_bytes = 0, l2_bytes = 0, shared_per_block_bytes = 0, shared_per_sm_bytes = 0;
  int clock_mhz = 0, max_threads_per_sm = 0, regs_per_sm = 0;
  double fp32_gflops = 0, fp64_gflops = 0, tf32_gflops = 0, fp16_gflops = 0;
  std::vector<BandwidthPoint> bandwidth;  // triad, by working set
  std::string peaks_source;
};

class Backend;

struct BackendRow {
  std::string_view name;            // "cpu": --backend, run configs, the memory's toolchain key
  std::string_view language;        // "C++ (CPU kernel ABI v1)", as `kope backends` shows it
  std::string_view cli_help;        // "C++": --backend's help says "cpu (C++)"; "" says the name alone
  std::string_view file_extension;  // ".cpp": the candidate's source file in the compile sandbox
  std::string_view fence;           // "cpp": the Markdown code-fence language of its kernels
  std::string_view prompt_folder;   // "cpu": its templates are prompts/<folder>/
  // The target its candidates are judged for on a host with profile `hw`.
  Target (*target)(const HardwareProfile& hw);
  // kope_kernel's declaration in the backend's language, for prompts and messages.
  std::string (*signature)(const spec::OpSpec& op);
  // Fills `guide`'s toolchain and device facts (CPUID is already there); never fails.
  void (*describe_device)(HardwareGuide& guide);
  // The backend's lines of the prompt's hardware section (ISA, device, cores), each "- ...\n".
  std::string (*device_section)(const HardwareProfile& hw, const HardwareGuide& guide);
  // What this machine has for the backend (`detail` says what is missing); never fails.
  BackendInfo (*probe)(const HardwareProfile& hw);
  // The backend's evaluator; unavailable, saying why, when it cannot run here.
  Result<std::unique_ptr<Evaluator>> (*make_evaluator)(const HardwareProfile& hw, const EvaluatorOptions& options);
  // The backend itself (make_backend: baselines measured apart from an evaluation); null for a
  // row whose ABI is a definition only.
  Result<std::unique_ptr<Backend>> (*make_backend)(const HardwareProfile& hw, const EvaluatorOptions& options) = nullptr;
};

// Every row, in a fixed order (cpu first: the default backend).
std::span<const BackendRow> backend_rows();

// The row named `name`, or null.
const BackendRow* find_backend_row(std::string_view name);

// The row for `name`, the first (CPU) row for a name kope does not know (fakes and tests).
const BackendRow& backend_row_or_default(std::string_view name);

// The backends' names in table order: "cpu, opencl, cuda, ascend" (sep ", "), or with
// last_sep " or ": "cpu, opencl, cuda or ascend".
std::string backend_names(std::string_view sep = ", ", std::string_view last_sep = ", ");

// Every backend's name, for a CLI option's allowed values.
std::vector<std::string> backend_name_list();

// Every backend's name -> the code-fence language of its kernels (the prompt text of retrieved
// kernels, agent/memory_items.h).
std::map<std::string, std::string> backend_code_fences();

// The default backend's name (the first row: "cpu").
std::string_view default_backend_name();

}  // namespace kope::eval
