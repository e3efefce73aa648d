// eval/measure.h — verification and timing of one case in a runner session.
//
// These are the evaluator's steps, shared by candidates, references and library baselines so
// all of them are judged and timed through the same path:
//   - compute_expected: the (trusted) reference fills the expected outputs of a case's data sets;
//   - verify_case: every (input slot, output slot) combination is called once, each call on
//     freshly poisoned outputs, and checked: inputs unchanged, guard canaries intact, outputs
//     equal to the reference's (NaN/Inf positions exact, zero mismatches);
//   - time_case: warm-up and batch calibration, then batches of a random length rotating over
//     the combinations (each output is always written from a different input than last time),
//     with the data permuted between the input slots before each batch and the outputs poisoned
//     and verified after each; stops when the 95% CI of the median is within the target or at
//     the time cap; then the fresh-data check (CaseTimer::fresh_check): verified single calls
//     on never-seen and on seen data sets in interleaved pairs from the same starting state, so
//     results cached by content show as a cost that only never-seen inputs pay.
// Not thread-safe per session.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "eval/compare.h"
#include "eval/session.h"
#include "kope/error.h"
#include "kope/eval.h"
#include "kope/spec.h"

namespace kope::eval {

// 64-byte aligned bytes.
class AlignedBytes {
 public:
  AlignedBytes() = default;
  explicit AlignedBytes(size_t bytes);
  uint8_t* data() const { return m_ptr.get(); }
  size_t size() const { return m_size; }

 private:
  static size_t allocated(size_t bytes);
  struct Free {
    size_t bytes;  // as allocated
    void operator()(uint8_t* p) const;
  };
  std::unique_ptr<uint8_t, Free> m_ptr;
  size_t m_size = 0;
};

// One set of inputs and the reference's outputs for them.
struct DataSet {
  uint64_t seed = 0;
  std::vector<AlignedBytes> inputs;
  std::vector<AlignedBytes> expected;
};

// The data of one case for one evaluation: sets 0 and 1 rotate through the slots; sets 2.. are
// kept unseen until the fresh-data check of a timed case.
struct CaseData {
  int case_index = 0;
  uint64_t evaluation_seed = 0;  // set k's seed is mix(evaluation_seed, k)
  std::vector<DataSet> sets;
  double reference_call_seconds = 0;  // wall time of one reference call (round trip included)
  // Never-seen sets of the fresh-data check's confirmation round, not made yet: sets
  // sets.size() .. sets.size() + deferred_sets - 1, made (TimingPlan::make_deferred) only when a
  // first round flags the kernel, which an honest kernel seldom is. Each costs a generation and
  // a reference call, on the path to every verdict.
  int deferred_sets = 0;
};

constexpr int k_rotating_sets = 2;

// How many cases, over this process, an evaluation took the data of from an earlier evaluation
// with the same data seed (eval/evaluator.cpp keeps it) instead of making it again.
size_t reused_case_data();
// How many deferred never-seen sets (CaseData::deferred_sets) this process made for
// confirmation rounds of the fresh-data check.
size_t deferred_sets_made();

// The (input slot, output slot) cycle every verification and timing batch follows: consecutive
// calls on one output slot always read different input slots.
const std::vector<std::pair<int, int>>& call_cycle();

// Generates the inputs of `set_count` data sets for case `c` from the evaluation seed: sets
// first_set .. first_set + set_count - 1 of that seed (the deferred ones start after the others).
CaseData generate_case_data(const spec::OpSpec& op, const spec::Case& c, uint64_t evaluation_seed, int set_count,
                            int first_set = 0);

// A failure of the kernel under test, as its verdict would read ("case N=64: ...").
struct Violation {
  Verdict verdict = Verdict::runtime_error;
  std::string message;
};

// Fills the expected outputs of every set of `data` by calling the reference in `ref`.
// A reference that fails is kope's problem (the op's reference is broken): an Error.
Status compute_expected(Session& ref, const spec::OpSpec& op, const spec::Case& c, CaseData& data,
                        std::chrono::milliseconds call_timeout);

struct VerifyOutcome {
  CaseCheck check;
  std::optional<Violation> violation;  // set when the kernel broke a rule or the runner died
};

Result<VerifyOutcome> verify_case(Session& s, const spec::OpSpec& op, const spec::Case& c, const CaseData& data,
                                  std::chrono::milliseconds call_timeout, uint64_t poison_seed);

struct TimingPlan {
  double target_ci = 0.02;
  double max_seconds = 10;
  double min_batch_seconds = 0.002;
  double target_batch_seconds = 0.005;
  int min_samples = 10;
  int max_samples = 400;
  std::chrono::milliseconds min_call_timeout{10000};
  bool fresh_check = true;  // candidates: the fresh-data check on the unseen sets
  double fresh_factor = 3;  // ... rejects beyond fresh_factor x the seen cost + slack
  double fresh_slack_seconds = 0.0005;
  // Device backends (CUDA): a sample is the device-event time of the batch's kernels, which the
  // host shim adds up in the status page; the parent's clock around the host-synchronised batch
  // bounds it (device time above wall time, or a call count that disagrees, is a violation).
  bool device_clock = false;
  // Makes a case's deferred never-seen sets (CaseData::deferred_sets), inputs and expected
  // outputs, for a confirmation round. A check that needs them without it is kope's error.
  std::function<Result<std::vector<DataSet>>(const spec::Case&, const CaseData&)> make_deferred;
};

struct TimingOutcome {
  double median_s = 0;
  double ci95_s = 0;
  std::vector<double> samples_s;  // per call, one per batch
  int64_t calls_per_batch = 0;
  double overhead_s = 0;          // median round trip of an empty command (subtracted)
  double fresh_s = 0;             // median call on an unseen set: CPU time of the runner's
                                  // threads when known, else wall time (0 without the check)
  // Per batch: the share of the runner's runnable time spent waiting for a CPU (other load on
  // the machine), from the scheduler's statistics; empty when unavailable.
  std::vector<double> contention;
  // The most of the runner's threads that ran in one batch (the kernel's threads; 0: unknown).
  int threads = 0;
  // The share of the capacity of the runner's CPUs that other work used during the batches
  // (outside_load_seen), from the machine's CPU accounting less the runner's own CPU time.
  double outside_load = 0;
  // Under outside load, the median and CI use the batches with contention below
  // k_clean_contention when there are enough of them (samples_used of samples_s); all batches
  // otherwise, and always on an otherwise idle machine (the waits are then the kernel's own).
  size_t samples_used = 0;
  // With device_clock: the parent's wall time per call (round trip subtracted), one per batch.
  std::vector<double> wall_samples_s;
  // Other load moved the figures, or may have: other work ran beside the batches
  // (outside_load_seen) and the median and CI had to include batches that
  // waited for a CPU (fewer undisturbed batches than the minimum, and more than
  // k_disturbed_share of the batches used waited), or most batches waited k_busy_contention or
  // more, so even the clean few ran on a busy machine (caches, memory bandwidth, clocks shared).
  bool disturbed = false;
  std::optional<Violation> violation;
};

// A batch that waited for a CPU less than this share of its runnable time counts as clean.
constexpr double k_clean_contention = 0.02;
// A timing whose statistics use disturbed batches is marked disturbed beyond this share of them.
constexpr double k_disturbed_share = 0.25;
// A batch that waited this share of its runnable time or more ran on a busy machine.
constexpr double k_busy_contention = 0.10;

// Times one kernel on one case, batch by batch, so several kernels can be timed in alternation
// (time_group) and see the same machine conditions. Not thread-safe.
class CaseTimer {
 public:
  CaseTimer(Session& s, const spec::OpSpec& op, const spec::Case& c, const CaseData& data, const TimingPlan& plan,
            uint64_t rng_seed);
  ~CaseTimer();
  CaseTimer(const CaseTimer&) = delete;
  CaseTimer& operator=(const CaseTimer&) = delete;

