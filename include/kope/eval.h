// kope/eval.h — judging candidate kernels: the evaluator's public contract (docs/design.md §3).
//
// An Evaluator compiles a candidate in a sandbox, checks it on every case of the op against the
// reference, times the timed cases with the parent's clock, and returns an EvalResult. A bad
// kernel is a *verdict*, never an Error: Error means kope itself could not evaluate (no sandbox,
// no compiler, unreadable spec). Implementations are thread-safe: compiles and verification may
// run concurrently, timing is exclusive machine-wide (a lock that also holds across processes,
// util::lock_for_timing; compiles, verification and data generation hold it shared, so none of
// kope's own work runs while any kope on the machine times).
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
#include "kope/verdict.h"

namespace kope::eval {

// One checked case.
struct CaseCheck {
  int case_index = 0;         // 0-based, as in OpSpec::cases
  std::string label;          // "N=64 D=1000"
  bool ok = false;
  double max_abs_err = 0;
  // "y[3, 17]: got 0.25, expected 0.5" for the first mismatching element; empty when ok.
  std::string first_mismatch;
};

// The figures of one timed case that outlive its evaluation: what a run's attempt keeps of it
// (run::TimingSummary takes them over whole) and the prompt's tables show. Times are per call,
// in microseconds, measured by the parent's clock around batches of calls.
struct CaseFigures {
  int case_index = 0;
  std::string label;
  double median_us = 0;
  double ci95_us = 0;              // half-width of the 95% confidence interval of the median
  double reference_us = 0;                 // the reference, timed through the same path
  std::optional<double> library_us;        // the vendor-library baseline, when the op has one
  double roofline_us = 0;                  // the working-set roofline (case_roofline), µs
  double fraction_of_roofline = 0;         // roofline_us / median_us
  double floor_us = 0;     // HardwareProfile::floor_seconds for the case (lowered to a faster
                           // baseline's time), in microseconds; below floor_margin x this: rejected
  // Median share of the kernel's runnable time spent waiting for a CPU during the batches
  // (other load on the machine). When enough batches were undisturbed (< 2%), the median and
  // CI come from those alone; CaseTiming::samples_us always holds every batch.
  double contention = 0;
  // Extensions (eval fairness): the figures of this case were measured under outside load: the
  // median and CI had to use batches that waited for a CPU (too few undisturbed batches to use
  // them alone, and more than a quarter of those used waited), for the kernel or for a baseline
  // timed beside it. Such a time is evidence under disturbance, not a clean measurement;
  // `contention` says how much.
  bool disturbed = false;
  // The roofline model's figures for this case (case_roofline): which roof bounds it ("memory"
  // or "compute"), the bandwidth and the compute peak it used, the working set it read the
  // bandwidth curve at.
  std::string roofline_bound = {};
  double roofline_gbps = 0;
  // Extension (the roof read beside the timing): when roofline_gbps was measured around this
  // case's timing (apply_roofline, bandwidth_now_applies), the profile's figure at the same
  // working set; 0 when roofline_gbps is the profile's own.
  double roofline_gbps_profile = 0;
  double roofline_gflops = 0;
  uint64_t roofline_working_set_bytes = 0;
  // Faster than the roofline by more than its CI (roofline_us > median_us + ci95_us): a bug of
  // the roofline model for this case, reported (EvalResult::roofline_notes), never held against
  // the kernel.
  bool beyond_roofline = false;
};

// One timed case: its figures and the measurements behind them.
struct CaseTiming : CaseFigures {
  std::vector<double> samples_us;  // one per batch (batch time / calls in the batch)
  int64_t calls_per_batch = 0;
  // Extensions (eval backend v1): the baselines' own 95% CI half-widths, so a speedup's
  // interval can be formed; the time on never-seen inputs.
  double reference_ci95_us = 0;
  std::optional<double> library_ci95_us;
  double fresh_us = 0;     // median call on never-seen inputs in the fresh-data check, CPU time
                           // of the kernel's threads (content-keyed caching shows here)
  // The share of the capacity of the kernel runner's CPUs that other work used during its
  // batches (outside_load_seen): what tells waits caused by other load from the kernel's own.
  double outside_load = 0;
  // Device backends (eval backend v2): median_us is device-event time; this is the parent's
  // wall time per host-synchronised call (kernels, output download, round trip subtracted).
  std::optional<double> wall_us;
};

// The configuration a vendor-library baseline ran with, as the library reported it from inside
// its runner, and whether the user's environment forced it.
struct LibraryConfig {
  std::string library;      // "openblas", "onednn"; GPU baselines "cublas", "cublaslt", "cudnn", "cuda-naive"
  std::string setting;      // how it was chosen: "environment" (the default), or the name of the
                            // configuration --library-config best kept ("auto", "openblas:SkylakeX")
  std::string core;         // OpenBLAS: openblas_get_corename(); oneDNN: the effective ISA ("avx2");
                            // GPU baselines: their configuration ("fp32,tf32=off,device=NVIDIA_H200")
  int threads = 0;          // the library's thread count (the candidates' count)
  std::string version;      // the library's version when it reports one
  std::string env;          // the library variables its runner got ("OPENBLAS_CORETYPE=Haswell"; "" none)
  // The user's environment forces a configuration that is not the library's own choice
  // (OPENBLAS_CORETYPE, ONEDNN_MAX_CPU_ISA, ...), or the library runs with another thread
  // count than the candidates: every speedup vs the library says so next to the figure.
  bool forced = false;
  std::string forced_by;    // "OPENBLAS_CORETYPE=Haswell" (what forced it)

