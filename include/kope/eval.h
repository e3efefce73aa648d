// kope/eval.h — judging candidate kernels: the evaluator's public contract (DESIGN.md §3).
//
// An Evaluator compiles a candidate in a sandbox, checks it on every case of the op against the
// reference, times the timed cases with the parent's clock, and returns an EvalResult. A bad
// kernel is a *verdict*, never an Error: Error means kope itself could not evaluate (no sandbox,
// no compiler, unreadable spec). Implementations are thread-safe: compiles and verification may
// run concurrently, timing is exclusive machine-wide (a lock that also holds across processes).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kope/error.h"
#include "kope/hw.h"
#include "kope/spec.h"
#include "kope/target.h"

namespace kope::eval {

enum class Verdict {
  correct,         // compiled, matched the reference on every case, timed (when asked)
  wrong_result,    // ran, but an output differs (first mismatch reported)
  compile_error,   // the compiler rejected it (or ran out of its limits)
  runtime_error,   // crashed (signal named), exited, or wrote outside its buffers
  timeout,         // exceeded the wall-clock or CPU-time limit
  resource_limit,  // exceeded memory, file-size, process or output limits
  rejected,        // broke a rule: forbidden symbol/syscall, constructor, input mutation,
                   // time below the roofline floor, results that depend on call history
};

std::string_view verdict_name(Verdict v);  // "wrong_result"
std::optional<Verdict> parse_verdict(std::string_view s);

// One checked case.
struct CaseCheck {
  int case_index = 0;         // 0-based, as in OpSpec::cases
  std::string label;          // "N=64 D=1000"
  bool ok = false;
  double max_abs_err = 0;
  // "y[3, 17]: got 0.25, expected 0.5" for the first mismatching element; empty when ok.
  std::string first_mismatch;
};

// One timed case. Times are per call, in microseconds, measured by the parent's clock around
// batches of calls.
struct CaseTiming {
  int case_index = 0;
  std::string label;
  double median_us = 0;
  double ci95_us = 0;              // half-width of the 95% confidence interval of the median
  std::vector<double> samples_us;  // one per batch (batch time / calls in the batch)
  int64_t calls_per_batch = 0;
  double reference_us = 0;                 // the reference, timed through the same path
  std::optional<double> library_us;        // the vendor-library baseline, when the op has one
  double roofline_us = 0;                  // DRAM roofline: max(flops/peak, bytes/bandwidth)
  double fraction_of_roofline = 0;         // roofline_us / median_us
  // Extensions (eval backend v1): the baselines' own 95% CI half-widths, so a speedup's
  // interval can be formed; the floor a time may not undercut; the time on never-seen inputs.
  double reference_ci95_us = 0;
  std::optional<double> library_ci95_us;
  double floor_us = 0;     // HardwareProfile::floor_seconds for the case (lowered to a faster
                           // baseline's time), in microseconds; below floor_margin x this: rejected
  double fresh_us = 0;     // one call on fresh inputs, CPU time of the kernel's threads
                           // (content-keyed caching shows here)
  // Median share of the kernel's runnable time spent waiting for a CPU during the batches
  // (other load on the machine). When enough batches were undisturbed (< 2%), the median and
  // CI come from those alone; samples_us always holds every batch.
  double contention = 0;
  // Device backends (eval backend v2): median_us is device-event time; this is the parent's
  // wall time per host-synchronised call (kernels, output download, round trip subtracted).
  std::optional<double> wall_us;
};

// Whether a timing was disturbed by other load on the machine: at least half of its batches
// waited for a CPU k_clean_contention (2%) or more of their runnable time, i.e. the median
// contention is at or above that threshold. The one place the agent and the comparison ask.
bool timing_disturbed(const CaseTiming& t);
bool contention_disturbed(double median_contention);

// --- Fast verdicts: the candidate against the incumbent --------------------------------------

// What the interleaved comparison with the incumbent decided (eval/decision.h states the rule).
enum class IncumbentDecision {
  faster,       // "faster_than_incumbent": the ratio's interval lies above 1 + margin
  slower,       // "slower_than_incumbent": ... below 1
  not_faster,   // "not_faster_than_incumbent": ... below 1 + margin (as fast, within the margin)
  undecided,    // "undecided": the time ran out with the interval across 1 + margin (a tie)
  unavailable,  // "unavailable": the incumbent could not be built or timed (see problem)
};
std::string_view incumbent_decision_name(IncumbentDecision d);
std::optional<IncumbentDecision> parse_incumbent_decision(std::string_view s);
// The decision for an interval [lower, upper] of incumbent time / candidate time.
IncumbentDecision classify_ratio_interval(double lower, double upper, double margin);

// One timed case of the comparison.
struct CaseComparison {
  int case_index = 0;
  std::string label;
  double ratio = 1;      // median of the paired per-batch ratios incumbent / candidate
  double lower = 0;      // its interval (per look, Bonferroni-corrected); 0 when none exists
  std::optional<double> upper;  // unset when none exists (infinite)
  int pairs = 0;         // pairs of batches the estimate used
  int pairs_total = 0;   // pairs timed
  int looks = 0;
  double contention = 0; // median over the pairs of the larger batch contention
  double seconds = 0;
};

struct IncumbentComparison {
  IncumbentDecision decision = IncumbentDecision::unavailable;
  double ratio = 1;      // geomean over the timed cases of CaseComparison::ratio (> 1: candidate faster)
  double lower = 0;      // simultaneous interval over all looks and cases, level 1 - alpha
  std::optional<double> upper;
  double alpha = 0.05;
  double margin = 0.01;
  int pairs = 0;         // over all cases
  double seconds = 0;    // wall time of the comparison (under the timing lock)
  // True: a candidate that may become the incumbent was then timed to the full CI with the
  // reference and library baselines. False: EvalResult::timing holds the comparison's early
  // figures (the candidate's batches of the comparison, baselines from the cache).
  bool full_timing = false;
  bool disturbed = false;  // contention_disturbed(contention)
  double contention = 0;   // the largest CaseComparison::contention
  std::vector<CaseComparison> cases;
  std::string problem;     // unavailable: why (the incumbent did not build, failed, ...)
};

struct EvalResult {
  Verdict verdict = Verdict::rejected;
  std::string message;      // one line a person (and the model) can act on
  std::string diagnostics;  // trimmed compiler errors or stderr, scratch paths scrubbed
  std::string op;
  std::string target;       // Target::str()
  std::string toolchain;    // Toolchain::id(): compiler version and flags
  std::string code_hash;    // SHA-256 of the candidate source
  uint64_t seed = 0;        // the evaluation's data seed (recorded for reproduction)
  std::vector<CaseCheck> cases;
  std::vector<CaseTiming> timing;
  // Geometric means over the timed cases; set only when the verdict is `correct` and timed.
  std::optional<double> speedup_vs_reference;
  std::optional<double> speedup_vs_library;  // over the timed cases that have a library time
  std::optional<double> fraction_of_roofline;
  double compile_seconds = 0;
  bool compile_cached = false;
  double wall_seconds = 0;
  // Set when EvalOptions::incumbent_source was given and the candidate was correct and timed.
  std::optional<IncumbentComparison> incumbent;

