// eval/cuda/cuda.h — the CUDA backend's pieces that tests and the CLI reach directly.
//
// The backend is made by make_cuda_backend (eval/backend.h); its ABI is in ABI.md beside this
// file. Here: finding nvcc and the GPUs, the rules a compiled candidate's host object must obey
// (at least one __global__ kernel launched, no host-side data movement: the static half of the
// CPU-fallback check), and the trusted host shim's source. Thread-safe.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "eval/cuda/gpu_probe.h"
#include "eval/elf.h"
#include "eval/inspect.h"
#include "eval/registry.h"
#include "kope/error.h"
#include "kope/eval.h"
#include "kope/hw.h"
#include "kope/spec.h"
#include "kope/target.h"

namespace kope::eval::cuda {

namespace fs = std::filesystem;

struct Gpu {
  std::string name;           // "NVIDIA H200"
  std::string compute_cap;    // "9.0"
  uint64_t memory_bytes = 0;
};

struct Toolkit {
  std::optional<fs::path> nvcc;  // $KOPE_NVCC, PATH, /usr/local/cuda*/bin/nvcc
  std::string nvcc_version;      // "release 13.0, V13.0.88"
  fs::path cuda_home;            // nvcc's parent's parent (includes, libcudart_static.a)
  std::string arch;              // "sm_90" ($KOPE_CUDA_ARCH, else from the first GPU, else sm_90)
  std::vector<Gpu> gpus;         // from nvidia-smi; empty without a GPU or driver
  std::vector<std::string> device_nodes;  // /dev/nvidia0, /dev/nvidiactl, /dev/nvidia-uvm, ...
  std::string problem;           // why nothing can be built (no nvcc), "" otherwise
  std::string toolchain_id() const;  // "nvcc release 13.0, V13.0.88 | -O3 -arch=sm_90"
};

// Probed once per process.
const Toolkit& toolkit();

// The flags candidates are compiled with.
std::vector<std::string> nvcc_flags(const std::string& arch);

// Peak figures of a known GPU (by name), for the roofline and floor; a conservative (high)
// default for unknown ones, so an honest kernel is never below the floor. The fallback of the
// measured profile (gpu_probe.h: profile_from_measurement), defined in gpu_probe.cpp.
HardwareProfile gpu_profile(const Gpu& gpu, const std::string& arch);

// The host-object rules for a CUDA candidate (kernel.o, nvcc's host side): imports only from
// the CPU allowlist plus kernel launching and error queries (no cudaMemcpy*, host allocation,
// streams, graphs or driver API); at least one __global__ kernel and a launch; no static
// constructor besides nvcc's own fat-binary registration; no raw system calls.
InspectionReport inspect_candidate(const SymbolPolicy& policy, const elf::File& object, std::string_view flagged_instructions);

// Source of the trusted host shim compiled with every candidate (kope_entry, kope_host_*).
std::string_view host_shim_source();

// --- GPU vendor baselines (ABI.md, "GPU vendor baselines") ---
// The op with its GPU baseline as its library baseline: OpSpec::gpu_library_path/_name as
// library_path/library_name, or none when the op has no gpu_library.cu (its CPU library is no
// baseline for a GPU kernel). What CudaBackend::baseline_op returns.
spec::OpSpec with_gpu_baseline(const spec::OpSpec& op);
// The trusted helpers every gpu_library.cu includes as "kope_gpu_baseline.h".
std::string_view baseline_support_source();
// The libraries a baseline links (cuBLASLt, cuBLAS, cuDNN, as needed) from cuda_home/lib64.
std::vector<std::string> baseline_link_flags(const fs::path& cuda_home);
// The shell script that builds a baseline in a directory holding it (`source_name`),
// kope_gpu_baseline.h, kope_signature.h, kope_entry.cu and kope_host.cu into kernel.so: the
// candidates' nvcc flags, the same trusted host shim, linked with baseline_link_flags.
std::string trusted_build_script(const Toolkit& tk, const std::vector<std::string>& flags, std::string_view source_name);
// Builds an op's gpu_library.cu that way (not sandboxed: trusted code), cached by content in
// cache_dir()/eval/cuda-trusted/. Returns kernel.so, or a config error with nvcc's output.
Result<fs::path> build_trusted_baseline(const spec::OpSpec& op, const fs::path& source);

// The prompt's hardware section (device_guide.cpp): describe_device fills the guide from the
// toolkit and the GPU probe's measurement (gpu_probe.h; the table's peaks when it did not run);
// describe_measurement is its pure part; device_section renders the lines: the GPU, SMs,
// memory, measured peaks and bandwidth, and what the ABI allows.
void describe_device(HardwareGuide& guide);
void describe_measurement(HardwareGuide& guide, const std::optional<GpuMeasurement>& m, const HardwareProfile& table, std::string_view why);
std::string device_section(const HardwareProfile& hw, const HardwareGuide& guide);

// The backend's entries in the backend table (eval/registry.h).
inline constexpr std::string_view k_file_extension = ".cu";  // the candidate is kernel.cu
Target target();                                              // cuda-sm90: the toolkit's arch

}  // namespace kope::eval::cuda

namespace kope::eval {

// The CUDA evaluator (make_cuda_backend behind the sandboxed evaluator); unavailable unless
// candidates can run here (a GPU and its driver). What this machine has for the backend.
Result<std::unique_ptr<Evaluator>> make_cuda_evaluator(const HardwareProfile& hw, const EvaluatorOptions& options);
BackendInfo cuda_backend_info();

}  // namespace kope::eval