  // "OpenBLAS core Haswell, 2 threads (forced by OPENBLAS_CORETYPE=Haswell)".
  std::string describe() const;
  // The note shown next to a speedup vs the library: "" when not forced, else
  // " [library forced: OPENBLAS_CORETYPE=Haswell]".
  std::string forced_note() const;
};

// Whether a timing was disturbed by other load on the machine (CaseTiming::disturbed: its
// figures had to use batches that waited for a CPU). The one place the agent asks.
bool timing_disturbed(const CaseTiming& t);
// Whether a median contention (the share of runnable time spent waiting for a CPU) is at or
// above k_clean_contention (2%): for one figure without its batches (the fake evaluator's).
bool contention_disturbed(double median_contention);
// Whether waiting for a CPU may have moved figures computed from these batches (or pairs of
// batches), one contention each: the statistics had to include waiting ones (not
// `used_clean_only`, and more than a quarter waited 2% or more), or most waited 10% or more (a
// busy machine: the clean few shared caches, memory and clocks with the load too).
bool waits_disturbed(const std::vector<double>& contention, bool used_clean_only);
// Whether other work ran beside a timing: the share of the capacity of the CPUs its runner may
// use that went to anything else (other processes, kope's own other threads, the hypervisor's
// steal) during its batches reached k_outside_load. Below that, the runner's waits for a CPU are
// its own doing (idle CPUs waking up, more threads than CPUs) and part of its cost: they neither
// mark a timing disturbed nor drop its batches.
constexpr double k_outside_load = 0.10;
bool outside_load_seen(double outside_share);

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
  // Each kernel's own figures in this comparison (same batches, same load): median time per call
  // over its batches, and the median share of its runnable time spent waiting for a CPU.
  double candidate_us = 0;
  double incumbent_us = 0;
  double candidate_contention = 0;
  double incumbent_contention = 0;
  double outside_load = 0;  // the larger of the two timings' outside load (outside_load_seen)
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
  bool disturbed = false;  // some case's pairs: waits_disturbed
  double contention = 0;   // the largest CaseComparison::contention
  // The largest CaseComparison::outside_load: whether other work ran beside the comparison
  // (outside_load_seen), or its waits were the kernels' own.
  double outside_load = 0;
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
  // The library baseline's configuration (when the op has one and it was timed or cached).
  std::optional<LibraryConfig> library_config;
  // One note per case beyond its roofline by more than its CI (CaseTiming::beyond_roofline):
  // "the roofline model is wrong here", naming the case, the roof used and the measured time.
  std::vector<std::string> roofline_notes;
  double compile_seconds = 0;
  bool compile_cached = false;
  double wall_seconds = 0;
  // Some timed case is disturbed (CaseTiming::disturbed): the speedups above rest at least in
  // part on timings taken under outside load. `kope eval --json`: "disturbed".
  bool disturbed = false;