  // The `kope eval --json` object: verdict, message, op, target, cases[], timing[],
  // speedup_vs_reference, speedup_vs_library, plus the other fields above ("incumbent" only
  // when a comparison was asked for).
  std::string to_json() const;
  static Result<EvalResult> from_json(std::string_view text);
};

struct EvalOptions {
  std::optional<uint64_t> seed;   // fresh random when unset
  bool time = true;               // false: verify only
  double target_ci = 0.02;        // stop timing when the CI half-width is within ±2% of the median
  double max_seconds_per_case = 10;  // timing cap per timed case
  std::vector<std::string> extra_flags;  // appended to the backend's compile flags
                                         // (only -O, -f, -m, -D, -U, -W, -g; others are a usage error)
  // Fast verdicts. With the incumbent's source, a correct candidate is timed against the
  // incumbent in alternating batches, and the timing stops as soon as the sequential rule of
  // eval/decision.h decides (error rate decision_alpha, per timed case at most
  // max_seconds_per_case for both kernels together). Only a candidate found faster (by more than
  // incumbent_margin) is then timed to the full CI with the baselines; the others keep the
  // comparison's figures (EvalResult::incumbent says which).
  std::optional<std::string> incumbent_source;
  double incumbent_margin = 0.01;        // "faster": incumbent / candidate > 1 + this
  double decision_alpha = 0.05;
};

// The evaluator interface. The agent loop is tested against a fake implementation.
class Evaluator {
 public:
  virtual ~Evaluator() = default;
  // Judges `source` as a kernel for `op`. Thread-safe.
  virtual Result<EvalResult> evaluate(const spec::OpSpec& op, std::string_view source,
                                      const EvalOptions& options) = 0;
  virtual Target target() const = 0;
  virtual std::string toolchain_id() const = 0;
  virtual std::string backend() const = 0;  // "cpu", "opencl", "cuda", "ascend"
};

// --- The CPU C++ backend ------------------------------------------------------------------------

// Knobs of the CPU evaluator. The defaults are what `kope eval` uses; tests shrink the limits.
// The evaluator returned by make_cpu_evaluator is thread-safe: evaluate() may run on several
// threads at once (each evaluation has its own sandboxes; timings take turns on the lock).
struct CpuEvaluatorOptions {
  int threads = 0;                         // OpenMP threads per kernel; 0: the profile's cores
  // Object inspection (rejecting forbidden symbols, constructors, raw syscalls) before loading.
  // Tests turn it off to prove the runtime sandbox catches the same kernels on its own.
  bool inspect = true;
  // A call may take max(min_call_timeout, call_timeout_factor x the reference's time) before it
  // is a timeout.
  std::chrono::milliseconds min_call_timeout{10000};
  double call_timeout_factor = 20;
  uint64_t memory_bytes = 0;               // a kernel's memory beyond its buffers; 0: automatic
  std::chrono::seconds compile_timeout{120};
  uint64_t compile_memory_bytes = 4ull << 30;
  double min_batch_seconds = 0.002;        // a timed batch is at least this long ...
  double target_batch_seconds = 0.005;     // ... and aims at this
  int min_samples = 10;                    // batches before the CI may stop the timing
  // A kernel is rejected when its median is below floor_margin x the hardware floor of the case.
  double floor_margin = 0.5;
  // ... or when a call on never-seen inputs costs more than fresh_factor x a call on seen
  // inputs + fresh_slack (single calls, interleaved, CPU time of the kernel's threads): results
  // cached by content.
  double fresh_factor = 3;
  double fresh_slack_seconds = 0.0005;
  bool refresh_baselines = false;          // re-time references/library baselines (no cache)
};

// A reference or library time for one timed case, measured like a candidate's.
struct BaselineTiming {
  double median_us = 0;
  double ci95_us = 0;
  std::vector<double> samples_us;
  int64_t calls_per_batch = 0;
  bool cached = false;        // read from the baseline cache instead of measured now
  std::string measured_at;    // ISO 8601 UTC
};

struct CaseBaselines {
  int case_index = 0;
  std::string label;
  BaselineTiming reference;
  std::optional<BaselineTiming> library;
  std::string library_problem;  // why there is no library time although library.cpp exists
  double roofline_us = 0;
  double flops = 0;
  double bytes = 0;
};

// The CPU evaluator: sandboxed g++ build, object inspection, kope-runner in bubblewrap with
// seccomp, verification on every case, timing under the machine-wide timing lock. Fails with
// unavailable when the sandbox (bwrap, user namespaces) or the runner is missing.
Result<std::unique_ptr<Evaluator>> make_cpu_evaluator(const HardwareProfile& hw,
                                                      const CpuEvaluatorOptions& options = {});

// Times the reference and (when the op has one) the library baseline of every timed case
// through the evaluator's path, reusing cached times (cache_dir()/eval/baselines) unless
// options.refresh_baselines. `progress` (may be null) receives one line per measurement.
Result<std::vector<CaseBaselines>> measure_cpu_baselines(
    const HardwareProfile& hw, const spec::OpSpec& op, const CpuEvaluatorOptions& options,
    const EvalOptions& timing, const std::function<void(std::string_view)>& progress = {});

// --- Backends (eval backend v2) ---------------------------------------------------------------

// One kind of kernel kope can judge, and whether this machine can.
struct BackendInfo {
  std::string name;          // "cpu", "opencl", "cuda", "ascend"
  std::string language;      // "C++ (ABI v1)", "OpenCL C", "CUDA C++", "Ascend C"
  std::string target;        // Target::str() candidates are judged for, when known
  bool built = false;        // compiled into this kope (its CMake option was on)
  bool can_compile = false;  // candidates can be built here
  bool usable = false;       // candidates can be built, run and timed here
  std::string toolchain;     // compiler / runtime found, when any
  std::string detail;        // usable: what runs them; otherwise why not, and what to install
};

// Every backend kope knows, in a fixed order (cpu, opencl, cuda, ascend). Probes the machine
// (tool versions, devices) once per process; never fails: problems are in `detail`.
std::vector<BackendInfo> list_backends(const HardwareProfile& hw);

// The evaluator for a backend by name. `options` is shared by all backends (the CPU names are
// historical): limits, inspection, timing. Fails with usage for an unknown name and with
// unavailable, saying why, for a backend that cannot run here (no OpenCL platform, no GPU,
// no CANN toolkit).
Result<std::unique_ptr<Evaluator>> make_evaluator(std::string_view backend, const HardwareProfile& hw,
                                                  const CpuEvaluatorOptions& options = {});

}  // namespace kope::eval
