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

#include "eval/elf.h"
#include "eval/inspect.h"
#include "kope/error.h"
#include "kope/eval.h"
#include "kope/hw.h"
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
// default for unknown ones, so an honest kernel is never below the floor.
HardwareProfile gpu_profile(const Gpu& gpu, const std::string& arch);

// The host-object rules for a CUDA candidate (kernel.o, nvcc's host side): imports only from
// the CPU allowlist plus kernel launching and error queries (no cudaMemcpy*, host allocation,
// streams, graphs or driver API); at least one __global__ kernel and a launch; no static
// constructor besides nvcc's own fat-binary registration; no raw system calls.
InspectionReport inspect_candidate(const SymbolPolicy& policy, const elf::File& object, std::string_view flagged_instructions);

// Source of the trusted host shim compiled with every candidate (kope_entry, kope_host_*).
std::string_view host_shim_source();

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