  // Set when EvalOptions::incumbent_source was given and the candidate was correct and timed.
  std::optional<IncumbentComparison> incumbent;

  // The `kope eval --json` object: verdict, message, op, target, cases[], timing[],
  // speedup_vs_reference, speedup_vs_library, plus the other fields above (library_config as an
  // object, library_forced: whether the library's configuration was forced; "incumbent" only
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
  // The comparison's budget: each timed case gets comparison_seconds / (timed cases) of
  // alternating batches (at most max_seconds_per_case); a case whose share is spent stops at
  // its next scheduled look (the first one at the earliest). A comparison still undecided then
  // is "not shown faster" and keeps the incumbent: the budget never raises the chance of a
  // wrong replacement (at most decision_alpha), it only gives up on telling a small gain from
  // a tie. 0: no budget beyond max_seconds_per_case.
  double comparison_seconds = 6;
  // Before timing, wait up to this long (holding the timing lock) for the outside load on the
  // runner's CPUs to fall below k_outside_load (the judge's re-time of evidence disturbed by
  // other load). 0: time at once.
  double quiet_wait_seconds = 0;
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
  // The hardware it judges on: the device's for a device backend (CUDA: the GPU), the host's
  // where kernels run on the host CPU. The one profile the agent, the memory and the prompts see.
  virtual const HardwareProfile& hardware() const = 0;
};

// --- Evaluator options ---------------------------------------------------------------------

// The CPU C++ backend's own knobs (eval/cpu/). Every backend's references and library baselines
// are CPU C++ built and run with these.
struct CpuBackendOptions {
  int threads = 0;                         // OpenMP threads per kernel; 0: the profile's cores
  uint64_t memory_bytes = 0;               // a kernel's memory beyond its buffers; 0: automatic
  std::chrono::seconds compile_timeout{120};
  uint64_t compile_memory_bytes = 4ull << 30;
};

// The OpenCL backend's own knobs (eval/opencl/): PoCL's build (LLVM maps a lot of memory).
struct OpenClBackendOptions {
  std::chrono::seconds compile_timeout{120};
  uint64_t compile_memory_bytes = 8ull << 30;
};

// The CUDA backend's own knobs (eval/cuda/): nvcc runs several compilers, hence the longer time.
struct CudaBackendOptions {
  std::chrono::seconds compile_timeout{240};
  uint64_t compile_memory_bytes = 8ull << 30;
};

// Knobs of an evaluator: the judging and timing rules every backend shares, then each
// backend's own. The defaults are what `kope eval` uses; tests shrink the limits.
// The evaluators made with them are thread-safe: evaluate() may run on several threads at once
// (each evaluation has its own sandboxes; timings take turns on the lock).
struct EvaluatorOptions {
  // Object inspection (rejecting forbidden symbols, constructors, raw syscalls) before loading.
  // Tests turn it off to prove the runtime sandbox catches the same kernels on its own.
  bool inspect = true;
  // A call may take max(min_call_timeout, call_timeout_factor x the reference's time) before it
  // is a timeout.
  std::chrono::milliseconds min_call_timeout{10000};
  double call_timeout_factor = 20;
  double min_batch_seconds = 0.002;        // a timed batch is at least this long ...
  double target_batch_seconds = 0.005;     // ... and aims at this
  int min_samples = 10;                    // batches before the CI may stop the timing
  // A kernel is rejected when its median is below floor_margin x the hardware floor of the case.
  double floor_margin = 0.5;
  // ... or when calls on never-seen inputs cost more than fresh_factor x calls on seen inputs
  // + fresh_slack: the median ratio over interleaved pairs of single calls that start from the
  // same state, in CPU time of the kernel's threads and in wall time alike, in a first round and
  // a confirmation round on other never-seen inputs: results cached by content.
  double fresh_factor = 3;
  double fresh_slack_seconds = 0.0005;
  bool refresh_baselines = false;          // re-time references/library baselines (no cache)
  // How library baselines are configured: "environment" (the user's variables, as they are) or
  // "best" (the fastest configuration this CPU runs that is correct on every case, chosen once
  // per op by select_library_config and cached).
  std::string library_config = "environment";

