// eval/backend.h — the seam between the generic evaluator and one kind of kernel.
//
// The evaluator (eval/evaluator.cpp) owns the judging: reference data, verification, timing,
// baselines, verdicts. A Backend owns what differs per kernel language and device: how an
// untrusted candidate is compiled and inspected, how trusted kernels (references, library
// baselines) are built, and how the runner that executes a built kernel is configured. Each
// backend lives in its folder (eval/cpu/, eval/opencl/, eval/cuda/, eval/ascend/) with its own
// compile commands (over the shared recipe of eval/build_recipe.h), ABI shims, runners and
// inspection rules, and has a row in the backend table (eval/registry.h). Implementations are
// thread-safe.
#pragma once

#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "eval/build_recipe.h"
#include "eval/session.h"
#include "kope/eval.h"
#include "kope/hw.h"
#include "kope/spec.h"
#include "kope/target.h"

namespace kope::eval {

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;  // "cpu"
  virtual Target target() const = 0;
  virtual std::string toolchain_id() const = 0;
  // Sandboxed build and inspection of an untrusted candidate.
  virtual Result<BuildOutcome> build_candidate(const spec::OpSpec& op, std::string_view source,
                                               const std::vector<std::string>& extra_flags) const = 0;
  // Builds a trusted kernel (the op's reference, or its library baseline when `library`).
  virtual Result<std::filesystem::path> build_trusted(const spec::OpSpec& op, const std::filesystem::path& source,
                                                      bool library) const = 0;
  // How to run a built kernel: trusted or candidate mode, for buffers of this many bytes.
  virtual RunnerOptions runner_options(proto::Mode mode, uint64_t buffer_bytes) const = 0;
  virtual int threads() const = 0;
  // Device backends: candidate timings use the device clock (TimingPlan::device_clock), and the
  // roofline/floor come from the device's profile instead of the host's.
  virtual bool device_clock() const { return false; }
  virtual std::optional<HardwareProfile> device_profile() const { return std::nullopt; }
  // The op as this backend's evaluations see it: its library baseline (OpSpec::library_path and
  // library_name) is the one that runs where the candidates run. The CPU's is the op's
  // library.cpp; a device backend replaces it with the device's own baseline, or with none
  // where the device has none (a CPU library is no baseline for a GPU kernel).
  virtual spec::OpSpec baseline_op(const spec::OpSpec& op) const { return op; }
  // How to run the library baseline of baseline_op(), and whether it is timed by the device
  // clock like a candidate (a device baseline runs through the trusted host shim in trusted
  // mode; the CPU's is an ordinary trusted runner, timed by the parent's clock).
  virtual RunnerOptions library_runner_options(uint64_t buffer_bytes) const { return runner_options(proto::Mode::trusted, buffer_bytes); }
  virtual bool library_device_clock() const { return false; }
  // Whether the backend runs ops with inout tensors (docs/design.md §2): the runner refills
  // them before every call, which only a kernel reading the runner's own buffers sees (not a
  // host shim's device copies).
  virtual bool supports_inouts() const { return false; }
  // Whether it runs ops whose attrs vary per case (Attr::per_case): they reach the kernel
  // through the runner's dims array, which host shims do not read them from.
  virtual bool supports_case_attrs() const { return false; }
};

Result<std::unique_ptr<Backend>> make_cpu_backend(const HardwareProfile& hw, const EvaluatorOptions& options);

// The OpenCL backend (eval/opencl/): OpenCL C candidates built by PoCL in the compile sandbox,
// run through the trusted host shim in kope-runner; references and library baselines are the
// op's CPU C++ ones. Fails with unavailable when kope was built without it or no OpenCL platform
// with a CPU device is installed (the message says which).
Result<std::unique_ptr<Backend>> make_opencl_backend(const HardwareProfile& hw, const EvaluatorOptions& options);

// The CUDA backend (eval/cuda/): .cu candidates built by nvcc in the compile sandbox. Building
// works wherever nvcc is installed; running needs an NVIDIA GPU and its driver.
Result<std::unique_ptr<Backend>> make_cuda_backend(const HardwareProfile& hw, const EvaluatorOptions& options);

// The backend of the backend table's row `name` ("cpu", "opencl", "cuda"); usage error for a
// name without a Backend (ascend is a definition only).
Result<std::unique_ptr<Backend>> make_backend(std::string_view name, const HardwareProfile& hw, const EvaluatorOptions& options);

// The generic sandboxed evaluator (eval/evaluator.cpp) over any backend.
std::unique_ptr<Evaluator> make_sandboxed_evaluator(std::unique_ptr<Backend> backend, const HardwareProfile& hw,
                                                    const EvaluatorOptions& options);

}  // namespace kope::eval
