// eval/backend.h — the seam between the generic evaluator and one kind of kernel.
//
// The evaluator (eval/evaluator.cpp) owns the judging: reference data, verification, timing,
// baselines, verdicts. A Backend owns what differs per kernel language and device: how an
// untrusted candidate is compiled and inspected, how trusted kernels (references, library
// baselines) are built, and how the runner that executes a built kernel is configured. The CPU
// C++ backend is the first; OpenCL and CUDA backends plug in here with their own compile
// commands, ABI shims, runners and inspection rules. Implementations are thread-safe.
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "eval/compile.h"
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
};

Result<std::unique_ptr<Backend>> make_cpu_backend(const HardwareProfile& hw, const CpuEvaluatorOptions& options);

}  // namespace kope::eval