  CpuBackendOptions cpu;
  OpenClBackendOptions opencl;
  CudaBackendOptions cuda;
};

// A reference or library time for one timed case, measured like a candidate's.
struct BaselineTiming {
  double median_us = 0;
  double ci95_us = 0;
  std::vector<double> samples_us;
  int64_t calls_per_batch = 0;
  bool cached = false;        // read from the baseline cache instead of measured now
  std::string measured_at;    // ISO 8601 UTC
  // The precision the timing was asked for (EvalOptions::target_ci; 0 when an older cache entry
  // does not say): a cached time asked for less than an evaluation now asks is measured again.
  double target_ci = 0;
};

struct CaseBaselines {
  int case_index = 0;
  std::string label;
  BaselineTiming reference;
  std::optional<BaselineTiming> library;
  std::string library_problem;  // why there is no library time although library.cpp exists
  std::optional<LibraryConfig> library_config;  // what the library ran with
  double roofline_us = 0;
  Roof roof;                    // the roofline model's figures (case_roofline)
  double flops = 0;
  double bytes = 0;
};

// The CPU evaluator: sandboxed g++ build, object inspection, kope-runner in bubblewrap with
// seccomp, verification on every case, timing under the machine-wide timing lock. Fails with
// unavailable when the sandbox (bwrap, user namespaces) or the runner is missing.
Result<std::unique_ptr<Evaluator>> make_cpu_evaluator(const HardwareProfile& hw,
                                                      const EvaluatorOptions& options = {});

// Times the reference and (when the op has one) the library baseline of every timed case
// through the evaluator's path, reusing cached times (cache_dir()/eval/baselines) unless
// options.refresh_baselines. `progress` (may be null) receives one line per measurement.
Result<std::vector<CaseBaselines>> measure_cpu_baselines(
    const HardwareProfile& hw, const spec::OpSpec& op, const EvaluatorOptions& options,
    const EvalOptions& timing, const std::function<void(std::string_view)>& progress = {});

// The same through the named backend ("cpu", "cuda"): its library baseline (the CUDA backend's
// GPU vendor baseline, timed on the device; none for an op without one) and its device's
// roofline.
Result<std::vector<CaseBaselines>> measure_baselines(
    std::string_view backend, const HardwareProfile& hw, const spec::OpSpec& op, const EvaluatorOptions& options,
    const EvalOptions& timing, const std::function<void(std::string_view)>& progress = {});

// The hardware profile whose roofline the named backend's figures use: its device's
// (eval/cuda/gpu_probe.h for cuda), `hw` for the CPU.
Result<HardwareProfile> backend_profile(std::string_view backend, const HardwareProfile& hw, const EvaluatorOptions& options);

// The roofline of case `c` of `op` (HardwareProfile::roofline with the case's flops and bytes,
// the bandwidth read at the working set of the data sets timing alternates, k_rotating_sets x
// bytes; the FP64 peak when a floating-point input or output of the op is f64, the FP32 peak for the
// other float dtypes, f16/bf16 included; the memory roof alone, HardwareProfile::memory_roofline,
// for an op without float tensors). Every figure that is a fraction of the roofline comes from
// here.
Roof case_roofline(const HardwareProfile& hw, const spec::OpSpec& op, const spec::Case& c);