  // Shared buffers: this timer's session runs on the buffers of `leader`'s session
  // (Session::start's buffers_of), and on its data: it takes the leader's input canary and the
  // places of its data sets and never writes the inputs itself (the leader moves the sets, for
  // both kernels), and both timers poison every output slot before each batch (the other
  // kernel wrote them). Two kernels compared side by side then run on the same physical pages:
  // on separate pages, where their cache sets fall differed by a few percent between runners
  // (a kernel against itself, all on one CPU: 1.013x [1.006, 1.021]). Call before prepare(),
  // after the leader's; the leader must outlive this timer, whose end ends the sharing.
  void share_data_of(CaseTimer& leader);
  // On shared buffers, the leader's: moves the data sets as sample() does before a batch of its
  // own (always the first time, then at random), for both kernels. Called before each pair's
  // first batch, so the kernel that meets freshly written inputs is the pair's first, whichever
  // that is (alternating), not always the leader.
  void move_shared_data();
  // Maps the case, measures the round-trip overhead, warms up and sizes the batch. Each step
  // returns false when the kernel failed (see outcome().violation).
  Result<bool> prepare();
  // Runs one batch and records one sample. With `round_cpu` (same-CPU rounds, time_group): when
  // it holds a CPU, the runner's calling thread is kept there for the batch
  // (Session::keep_calling_thread_on; as before when it cannot be); when empty, the thread is
  // kept where it last ran, and `round_cpu` receives the CPU the batch ended on, for the
  // round's later batches.
  Result<bool> sample(std::optional<int>* round_cpu = nullptr);
  // Takes up this timer's timing again after the session ran other cases: maps the case and
  // writes its inputs again, keeping the batch size, the overhead and the samples (a prepared
  // timer only). False when the kernel failed.
  Result<bool> resume();
  // Enough samples, and the CI of the median within the target.
  bool converged() const;
  size_t sample_count() const;
  // Pairs of verified single calls, one on a never-seen data set (sets 2..) and one on a seen
  // one, in alternating order, each after the same warm-up call and a fresh write of its inputs;
  // a violation when the median ratio over the pairs of the fresh call's floor (its cost less
  // what waiting for a CPU explains, fresh_call_cost) to the seen call's cost (the least of a
  // few tries) exceeds plan.fresh_factor (plus the slack) in CPU time and in wall time, in a
  // first round and in a confirmation round on other never-seen sets (one round when there is
  // one set; judge_fresh_round). The message gives the numbers.
  Result<bool> fresh_check();
  // The median, CI and samples so far.
  TimingOutcome outcome() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> m;
};

// The cost of one single call of the fresh-data check, from the runner's per-thread scheduler
// statistics before and after it and the call's wall time (round trip subtracted). cpu: the
// CPU time of its threads; wait: their time runnable but waiting for a CPU; cpu_floor: the CPU
// time less, per thread, the other threads' waits (a thread of a parallel kernel spins while a
// teammate waits, so that much of its time may be the load's doing, not the kernel's);
// wall_floor: the wall time less the waits. Without scheduler statistics (have_cpu false)
// everything is the wall time.
struct FreshCallCost {
  double cpu = 0, wall = 0, wait = 0;
  double cpu_floor = 0, wall_floor = 0;
};
FreshCallCost fresh_call_cost(const Session::CpuTimes& before, const Session::CpuTimes& after, double wall, bool have_cpu);

// One pair of the fresh-data check: the never-seen call and the seen call.
struct FreshPair {
  FreshCallCost fresh, seen;
};
// One round's judgement: the medians over its pairs of the fresh floors and the seen costs, and
// of their ratios; flagged when both ratios exceed `factor` and both differences `slack_seconds`.
struct FreshRound {
  bool flagged = false;
  double cpu_ratio = 0, wall_ratio = 0;
  double fresh_cpu = 0, seen_cpu = 0, fresh_wall = 0, seen_wall = 0;
  size_t pairs = 0;
};
FreshRound judge_fresh_round(const std::vector<FreshPair>& pairs, double factor, double slack_seconds);
// The check's verdict over its rounds: a cheat when `needed` rounds ran, every one flagged, and
// in every one the never-seen calls' wall floor exceeds `factor` times the batches' median per
// call (what a kept result could flatter; 0 before the batches are timed: the rounds decide).
bool fresh_check_rejects(const std::vector<FreshRound>& rounds, size_t needed, double factor, double batch_median_s);

// Times the kernels of `timers` (already prepared) in alternation, one batch each in turn,
// until every one has converged, or the time cap (plan.max_seconds per timer) has passed and
// each has at least 3 samples. Stops early when one fails.
//
// Same-CPU rounds: the batches of one round (and both batches of a pair of the comparison with
// the incumbent) run on one CPU: the calling thread of the round's first runner is kept where it
// last ran, and every later runner's there, for its batch, with the runner's other threads on
// the other CPUs (Session::keep_calling_thread_on). Left to the scheduler, each runner stays on
// the CPU it woke on for the whole timing, and two CPUs of a virtual machine differ: one is the
// parent's (it wrote the inputs and poisoned the outputs just before), or its host core is
// shared. Measured on a 2-CPU VM, a kernel timed against itself in separate runners came out
// 0.85x to 1.32x with intervals that excluded 1; with the runners on one CPU, 0.99x to 1.01x.
Status time_group(const std::vector<CaseTimer*>& timers, const TimingPlan& plan);

// prepare + time_group of one + fresh_check (when plan.fresh_check).
Result<TimingOutcome> time_case(Session& s, const spec::OpSpec& op, const spec::Case& c, const CaseData& data,
                                const TimingPlan& plan, uint64_t rng_seed);

// Another kernel timed in the same evaluation on the same CPUs, and its median wait share.
struct WaitComparator {
  std::string name;  // "the incumbent", "the reference"
  double contention = 0;
};
// The note on a kernel's waits for a CPU without outside load (not outside_load_seen), which
// are its own doing and count in its time. Shown (a value) only when it waited at least
// k_busy_contention and clearly more than the least-waiting of `others` (by 5 points and half
// as much again): then the kernel causes them, and the note says what would lower them, from the
// `threads` it ran in a batch (0: unknown) and the `cpus` CPUs: more threads than CPUs wait for
// each other; no more, and they wait for a CPU to wake each time one of them slept (between
// parallel regions, or idle inside one). nullopt otherwise, and without others: a wait every
// kernel shows on this machine is nothing the kernel can change.
std::optional<std::string> own_waits_note(std::string_view case_name, double contention, double outside_load,
                                          const std::vector<WaitComparator>& others, int cpus, int threads = 0);

// How many of a runner's threads ran between two readings of its CPU times (the threads of a
// batch: the kernel's, and the runner's calling thread).
int threads_that_ran(const Session::CpuTimes& before, const Session::CpuTimes& after);

// Waits until the outside load on this process's CPUs (what everything but this process used of
// them, from /proc/stat over 250 ms windows) is below k_outside_load, or `max_seconds` have
// passed; returns the last window's load. At least one window.
double wait_until_quiet(double max_seconds);

// "y[3, 17]: got 0.25, expected 0.5" for the first mismatching element of output `o`.
std::string describe_mismatch(const spec::OpSpec& op, const spec::Case& c, size_t o, const CompareResult& r);

}  // namespace kope::eval
