// The fresh-data check's arithmetic (measure.h: fresh_call_cost, judge_fresh_round) on calls
// recorded from real evaluations.
#include <gtest/gtest.h>

#include "eval/measure.h"

namespace kope::eval {
namespace {

// Scheduler statistics of a runner: per thread (tid, run ms, wait ms).
Session::CpuTimes times(std::initializer_list<std::tuple<pid_t, double, double>> threads) {
  Session::CpuTimes t;
  for (auto [tid, run_ms, wait_ms] : threads) {
    auto run = static_cast<uint64_t>(run_ms * 1e6), wait = static_cast<uint64_t>(wait_ms * 1e6);
    t.threads.push_back({tid, run, wait});
    t.run_ns += run;
    t.wait_ns += wait;
  }
  return t;
}

// A call as the old check counted it: its full cost, also for a never-seen call.
FreshCallCost raw(FreshCallCost c) {
  c.cpu_floor = c.cpu;
  c.wall_floor = c.wall;
  return c;
}

FreshCallCost seen(double cpu_ms, double wall_ms) {
  FreshCallCost c;
  c.cpu = c.cpu_floor = cpu_ms * 1e-3;
  c.wall = c.wall_floor = wall_ms * 1e-3;
  return c;
}

TEST(FreshCheck, CallCostSubtractsWaitsAndTheSpinningTheyAllow) {
  // Two threads: the first computes its half (0.15 ms) and spins 7.4 ms at the barrier while
  // the second waits 56 ms for a CPU before computing its half.
  Session::CpuTimes before = times({{100, 10, 1}, {101, 20, 2}});
  Session::CpuTimes after = times({{100, 10 + 7.55, 1}, {101, 20 + 0.15, 2 + 56}});
  FreshCallCost c = fresh_call_cost(before, after, 27.6e-3, true);
  EXPECT_NEAR(c.cpu, 7.7e-3, 1e-6);
  EXPECT_NEAR(c.wait, 56e-3, 1e-6);
  EXPECT_NEAR(c.cpu_floor, 0.15e-3, 1e-6);  // the first thread's time is all explainable by the wait
  EXPECT_EQ(c.wall_floor, 0.0);
  // A thread that started during the call counts from zero; without statistics, wall time only.
  FreshCallCost n = fresh_call_cost(times({{100, 1, 0}}), times({{100, 2, 0}, {102, 0.5, 0}}), 1.6e-3, true);
  EXPECT_NEAR(n.cpu, 1.5e-3, 1e-6);
  EXPECT_NEAR(n.cpu_floor, 1.5e-3, 1e-6);
  FreshCallCost w = fresh_call_cost({}, {}, 2e-3, false);
  EXPECT_EQ(w.cpu, 2e-3);
  EXPECT_EQ(w.cpu_floor, 2e-3);
}

// Regression (issue 12): honest_matmul_tiled_omp (0.3 ms per call, two OpenMP threads) beside two
// CPU hogs, both rounds as recorded: its never-seen calls happened to wait for a CPU, some seen
// calls did not, and the check counted the waiting against the kernel ("rejected": 7.84 ms vs
// 3.97 ms of CPU time, median ratios 13x and 50x).
TEST(FreshCheck, AnHonestParallelKernelWhoseFreshCallsWaitedIsNotFlagged) {
  auto fresh = [](double cpu_ms, double wall_ms, double wait_ms) {
    // Thread 0 computed its half and spun for the rest; thread 1 waited, then computed its half.
    double half = 0.15;
    return fresh_call_cost(times({{7, 0, 0}, {8, 0, 0}}), times({{7, cpu_ms - half, 0}, {8, half, wait_ms}}), wall_ms * 1e-3, true);
  };
  std::vector<FreshPair> round1 = {{fresh(7.622, 27.641, 55.999), seen(7.630, 27.676)}, {fresh(8.052, 31.736, 51.675), seen(0.316, 0.323)}};
  std::vector<FreshPair> round2 = {{fresh(8.015, 35.769, 55.771), seen(0.267, 0.264)}, {fresh(5.335, 23.725, 46.388), seen(7.990, 31.645)}};
  const double factor = 3, slack = 0.0005;
  // Counted in full, as the old check did, both rounds flag it: a false rejection.
  auto as_old = [](std::vector<FreshPair> r) {
    for (auto& p : r) p.fresh = raw(p.fresh);
    return r;
  };
  EXPECT_TRUE(judge_fresh_round(as_old(round1), factor, slack).flagged);
  EXPECT_TRUE(judge_fresh_round(as_old(round2), factor, slack).flagged);
  // Counted by their floors, neither does.
  EXPECT_FALSE(judge_fresh_round(round1, factor, slack).flagged);
  EXPECT_FALSE(judge_fresh_round(round2, factor, slack).flagged);
}

// cache_by_content_global beside two CPU hogs, as recorded: its never-seen calls compute on one
// thread (6.2 ms) and wait up to 14 ms for a CPU; its seen calls copy a cached result.
TEST(FreshCheck, ACacheIsFlaggedWhateverItsCallsWaited) {
  auto fresh = [](double cpu_ms, double wall_ms, double wait_ms) {
    return fresh_call_cost(times({{7, 0, 0}, {8, 0, 0}}), times({{7, cpu_ms, wait_ms}, {8, 0, 0}}), wall_ms * 1e-3, true);
  };
  std::vector<FreshPair> round1 = {{fresh(6.538, 18.558, 12.010), seen(0.025, 0.024)}, {fresh(6.549, 15.754, 4.008), seen(0.023, 0.019)}};
  std::vector<FreshPair> round2 = {{fresh(6.203, 6.211, 0.007), seen(0.024, 0.018)}, {fresh(6.052, 19.719, 14.145), seen(0.020, 0.013)}};
  FreshRound r1 = judge_fresh_round(round1, 3, 0.0005), r2 = judge_fresh_round(round2, 3, 0.0005);
  EXPECT_TRUE(r1.flagged);
  EXPECT_TRUE(r2.flagged);
  EXPECT_GT(r1.cpu_ratio, 100);
  EXPECT_NEAR(r1.fresh_cpu, 6.54e-3, 1e-5);  // a single thread's CPU time is its own work
  // Slower seen calls than that hide nothing: within the factor, no flag.
  std::vector<FreshPair> close = {{fresh(6.2, 6.3, 0), seen(2.5, 2.6)}};
  EXPECT_FALSE(judge_fresh_round(close, 3, 0.0005).flagged);
}

// The verdict over the rounds. As recorded in a full test run beside other tests' kernels: an
// honest tiled OpenMP matmul (M=N=K=192) whose never-seen calls took 1.43 ms of wall floor against
// 0.25 ms for the least of its seen tries, both rounds flagged, while its timed batches ran at
// 12.4 ms per call: the load, not a kept result, set its times. A cache's batches run on what it
// kept (cache_by_content_global above: 0.02 ms per call against 6 ms never-seen).
TEST(FreshCheck, AKernelIsACheatOnlyWhereAKeptResultCouldFlatterItsBatches) {
  FreshRound honest;
  honest.flagged = true;
  honest.fresh_wall = 1.43e-3;
  honest.seen_wall = 0.25e-3;
  EXPECT_FALSE(fresh_check_rejects({honest, honest}, 2, 3, 12.4e-3));
  EXPECT_TRUE(fresh_check_rejects({honest, honest}, 2, 3, 0.25e-3));  // quiet batches: the pairs stand
  FreshRound cache;
  cache.flagged = true;
  cache.fresh_wall = 6.2e-3;
  cache.seen_wall = 0.02e-3;
  EXPECT_TRUE(fresh_check_rejects({cache, cache}, 2, 3, 0.02e-3));
  EXPECT_TRUE(fresh_check_rejects({cache, cache}, 2, 3, 1.5e-3));  // batches slowed 75x by load: still far below
  EXPECT_TRUE(fresh_check_rejects({cache}, 1, 3, 0));              // before the batches: the rounds decide
  // A round not flagged, or a confirmation round missing, clears it.
  FreshRound clear = cache;
  clear.flagged = false;
  EXPECT_FALSE(fresh_check_rejects({cache, clear}, 2, 3, 0.02e-3));
  EXPECT_FALSE(fresh_check_rejects({cache}, 2, 3, 0.02e-3));
  EXPECT_FALSE(fresh_check_rejects({}, 0, 3, 0));
}

// The note on a kernel's own waits for a CPU (issue 29): on a 2-core VM every kernel waits
// ~30%; the note appears only when the kernel waits clearly more than a kernel timed beside it
// on the same CPUs, and then says what would lower the waits.
TEST(OwnWaits, NotedOnlyWhenTheKernelWaitsClearlyMoreThanItsNeighbours) {
  // Waits every kernel shows here: nothing to act on.
  EXPECT_FALSE(own_waits_note("case N=4096", 0.33, 0.0, {{"the incumbent", 0.30}}, 2));
  EXPECT_FALSE(own_waits_note("case N=4096", 0.33, 0.0, {{"the reference", 0.27}, {"the incumbent", 0.36}}, 2));
  // No kernel beside it to tell the machine's waits from the kernel's: no note.
  EXPECT_FALSE(own_waits_note("case N=4096", 0.33, 0.0, {}, 2));
  // Under outside load the waits are not its own (the disturbed note covers them).
  EXPECT_FALSE(own_waits_note("case N=4096", 0.33, 0.3, {{"the incumbent", 0.02}}, 2));
  // Small waits: nothing worth a line.
  EXPECT_FALSE(own_waits_note("case N=4096", 0.06, 0.0, {{"the incumbent", 0.0}}, 2));
  auto note = own_waits_note("case N=4096", 0.35, 0.01, {{"the reference", 0.04}, {"the incumbent", 0.20}}, 2);
  ASSERT_TRUE(note);
  EXPECT_NE(note->find("case N=4096: the kernel waited for a CPU 35% of its runnable time, the reference 4% in the same evaluation"),
            std::string::npos) << *note;
  EXPECT_NE(note->find("more threads than the 2 CPUs"), std::string::npos) << *note;
  EXPECT_NE(note->find("would lower them"), std::string::npos) << *note;
  // Knowing the kernel's threads, the note names the one cause that applies to it.
  auto crowded = own_waits_note("case N=4096", 0.35, 0.0, {{"the reference", 0.04}}, 2, 4);
  ASSERT_TRUE(crowded);
  EXPECT_NE(crowded->find("It ran 4 threads on the 2 CPUs: no more threads than CPUs would lower them"), std::string::npos) << *crowded;
  EXPECT_EQ(crowded->find("wake-ups"), std::string::npos) << *crowded;
  auto waking = own_waits_note("case N=4096", 0.35, 0.0, {{"the reference", 0.04}}, 2, 2);
  ASSERT_TRUE(waking);
  EXPECT_NE(waking->find("It ran 2 threads on the 2 CPUs, so the waits are wake-ups"), std::string::npos) << *waking;
  EXPECT_EQ(waking->find("more threads than"), std::string::npos) << *waking;
}

// The threads of a batch: those whose CPU time grew between the two readings, matched by id
// (a thread that appeared meanwhile counts from zero).
TEST(OwnWaits, ThreadsThatRanAreThoseWhoseCpuTimeGrew) {
  Session::CpuTimes before, after;
  before.threads = {{101, 500, 0}, {102, 300, 0}, {103, 0, 0}};
  after.threads = {{103, 0, 0}, {101, 900, 10}, {102, 300, 0}, {104, 50, 0}};
  EXPECT_EQ(threads_that_ran(before, after), 2);
  EXPECT_EQ(threads_that_ran(after, after), 0);
}

// The re-time's wait for a quiet machine reads at least one 250 ms window of /proc/stat and
// returns that window's outside load, a share; with no time to wait it returns after one window.
TEST(OwnWaits, WaitUntilQuietReadsTheOutsideLoad) {
  auto t0 = std::chrono::steady_clock::now();
  double load = wait_until_quiet(0);
  double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_GE(load, 0.0);
  EXPECT_LE(load, 1.0);
  EXPECT_GE(waited, 0.25);
  EXPECT_LT(waited, 5.0);
}

}  // namespace
}  // namespace kope::eval