// Whether the floor a time may not beat includes the FP32 compute peak: only for ops whose
// tensors are all f32/f64. Integer, bool, f16 and bf16 ops may run faster than the FP32 FMA
// peak on CPUs with integer dot-product (VNNI) or native half instructions, so their floor is
// the memory one alone, never a false rejection.
bool compute_floor_applies(const spec::OpSpec& op);

// Fills `t`'s roofline fields (roofline_us, fraction_of_roofline, the roof's figures) from
// `roof`, t.median_us and t.ci95_us. `bandwidth_now_gbps` > 0: the memory roof is read at that
// bandwidth instead, measured beside the timing (measure_bandwidth_now), and the profile's
// figure is kept in roofline_gbps_profile. When the time beats the faster of the two roofs by
// more than its CI, sets beyond_roofline and returns the note that says the model is wrong for
// this case: a host slower now than when it was profiled never makes an honest kernel look
// like one that skips work.
std::optional<std::string> apply_roofline(CaseTiming& t, const Roof& roof, const spec::OpSpec& op, double bandwidth_now_gbps = 0);

// The bandwidth measured beside a timing: for a case on the CPU whose roof is memory-bound at a
// working set past the last-level cache (l3_bytes; k_bandwidth_now_min_bytes when the profile
// does not know it, as on VMs that hide their caches). Inside the caches the profile's curve
// stands: it is the probe's best pass, compiled for this CPU, and a median pass of kope's own
// triad read 10-25% below it there (a 2-CPU Zen 5 VM, 4-16 MiB), which would flatter a kernel.
bool bandwidth_now_applies(std::string_view backend, const HardwareProfile& hw, const Roof& roof);
// 32 MiB: past the last-level cache of a Zen core complex or of most client CPUs.
inline constexpr uint64_t k_bandwidth_now_min_bytes = uint64_t{32} << 20;
// Triad passes of each kind per measurement, before the timing and again after it.
inline constexpr int k_bandwidth_now_reps = 3;

// One configuration --library-config best tried for an op.
struct LibraryTrial {
  std::string setting;          // "environment", "auto", "openblas:SkylakeX", "onednn:avx2"
  LibraryConfig config;         // what the library reported running with
  bool correct = false;         // matched the reference on every case
  std::string problem;          // why it was not usable (not in this build, wrong result, ...)
  std::vector<double> median_us;  // per timed case, in the op's timed-case order
  std::vector<double> ci95_us;
  std::vector<double> gflops;     // flops / median per timed case
  double geomean_us = 0;          // geometric mean over the timed cases (what is compared)
};

struct LibrarySelection {
  std::string op;
  std::string library;
  std::vector<LibraryTrial> trials;
  int best = -1;                // index into trials of the fastest correct one, -1 when none
  bool cached = false;          // read from cache_dir()/eval/baselines instead of measured now
  std::string measured_at;
};

// --library-config best for one op with a library baseline: tries the configurations this CPU
// can run (the environment's, the library's own detection with every variable unset, each
// named OpenBLAS core type the build has and the CPU executes, each oneDNN ISA cap), verifies
// each against the reference on every case, times the timed cases (timing.max_seconds_per_case
// each), and keeps the fastest correct one. The result is cached next to the baseline cache and
// reused until options.refresh_baselines. nullopt for an op without a library baseline.
Result<std::optional<LibrarySelection>> select_library_config(
    const HardwareProfile& hw, const spec::OpSpec& op, const EvaluatorOptions& options, const EvalOptions& timing,
    const std::function<void(std::string_view)>& progress = {});

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

// The evaluator for a backend by name (a row of eval/registry.h), configured by the common part
// of `options` and the backend's own. Fails with usage for an unknown name and with
// unavailable, saying why, for a backend that cannot run here (no OpenCL platform, no GPU,
// no CANN toolkit).
Result<std::unique_ptr<Evaluator>> make_evaluator(std::string_view backend, const HardwareProfile& hw,
                                                  const EvaluatorOptions& options = {});

}  // namespace kope::eval
