#include "eval/measure.h"

#include <sched.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <map>
#include <mutex>
#include <new>
#include <random>
#include <thread>

#include "eval/compare.h"
#include "eval/stats.h"
#include "spec/generate.h"
#include "util/strings.h"
#include "util/system.h"

namespace kope::eval {

namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

uint64_t mix(uint64_t a, uint64_t b) {
  uint64_t z = a + 0x9e3779b97f4a7c15ULL * (b + 1);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

bool trace_on() {
  static const bool on = std::getenv("KOPE_EVAL_TRACE") != nullptr;
  return on;
}

size_t page_size() { return static_cast<size_t>(::sysconf(_SC_PAGESIZE)); }

std::string fmt_seconds(double s) {
  if (s < 1e-3) return fmt::format("{:.3g} µs", s * 1e6);
  if (s < 1) return fmt::format("{:.3g} ms", s * 1e3);
  return fmt::format("{:.3g} s", s);
}

Violation from_failure(const Session& s) {
  if (s.failure()) return Violation{s.failure()->verdict, s.failure()->message};
  return Violation{Verdict::runtime_error, "the runner failed"};
}

// The bytes [from, to) of part `part` of `parts` of a buffer of `bytes` bytes.
std::pair<uint64_t, uint64_t> part_range(uint64_t bytes, int part, int parts) {
  auto at = [&](int k) { return bytes * static_cast<uint64_t>(k) / static_cast<uint64_t>(parts); };
  return {at(part), at(part + 1)};
}

// Part `part` of `parts` of copying `set` into the inputs of `slot` (the data only; see
// finish_inputs). The parts together copy every byte once.
void copy_inputs(Arena& a, const CaseLayout& l, int slot, const DataSet& set, int part, int parts) {
  for (size_t t = 0; t < set.inputs.size(); ++t) {
    const Placement& p = l.inputs[static_cast<size_t>(slot)][t];
    auto [from, to] = part_range(p.data_bytes, part, parts);
    if (to > from) std::memcpy(a.input(p) + from, set.inputs[t].data() + from, to - from);
  }
}

// After copy_inputs: the inputs' canaries of `slot`, and a new input generation.
void finish_inputs(Arena& a, const CaseLayout& l, int slot, size_t tensors, uint64_t canary) {
  for (size_t t = 0; t < tensors; ++t) a.write_canary(false, l.inputs[static_cast<size_t>(slot)][t], mix(canary, t));
  a.status()->input_generation = a.status()->input_generation + 1;
}

// Part `part` of `parts` of poisoning every output of `slot` with the pattern of `seed`: the
// parts together fill every output; part 0 also writes the canaries.
void poison_outputs_part(Arena& a, const CaseLayout& l, int slot, uint64_t seed, int part, int parts) {
  const auto& outs = l.outputs[static_cast<size_t>(slot)];
  for (size_t t = 0; t < outs.size(); ++t) {
    fill_pattern_part(a.output(outs[t]), outs[t].data_bytes, mix(seed, t), part, parts);
    if (part == 0) a.write_canary(true, outs[t], mix(seed, t + 1000));
  }
}

// Checks that the kernel left the inputs and every guard canary alone.
// `input_contents` false: the inputs' canaries only, not their contents (see run_batch).
// Part `part` of `parts`: that part of every input's contents; the canaries in part 0.
std::optional<Violation> check_integrity(const Arena& a, const spec::OpSpec& op, const CaseLayout& l,
                                         const std::vector<const DataSet*>& slot_data, uint64_t in_canary,
                                         const std::vector<uint64_t>& out_seeds, bool input_contents = true, int part = 0,
                                         int parts = 1) {
  for (int s = 0; s < l.in_slots; ++s) {
    for (size_t t = 0; t < op.inputs.size(); ++t) {
      const Placement& p = l.inputs[static_cast<size_t>(s)][t];
      const DataSet* d = slot_data[static_cast<size_t>(s)];
      auto [from, to] = part_range(p.data_bytes, part, parts);
      if (input_contents && d != nullptr && to > from && std::memcmp(a.input(p) + from, d->inputs[t].data() + from, to - from) != 0) {
        return Violation{Verdict::rejected, fmt::format("modified input {} (inputs are read-only)", op.inputs[t].name)};
      }
      if (part != 0) continue;
      int64_t off = 0;
      if (!a.check_canary(false, p, mix(in_canary, t), &off)) {
        return Violation{Verdict::rejected, fmt::format("wrote beside input {} (byte {})", op.inputs[t].name, off)};
      }
    }
  }
  for (int s = 0; s < l.out_slots && part == 0; ++s) {
    for (size_t t = 0; t < op.outputs.size(); ++t) {
      const Placement& p = l.outputs[static_cast<size_t>(s)][t];
      int64_t off = 0;
      if (!a.check_canary(true, p, mix(out_seeds[static_cast<size_t>(s)], t + 1000), &off)) {
        return Violation{Verdict::runtime_error,
                         off < 0 ? fmt::format("wrote before the start of output {} (byte {})", op.outputs[t].name, off)
                                 : fmt::format("wrote past the end of output {} (byte {} of a {}-byte buffer)", op.outputs[t].name, off, p.data_bytes)};
      }
    }
  }
  return std::nullopt;
}

struct OutputCheck {
  bool ok = true;
  double max_abs_err = 0;
  std::string first_mismatch;
};

// Part `part` of `parts` of comparing every output of `slot` with `expected`: per output, the
// result over that part of its elements (merge_compare joins the parts).
std::vector<CompareResult> compare_outputs_part(const Arena& a, const spec::OpSpec& op, const spec::Case& c, const CaseLayout& l,
                                                int slot, const DataSet& expected, int part, int parts) {
  std::vector<CompareResult> results;
  for (size_t o = 0; o < op.outputs.size(); ++o) {
    const Placement& p = l.outputs[static_cast<size_t>(slot)][o];
    const auto& out = op.outputs[o];
    results.push_back(compare_tensor_part(out.dtype, a.output(p), expected.expected[o].data(), op.element_count(out, c),
                                          op.tolerance_for(out, c), part, parts));
  }
  return results;
}

// The judgement of the outputs of `slot` from their whole comparison (compare_outputs_part).
OutputCheck describe_outputs(const Arena& a, const spec::OpSpec& op, const spec::Case& c, const CaseLayout& l, int slot,
                             const std::vector<CompareResult>& results, uint64_t poison_seed) {
  OutputCheck oc;
  for (size_t o = 0; o < op.outputs.size(); ++o) {
    const Placement& p = l.outputs[static_cast<size_t>(slot)][o];
    const auto& out = op.outputs[o];
    const CompareResult& r = results[o];
    if (std::isfinite(r.max_abs_err)) oc.max_abs_err = std::max(oc.max_abs_err, r.max_abs_err);
    if (!r.ok && oc.ok) {
      oc.ok = false;
      oc.first_mismatch = describe_mismatch(op, c, o, r);
      size_t esize = spec::dtype_size(out.dtype);
      if (r.first && matches_pattern_at(a.output(p), r.first->index * esize, esize, mix(poison_seed, o))) {
        oc.first_mismatch += " (never written: it still holds the poison pattern)";
      }
    }
  }
  return oc;
}

// The whole comparison of every output from its parts' results, in part order.
std::vector<CompareResult> merge_parts(const std::vector<std::vector<CompareResult>>& parts) {
  std::vector<CompareResult> whole = parts.front();
  for (size_t k = 1; k < parts.size(); ++k) {
    for (size_t o = 0; o < whole.size(); ++o) merge_compare(whole[o], parts[k][o]);
  }
  return whole;
}

// After a batch the runner's threads may go on running: OpenMP runtimes and OpenBLAS spin for
// the next call before they sleep (libgomp a few ms, OpenBLAS's pthread build 2^28 cycles by
// default: 40 ms of CPU measured on a Zen 3 core). The next batch is often another kernel's, in
// another runner; it would share the CPUs with those spinning threads and wait for one: kope's
// own baselines disturbing the candidate's timing (and the candidate's runtime the baselines').
// So a batch ends only when its runner has gone idle: under 5% of a CPU over a millisecond, or
// after k_settle_cap (a runner that never idles is then the next batch's outside load).
constexpr std::chrono::milliseconds k_settle_cap{250};
// From this many bytes of inputs and outputs (all slots) a case's work between batches runs on
// two threads (CaseTimer::Impl::both); below it a thread costs more than it saves.
constexpr uint64_t k_side_by_side_bytes = 8ull << 20;

void wait_until_idle(const Session& s, Session::CpuTimes last) {
  auto start = Clock::now();
  auto prev = start;
  for (;;) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    auto now = Clock::now();
    Session::CpuTimes cur = s.cpu_times();
    double ran = static_cast<double>(cur.run_ns - std::min(cur.run_ns, last.run_ns));
    double wall = static_cast<double>(std::chrono::duration_cast<std::chrono::nanoseconds>(now - prev).count());
    if (cur.threads.empty() || ran < 0.05 * wall || now - start >= k_settle_cap) return;
    last = cur;
    prev = now;
  }
}

// Whether the work around a case's calls (writing inputs, poisoning outputs, checking both)
// runs on two threads: from k_side_by_side_bytes of buffers, on a machine with two CPUs or more.
// The runner is idle meanwhile, and the timing lock keeps other kope work off the CPUs.
bool side_by_side(const CaseLayout& l) {
  return l.in_bytes + l.out_bytes >= k_side_by_side_bytes && std::thread::hardware_concurrency() > 1;
}

// Runs fn(part, parts) for every part: two parts side by side when `two`, else one. An
// exception from the second thread is rethrown here, as if it had run on this one.
template <class F>
void run_parts(bool two, F&& fn) {
  if (!two) {
    fn(0, 1);
    return;
  }
  std::exception_ptr thrown;
  std::thread t([&] {
    try {
      fn(1, 2);
    } catch (...) {
      thrown = std::current_exception();
    }
  });
  try {
    fn(0, 2);
  } catch (...) {
    t.join();
    throw;
  }
  t.join();
  if (thrown) std::rethrow_exception(thrown);
}

// The same steps on big buffers, in parts side by side (run_parts); the results are the whole
// steps' (the parts' findings merged in order).
void load_inputs_split(Arena& a, const CaseLayout& l, int slot, const DataSet& set, uint64_t canary) {
  run_parts(side_by_side(l), [&](int part, int parts) { copy_inputs(a, l, slot, set, part, parts); });
  finish_inputs(a, l, slot, set.inputs.size(), canary);
}

uint64_t poison_outputs_split(Arena& a, const CaseLayout& l, int slot, uint64_t seed) {
  run_parts(side_by_side(l), [&](int part, int parts) { poison_outputs_part(a, l, slot, seed, part, parts); });
  return seed;
}

// After one call: check_integrity, and the comparison of the outputs of `slot` with `expected`
// (both always run; a caller reports the integrity violation first).
struct CallCheck {
  std::optional<Violation> integrity;
  OutputCheck outputs;
};
CallCheck check_call_split(const Arena& a, const spec::OpSpec& op, const spec::Case& c, const CaseLayout& l,
                           const std::vector<const DataSet*>& slot_data, uint64_t in_canary, const std::vector<uint64_t>& out_seeds,
                           int slot, const DataSet& expected) {
  const bool two = side_by_side(l);
  std::optional<Violation> integrity[2];
  std::vector<std::vector<CompareResult>> compared(two ? 2 : 1);
  run_parts(two, [&](int part, int parts) {
    integrity[part] = check_integrity(a, op, l, slot_data, in_canary, out_seeds, true, part, parts);
    compared[static_cast<size_t>(part)] = compare_outputs_part(a, op, c, l, slot, expected, part, parts);
  });
  CallCheck r;
  r.integrity = integrity[0] ? integrity[0] : integrity[1];
  r.outputs = describe_outputs(a, op, c, l, slot, merge_parts(compared), out_seeds[static_cast<size_t>(slot)]);
  return r;
}

// The CPU time the CPUs a runner may use have spent busy (user, system, interrupts, and the
// hypervisor's steal), from /proc/stat in clock ticks. Less the runner's own CPU time over the
// same span it is what everything else took from those CPUs: the outside load that explains a
// wait, where a wait on an otherwise idle machine is the kernel's own (an idle CPU waking up,
// more threads than CPUs).
struct CpuBusy {
  double busy_s = 0;
  int cpus = 0;
};

CpuBusy cpu_busy(pid_t pid) {
  CpuBusy b;
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  bool have_set = pid > 0 && ::sched_getaffinity(pid, sizeof allowed, &allowed) == 0;
  FILE* f = std::fopen("/proc/stat", "r");
  if (!f) return b;
  static const double tick = 1.0 / static_cast<double>(::sysconf(_SC_CLK_TCK));
  char line[512];
  while (std::fgets(line, sizeof line, f)) {
    int cpu = -1;
    unsigned long long user = 0, nice = 0, sys = 0, idle = 0, iowait = 0, irq = 0, softirq = 0, steal = 0;
    if (std::sscanf(line, "cpu%d %llu %llu %llu %llu %llu %llu %llu %llu", &cpu, &user, &nice, &sys, &idle, &iowait, &irq,
                    &softirq, &steal) != 9) {
      continue;  // the summary line ("cpu  ..."), or not a CPU line
    }
    if (have_set && (cpu >= CPU_SETSIZE || !CPU_ISSET(cpu, &allowed))) continue;
    b.busy_s += static_cast<double>(user + nice + sys + irq + softirq + steal) * tick;
    ++b.cpus;
  }
  std::fclose(f);
  return b;
}

}  // namespace

std::optional<std::string> own_waits_note(std::string_view case_name, double contention, double outside_load,
                                          const std::vector<WaitComparator>& others, int cpus, int threads) {
  if (outside_load_seen(outside_load) || contention < k_busy_contention || others.empty()) return std::nullopt;
  const WaitComparator* least = &others.front();
  for (const auto& o : others) {
    if (o.contention < least->contention) least = &o;
  }
  if (!(contention >= least->contention + 0.05 && contention >= 1.5 * least->contention)) return std::nullopt;
  std::string cpu_text = cpus > 0 ? fmt::format("the {} CPUs", cpus) : std::string("the CPUs");
  std::string head = fmt::format("{}: the kernel waited for a CPU {:.0f}% of its runnable time, {} {:.0f}% in the same evaluation, "
                                 "while other work used {:.0f}% of the CPUs: the waits are the kernel's own and count in its time",
                                 case_name, 100 * contention, least->name, 100 * least->contention, 100 * outside_load);
  if (threads > 0 && cpus > 0 && threads > cpus) {
    return fmt::format("{}. It ran {} threads on {}: no more threads than CPUs would lower them", head, threads, cpu_text);
  }
  if (threads > 0 && cpus > 0) {
    // No more threads than CPUs: each wait is a thread that slept (its runtime spins briefly,
    // then sleeps) and waited for a CPU to wake (on a virtual machine, for the host) when work came.
    return fmt::format("{}. It ran {} thread{} on {}, so the waits are wake-ups: a thread that slept, between parallel regions "
                       "or idle inside one, waits for a CPU each time work comes. Fewer parallel regions per call, and the work "
                       "split so that every thread finishes together, would lower them; a call too short to be worth waking "
                       "another thread for runs faster on one",
                       head, threads, threads == 1 ? "" : "s", cpu_text);
  }
  return fmt::format("{}. They come from running more threads than {} or from threads that sleep and wake between short "
                     "parallel regions; no more threads than CPUs and fewer, longer parallel regions (one parallel region "
                     "around the loops) would lower them",
                     head, cpu_text);
}

int threads_that_ran(const Session::CpuTimes& before, const Session::CpuTimes& after) {
  int n = 0;
  for (const auto& a : after.threads) {
    auto b = std::find_if(before.threads.begin(), before.threads.end(), [&](const auto& x) { return x.tid == a.tid; });
    if (a.run_ns > (b == before.threads.end() ? 0 : b->run_ns)) ++n;
  }
  return n;
}

double wait_until_quiet(double max_seconds) {
  constexpr auto k_window = std::chrono::milliseconds(250);
  auto start = Clock::now();
  double load = 0;
  for (;;) {
    auto own = [] {
      timespec ts{};
      ::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
      return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
    };
    CpuBusy b0 = cpu_busy(::getpid());
    double own0 = own();
    auto t0 = Clock::now();
    std::this_thread::sleep_for(k_window);
    CpuBusy b1 = cpu_busy(::getpid());
    double span = std::chrono::duration<double>(Clock::now() - t0).count();
    double capacity = span * std::max(1, b1.cpus);
    load = std::clamp((b1.busy_s - b0.busy_s - (own() - own0)) / capacity, 0.0, 1.0);
    if (!outside_load_seen(load) || std::chrono::duration<double>(Clock::now() - start).count() >= max_seconds) return load;
  }
}

namespace {

// Big buffers freed are kept for the next ones of about the same size. One evaluation of a big case
// generates hundreds of megabytes of data sets, and the next evaluation in the same process
// (`kope run`, the benchmarks) asks for the same sizes again. Memory the process hands back
// comes back as fresh pages, and on a virtual machine that returns freed memory to its host a
// fresh page costs many times a reused one (256 MB: 160-210 ms first touched, 15 ms after).
class BufferPool {
 public:
  static BufferPool& instance() {
    static auto* pool = new BufferPool();  // never destroyed: buffers may be freed at exit
    return *pool;
  }

  // A buffer of at least `bytes`; *capacity says how many it has (give it back with that). A
  // kept buffer is taken when it is at most k_slack bigger, the smallest such first: the cases
  // of different operators have different sizes, so an exact match alone seldom comes.
  uint8_t* take(size_t bytes, size_t* capacity) {
    *capacity = bytes;
    if (bytes >= k_min_bytes) {
      std::lock_guard lock(m_mu);
      if (auto it = m_free.lower_bound(bytes); it != m_free.end() && it->first - bytes <= bytes / k_slack) {
        uint8_t* p = it->second;
        *capacity = it->first;
        m_free.erase(it);
        m_idle -= *capacity;
        return p;
      }
    }
    if (bytes < k_huge_bytes) return static_cast<uint8_t*>(std::aligned_alloc(64, bytes));
    // Big buffers on transparent huge pages where the kernel offers them (madvise mode): a
    // 2 MiB page faults in once where 512 small ones fault one by one, and on a virtual machine
    // each fault costs microseconds (a relu case's data sets: a quarter of the evaluation's CPU).
    size_t rounded = (bytes + k_huge_page - 1) / k_huge_page * k_huge_page;
    auto* p = static_cast<uint8_t*>(std::aligned_alloc(k_huge_page, rounded));
    if (p != nullptr) ::madvise(p, rounded, MADV_HUGEPAGE);  // advice: failure changes nothing
    return p;
  }

  void give(uint8_t* p, size_t bytes) {
    if (bytes >= k_min_bytes) {
      std::lock_guard lock(m_mu);
      if (m_idle + bytes <= m_cap) {
        m_free.emplace(bytes, p);
        m_idle += bytes;
        return;
      }
    }
    std::free(p);
  }

 private:
  static constexpr size_t k_min_bytes = 1u << 20;
  static constexpr size_t k_slack = 2;  // a kept buffer serves requests it exceeds by at most 1/k_slack
  static constexpr size_t k_huge_page = 2u << 20, k_huge_bytes = 8u << 20;
  // Up to an eighth of the machine's memory, at most 2 GiB, stays idle here.
  BufferPool() : m_cap(static_cast<size_t>(std::min<uint64_t>(util::physical_memory_bytes() / 8, uint64_t{2} << 30))) {}

  std::mutex m_mu;
  std::multimap<size_t, uint8_t*> m_free;
  size_t m_idle = 0;
  size_t m_cap = 0;
};

}  // namespace

AlignedBytes::AlignedBytes(size_t bytes) : m_size(bytes) {
  size_t capacity = 0;
  uint8_t* p = BufferPool::instance().take(allocated(bytes), &capacity);
  if (p == nullptr) throw std::bad_alloc();
  m_ptr = std::unique_ptr<uint8_t, Free>(p, Free{capacity});
}

size_t AlignedBytes::allocated(size_t bytes) { return std::max<size_t>(64, (bytes + 63) / 64 * 64); }

void AlignedBytes::Free::operator()(uint8_t* p) const { BufferPool::instance().give(p, bytes); }

const std::vector<std::pair<int, int>>& call_cycle() {
  static const std::vector<std::pair<int, int>> k = {{0, 0}, {1, 0}, {0, 1}, {1, 1}};
  return k;
}

CaseData generate_case_data(const spec::OpSpec& op, const spec::Case& c, uint64_t evaluation_seed, int set_count,
                            int first_set) {
  CaseData d;
  d.case_index = c.index;
  d.evaluation_seed = evaluation_seed;
  d.sets.resize(static_cast<size_t>(set_count));
  auto fill = [&](int s) {
    DataSet& set = d.sets[static_cast<size_t>(s)];
    set.seed = mix(evaluation_seed, static_cast<uint64_t>(first_set + s));
    std::vector<void*> ptrs;
    for (const auto& t : op.inputs) {
      set.inputs.emplace_back(op.byte_size(t, c));
      ptrs.push_back(set.inputs.back().data());
    }
    spec::generate_inputs(op, c, set.seed, ptrs.data());
    for (const auto& t : op.outputs) set.expected.emplace_back(op.byte_size(t, c));
  };
  // Each set has its own seed, so big sets are generated side by side (this is on the path to
  // every verdict); small ones are not worth a thread.
  uint64_t bytes = 0;
  for (const auto& t : op.inputs) bytes += op.byte_size(t, c);
  unsigned workers = std::min<unsigned>(static_cast<unsigned>(set_count), std::max(1u, std::thread::hardware_concurrency()));
  if (bytes < (1u << 20) || workers < 2) {
    for (int s = 0; s < set_count; ++s) fill(s);
    return d;
  }
  std::atomic<int> next{0};
  auto work = [&] {
    for (int s = next++; s < set_count; s = next++) fill(s);
  };
  std::vector<std::thread> threads;
  for (unsigned w = 1; w < workers; ++w) threads.emplace_back(work);
  work();
  for (auto& t : threads) t.join();
  return d;
}

std::string describe_mismatch(const spec::OpSpec& op, const spec::Case& c, size_t o, const CompareResult& r) {
  const auto& out = op.outputs[o];
  if (!r.first) return fmt::format("{}: mismatch", out.name);
  std::string s = fmt::format("{}{}: got {}, expected {}", out.name, format_index(r.first->index, op.shape_of(out, c)),
                              r.first->got_text, r.first->expected_text);
  if (r.mismatches > 1) s += fmt::format(" ({} of {} elements differ)", r.mismatches, op.element_count(out, c));
  return s;
}

Status compute_expected(Session& ref, const spec::OpSpec& op, const spec::Case& c, CaseData& data, milliseconds timeout) {
  CaseLayout l = layout_case(op, c, 1, 1, page_size());
  auto broken = [&](std::string_view what) {
    std::string msg = ref.failure() ? ref.failure()->message : std::string(what);
    return fail(ErrorKind::config, "the reference of {} failed on case {} ({}): {}{}", op.name, c.index, op.case_label(c), msg,
                ref.output_tail().empty() ? "" : "\n" + ref.output_tail());
  };
  KOPE_ASSIGN(bool mapped, ref.map(op, l, op.call_args(c)));
  if (!mapped) return broken("cannot map buffers");
  for (size_t s = 0; s < data.sets.size(); ++s) {
    load_inputs_split(ref.arena(), l, 0, data.sets[s], 0x1234);
    poison_outputs_split(ref.arena(), l, 0, mix(data.sets[s].seed, 77));
    double secs = 0;
    KOPE_ASSIGN(bool ok, ref.call(0, 0, timeout, &secs));
    if (!ok) return broken("call failed");
    data.reference_call_seconds = std::max(data.reference_call_seconds, secs);
    for (size_t o = 0; o < op.outputs.size(); ++o) {
      const Placement& p = l.outputs[0][o];
      if (p.data_bytes > 0) std::memcpy(data.sets[s].expected[o].data(), ref.arena().output(p), p.data_bytes);
    }
  }
  return {};
}

Result<VerifyOutcome> verify_case(Session& s, const spec::OpSpec& op, const spec::Case& c, const CaseData& data,
                                  milliseconds timeout, uint64_t poison_seed) {
  VerifyOutcome v;
  v.check.case_index = c.index;
  v.check.label = op.case_label(c);
  CaseLayout l = layout_case(op, c, k_rotating_sets, k_rotating_sets, page_size());
  KOPE_ASSIGN(bool mapped, s.map(op, l, op.call_args(c)));
  if (!mapped) {
    v.violation = from_failure(s);
    return v;
  }
  uint64_t in_canary = mix(poison_seed, 999);
  std::vector<const DataSet*> slot_data = {&data.sets[0], &data.sets[1]};
  load_inputs_split(s.arena(), l, 0, data.sets[0], in_canary);
  load_inputs_split(s.arena(), l, 1, data.sets[1], in_canary);
  std::vector<uint64_t> out_seeds(k_rotating_sets, 0);
  for (int b = 0; b < k_rotating_sets; ++b) {
    out_seeds[static_cast<size_t>(b)] = poison_outputs_split(s.arena(), l, b, mix(poison_seed, 500 + static_cast<uint64_t>(b)));
  }
  const auto& cycle = call_cycle();
  for (size_t k = 0; k < cycle.size(); ++k) {
    auto [a, b] = cycle[k];
    out_seeds[static_cast<size_t>(b)] = poison_outputs_split(s.arena(), l, b, mix(poison_seed, k));
    KOPE_ASSIGN(bool ok, s.call(a, b, timeout));
    if (!ok) {
      v.violation = from_failure(s);
      return v;
    }
    CallCheck checked = check_call_split(s.arena(), op, c, l, slot_data, in_canary, out_seeds, b, data.sets[static_cast<size_t>(a)]);
    if (checked.integrity) {
      v.violation = checked.integrity;
      return v;
    }
    const OutputCheck& oc = checked.outputs;
    v.check.max_abs_err = std::max(v.check.max_abs_err, oc.max_abs_err);
    if (!oc.ok) {
      v.check.ok = false;
      v.check.first_mismatch = oc.first_mismatch;
      return v;
    }
  }
  v.check.ok = true;
  return v;
}

struct CaseTimer::Impl {
  Impl(Session& session, const spec::OpSpec& o, const spec::Case& cs, const CaseData& d, const TimingPlan& p, uint64_t seed)
      : s(session), op(o), c(cs), data(d), plan(p), rng(seed) {}

  Session& s;
  const spec::OpSpec& op;
  const spec::Case& c;
  const CaseData& data;
  TimingPlan plan;
  std::mt19937_64 rng;
  CaseLayout l;
  uint64_t in_canary = 0;
  std::vector<const DataSet*> slot_data;
  std::vector<uint64_t> out_seeds = std::vector<uint64_t>(k_rotating_sets, 0);
  double per_call_estimate = 0;
  uint64_t n0 = 1;
  bool first_sample = true;
  int batches = 0;  // run_batch calls so far
  // Per output slot: it still holds the pattern of out_seeds[slot], checked after the last batch,
  // which did not write it (see run_batch).
  std::vector<bool> pattern_intact = std::vector<bool>(k_rotating_sets, false);
  double outside_s = 0, capacity_s = 0;  // other work's CPU time beside the batches, and the CPUs' capacity
  CpuBusy busy_before, busy_after;        // around the last batch alone
  double batch_span_s = 0;
  int ran_on = -1;  // the CPU the last batch's calling thread ended on
  // Shared buffers (share_data_of): the timer whose data this one runs on, and whether another
  // kernel writes this timer's output slots between its batches.
  Impl* leader = nullptr;
  bool shared = false;
  double poison_ms = 0, check_ms = 0;  // the last batch's work around it (KOPE_EVAL_TRACE)
  std::vector<DataSet> deferred;        // the case's deferred never-seen sets, once made
  TimingOutcome out;

  void reload() {
    split([&](int part, int parts) {
      for (int sl = 0; sl < k_rotating_sets; ++sl) copy_inputs(s.arena(), l, sl, *slot_data[static_cast<size_t>(sl)], part, parts);
    });
    for (int sl = 0; sl < k_rotating_sets; ++sl) finish_inputs(s.arena(), l, sl, op.inputs.size(), in_canary);
  }

  // The data changes places between batches (always before the first), so a result cached by
  // buffer address goes stale: the two sets swap slots at random.
  void move_sets() {
    bool swap = first_sample || (rng() & 1) != 0;
    first_sample = false;
    if (!swap) return;
    std::swap(slot_data[0], slot_data[1]);
    reload();
  }

  // The rotating sets back in their slots, in order (where the timing expects them).
  void load_rotating_sets() {
    slot_data = {&data.sets[0], &data.sets[1]};
    reload();
  }

  // Maps the case's layout into the runner; false (with the violation) when the kernel failed.
  Result<bool> map_case() {
    KOPE_ASSIGN(bool mapped, s.map(op, l, op.call_args(c)));
    if (!mapped) out.violation = from_failure(s);
    return mapped;
  }

  // Between batches the work on big buffers (poisoning the outputs before a batch, checking
  // inputs and outputs after it) runs in parts on two threads (run_parts): on a memory-bound
  // operator it costs several times the batch itself.
  bool side_by_side() const { return eval::side_by_side(l); }
  template <class F>
  void split(F&& fn) {
    run_parts(side_by_side(), fn);
  }

  // The input slot the last call of a batch of n calls (from `phase` of the call cycle) that
  // wrote output slot b read; -1 when no call of the batch wrote it.
  static int last_input_of(int b, uint64_t n, uint32_t phase) {
    const auto& cycle = call_cycle();
    for (uint64_t j = n; j-- > 0;) {
      const auto& combo = cycle[(j + phase) % cycle.size()];
      if (combo.second == b) return combo.first;
    }
    return -1;
  }

  // What part `part` of `parts` of checking output slot b found after a batch whose last call
  // on b read input slot `last_in` (-1: no call wrote b, which must still hold its pattern).
  struct SlotPart {
    std::vector<CompareResult> compared;  // per output, when written
    std::optional<size_t> overwritten;    // when not written: the first output whose pattern changed
  };
  SlotPart check_slot_part(int b, int last_in, int part, int parts) const {
    SlotPart r;
    if (last_in < 0) {
      for (size_t o = 0; o < op.outputs.size() && !r.overwritten; ++o) {
        const Placement& p = l.outputs[static_cast<size_t>(b)][o];
        if (!matches_pattern_part(s.arena().output(p), p.data_bytes, mix(out_seeds[static_cast<size_t>(b)], o), part, parts)) r.overwritten = o;
      }
      return r;
    }
    r.compared = compare_outputs_part(s.arena(), op, c, l, b, *slot_data[static_cast<size_t>(last_in)], part, parts);
    return r;
  }

  // The verdict on output slot b after a batch of n calls from its parts' findings, in order.
  std::optional<Violation> judge_output_slot(int b, int last_in, uint64_t n, const std::vector<SlotPart>& parts) const {
    if (last_in < 0) {
      std::optional<size_t> o;
      for (const SlotPart& p : parts) {
        if (p.overwritten && (!o || *p.overwritten < *o)) o = p.overwritten;
      }
      if (!o) return std::nullopt;
      return Violation{Verdict::rejected, fmt::format("wrote to output {} of a buffer set it was not given in that call", op.outputs[*o].name)};
    }
    std::vector<std::vector<CompareResult>> compared;
    for (const SlotPart& p : parts) compared.push_back(p.compared);
    OutputCheck oc = describe_outputs(s.arena(), op, c, l, b, merge_parts(compared), out_seeds[static_cast<size_t>(b)]);
    if (oc.ok) return std::nullopt;
    return Violation{Verdict::rejected,
                     fmt::format("gave wrong results when called repeatedly with changing inputs (timed batch of {} calls): {}; "
                                 "results may not depend on earlier calls",
                                 n, oc.first_mismatch)};
  }

  // Runs one batch of n calls on freshly poisoned outputs and verifies what it left behind.
  //
  // The work around it is kept to what the trust boundary needs: an output slot that the last
  // batch did not write, and that was checked to still hold its pattern, keeps that pattern (it
  // is not poisoned again: nothing can have written it since, the runner being idle between
  // batches); and when the input memfd is sealed against every writer (Arena::inputs_sealed)
  // the inputs' contents are compared with the data only every k_input_check_every batches, as
  // a check of the seal (their canaries every time; verification and the fresh-data check
  // compare them on every call).
  static constexpr int k_input_check_every = 16;
  Result<bool> run_batch(uint64_t n, double* seconds) {
    const auto& cycle = call_cycle();
    if (shared) std::fill(pattern_intact.begin(), pattern_intact.end(), false);
    for (size_t b = 0; b < out_seeds.size(); ++b) {
      if (!pattern_intact[b]) out_seeds[b] = rng();
    }
    auto poison_start = Clock::now();
    split([&](int part, int parts) {
      for (int b = 0; b < k_rotating_sets; ++b) {
        if (!pattern_intact[static_cast<size_t>(b)]) poison_outputs_part(s.arena(), l, b, out_seeds[static_cast<size_t>(b)], part, parts);
      }
    });
    poison_ms = std::chrono::duration<double, std::milli>(Clock::now() - poison_start).count();
    bool input_contents = !s.arena().inputs_sealed() || batches % k_input_check_every == 0;
    ++batches;
    auto phase = static_cast<uint32_t>(rng() % cycle.size());
    double expect = per_call_estimate * static_cast<double>(n);
    auto timeout = std::max(plan.min_call_timeout, milliseconds(static_cast<int64_t>(expect * 10 * 1000) + 1000));
    // The machine's busy time is read around the batch alone: the parent's own work before and
    // after it (poisoning, the integrity check) runs while the runner waits, and is not load.
    busy_before = cpu_busy(s.runner_pid());
    auto span0 = Clock::now();
    KOPE_ASSIGN(bool ok, s.batch(n, phase, cycle, timeout, seconds));
    batch_span_s = std::chrono::duration<double>(Clock::now() - span0).count();
    busy_after = cpu_busy(s.runner_pid());
    if (!ok) {
      out.violation = from_failure(s);
      return false;
    }
    // Reported in this order: a kernel that wrote where it must not, before wrong results.
    // Every check is split in parts over the threads (one output slot is often the whole work:
    // a batch of one call writes one slot, and the other is only checked for its pattern).
    std::vector<int> last_in(k_rotating_sets);
    for (int b = 0; b < k_rotating_sets; ++b) last_in[static_cast<size_t>(b)] = last_input_of(b, n, phase);
    std::vector<std::optional<Violation>> integrity_parts(2);
    std::vector<std::vector<SlotPart>> slot_parts(k_rotating_sets, std::vector<SlotPart>(side_by_side() ? 2 : 1));
    auto check_start = Clock::now();
    split([&](int part, int parts) {
      integrity_parts[static_cast<size_t>(part)] = check_integrity(s.arena(), op, l, slot_data, in_canary, out_seeds, input_contents, part, parts);
      for (int b = 0; b < k_rotating_sets; ++b) {
        slot_parts[static_cast<size_t>(b)][static_cast<size_t>(part)] = check_slot_part(b, last_in[static_cast<size_t>(b)], part, parts);
      }
    });
    std::optional<Violation> integrity = integrity_parts[0] ? integrity_parts[0] : integrity_parts[1];
    std::vector<std::optional<Violation>> outputs(k_rotating_sets);
    for (int b = 0; b < k_rotating_sets; ++b) {
      outputs[static_cast<size_t>(b)] = judge_output_slot(b, last_in[static_cast<size_t>(b)], n, slot_parts[static_cast<size_t>(b)]);
    }
    check_ms = std::chrono::duration<double, std::milli>(Clock::now() - check_start).count();
    for (int b = 0; b < k_rotating_sets; ++b) {
      pattern_intact[static_cast<size_t>(b)] = last_in[static_cast<size_t>(b)] < 0 && !outputs[static_cast<size_t>(b)];
    }
    auto wrong = std::find_if(outputs.begin(), outputs.end(), [](const auto& v) { return v.has_value(); });
    if (integrity || wrong != outputs.end()) {
      out.violation = integrity ? integrity : *wrong;
      return false;
    }
    return true;
  }
};

CaseTimer::CaseTimer(Session& s, const spec::OpSpec& op, const spec::Case& c, const CaseData& data, const TimingPlan& plan,
                     uint64_t rng_seed)
    : m(std::make_unique<Impl>(s, op, c, data, plan, rng_seed)) {}

CaseTimer::~CaseTimer() {
  if (m->leader) m->leader->shared = false;
}

void CaseTimer::move_shared_data() {
  if (!m->leader) m->move_sets();
}

void CaseTimer::share_data_of(CaseTimer& leader) {
  m->leader = leader.m.get();
  m->shared = true;
  leader.m->shared = true;
}

Result<bool> CaseTimer::prepare() {
  Impl& t = *m;
  if (t.data.sets.size() < static_cast<size_t>(k_rotating_sets)) return fail(ErrorKind::internal, "timing needs {} data sets", k_rotating_sets);
  // Milliseconds since the last lap (for the trace).
  Clock::time_point mark = Clock::now();
  auto lap = [&mark] {
    Clock::time_point now = Clock::now();
    double ms = std::chrono::duration<double, std::milli>(now - mark).count();
    mark = now;
    return ms;
  };
  t.l = layout_case(t.op, t.c, k_rotating_sets, k_rotating_sets, page_size());
  KOPE_ASSIGN(bool mapped, t.map_case());
  double map_ms = lap();
  if (!mapped) return false;
  if (t.leader) {
    t.in_canary = t.leader->in_canary;
    t.slot_data = t.leader->slot_data;
  } else {
    t.in_canary = t.rng();
    t.load_rotating_sets();
  }
  double reload_ms = lap();
  // The round trip of an empty command, subtracted from every batch.
  std::vector<double> pings;
  for (int i = 0; i < 15; ++i) {
    double secs = 0;
    KOPE_ASSIGN(bool ok, t.s.ping(&secs));
    if (!ok) {
      t.out.violation = from_failure(t.s);
      return false;
    }
    pings.push_back(secs);
  }
  t.out.overhead_s = median(pings);
  double ping_ms = lap();
  int batches = 0;
  // Warm-up and calibration: grow the batch until it lasts at least min_batch_seconds, then run
  // one more batch of that size (unless a single call is already long).
  uint64_t n = 1;
  int settled = 0;
  for (;;) {
    double secs = 0;
    KOPE_ASSIGN(bool ok, t.run_batch(n, &secs));
    if (!ok) return false;
    ++batches;
    t.per_call_estimate = std::max((secs - t.out.overhead_s) / static_cast<double>(n), 1e-9);
    if (secs >= t.plan.min_batch_seconds) {
      if (settled >= 1 || secs > 0.25) break;
      ++settled;
      continue;
    }
    auto want = static_cast<uint64_t>(std::ceil(t.plan.target_batch_seconds / t.per_call_estimate));
    n = std::clamp<uint64_t>(want, n * 2, n * 16);
  }
  t.n0 = std::max<uint64_t>(n, static_cast<uint64_t>(std::ceil(t.plan.target_batch_seconds / t.per_call_estimate)));
  if (t.per_call_estimate * static_cast<double>(t.n0) > 2 * t.plan.target_batch_seconds) t.n0 = n;
  t.out.calls_per_batch = static_cast<int64_t>(t.n0);
  if (trace_on()) {
    std::fprintf(stderr, "[prepare] runner %d: map %.1f ms, inputs %.1f ms, pings %.1f ms, %d calibration batches %.1f ms\n",
                 t.s.runner_pid(), map_ms, reload_ms, ping_ms, batches, lap());
  }
  return true;
}

Result<bool> CaseTimer::sample(std::optional<int>* round_cpu) {
  Impl& t = *m;
  if (t.out.violation) return false;
  // On shared buffers the data moves before a pair (move_shared_data), else before each batch.
  auto phase_start = Clock::now();
  if (t.leader) {
    t.slot_data = t.leader->slot_data;
  } else if (!t.shared) {
    t.move_sets();
  }
  double swap_ms = std::chrono::duration<double, std::milli>(Clock::now() - phase_start).count();
  // A random length: a kernel cannot know which call of a batch is the last (the verified one).
  uint64_t nb = t.n0 + (t.n0 >= 4 ? t.rng() % (t.n0 / 4 + 1) : 0);
  double secs = 0;
  Session::CpuTimes before = t.s.cpu_times();
  const proto::StatusPage* page = t.s.arena().status();
  uint64_t device_ns0 = page->device_ns, device_calls0 = page->device_calls;
  // The round's first batch keeps the calling thread where it last ran (and the pool off that
  // CPU) as the later ones do, so that no batch runs two of its threads on one CPU.
  std::optional<int> where;
  if (round_cpu) where = *round_cpu ? **round_cpu : t.s.calling_cpu();
  bool kept = where && *where >= 0 && t.s.keep_calling_thread_on(*where);
  auto batch = t.run_batch(nb, &secs);
  t.ran_on = t.s.calling_cpu();
  if (kept) t.s.keep_calling_thread_on(std::nullopt);
  if (round_cpu && !*round_cpu && t.ran_on >= 0) *round_cpu = t.ran_on;
  KOPE_ASSIGN(bool ok, std::move(batch));
  if (!ok) return false;
  Session::CpuTimes after = t.s.cpu_times();
  t.out.threads = std::max(t.out.threads, threads_that_ran(before, after));
  const CpuBusy& busy0 = t.busy_before;
  const CpuBusy& busy1 = t.busy_after;
  double span = t.batch_span_s;
  double per = (secs - t.out.overhead_s) / static_cast<double>(nb);
  if (per <= 0) per = secs / static_cast<double>(nb);
  if (t.plan.device_clock) {
    uint64_t calls = page->device_calls - device_calls0;
    double device = static_cast<double>(page->device_ns - device_ns0) * 1e-9;
    if (calls != nb) {
      t.out.violation = Violation{Verdict::rejected, fmt::format("the device clock counted {} kernel calls in a batch of {}: the host "
                                                                 "shim's bookkeeping was tampered with", calls, nb)};
      return false;
    }
    if (device > secs * 1.05 + 1e-4) {
      t.out.violation = Violation{Verdict::rejected, fmt::format("the device clock ({}) exceeds the parent's clock ({}) for the same "
                                                                 "host-synchronised batch", fmt_seconds(device), fmt_seconds(secs))};
      return false;
    }
    t.out.wall_samples_s.push_back(per);
    per = device / static_cast<double>(nb);
  }
  t.out.samples_s.push_back(per);
  if (t.s.runner_pid() > 0) {
    double run = static_cast<double>(after.run_ns - before.run_ns);
    double wait = static_cast<double>(after.wait_ns - before.wait_ns);
    t.out.contention.push_back(run + wait > 0 ? wait / (run + wait) : 0.0);
    if (busy0.cpus > 0 && busy1.cpus == busy0.cpus) {
      // Not clipped per batch: /proc/stat counts clock ticks, so a short batch reads 0 or a whole
      // tick of busy time; only the sum over batches is a fair estimate.
      t.outside_s += busy1.busy_s - busy0.busy_s - run * 1e-9;
      t.capacity_s += span * busy0.cpus;
      t.out.outside_load = t.capacity_s > 0 ? std::clamp(t.outside_s / t.capacity_s, 0.0, 1.0) : 0.0;
    }
    auto idle_start = Clock::now();
    wait_until_idle(t.s, after);
    if (trace_on()) {
      std::fprintf(stderr, "[batch] runner %d on CPU %d%s: %llu calls in %.3f ms, ran %.3f ms, waited %.3f ms (contention %.3f); outside load so far %.3f; "
                   "around it: inputs %.1f ms, poison %.1f ms, checks %.1f ms, settle %.1f ms\n",
                   t.s.runner_pid(), t.ran_on, kept ? " (kept there)" : "", static_cast<unsigned long long>(nb), secs * 1e3, run * 1e-6, wait * 1e-6,
                   t.out.contention.back(), t.out.outside_load, swap_ms, t.poison_ms, t.check_ms,
                   std::chrono::duration<double, std::milli>(Clock::now() - idle_start).count());
    }
  }
  // Batches that waited for a CPU while other work ran measure that load, not the kernel: when
  // there are enough clean ones, the statistics use only those. Without outside load the waits
  // are the kernel's own, and every batch counts.
  bool outside = outside_load_seen(t.out.outside_load);
  std::vector<double> clean;
  for (size_t i = 0; i < t.out.samples_s.size() && i < t.out.contention.size(); ++i) {
    if (t.out.contention[i] < k_clean_contention) clean.push_back(t.out.samples_s[i]);
  }
  const std::vector<double>& used = outside && clean.size() >= static_cast<size_t>(std::max(t.plan.min_samples, 6)) ? clean : t.out.samples_s;
  MedianCi ci = median_ci(used);
  t.out.samples_used = used.size();
  t.out.disturbed = outside && waits_disturbed(t.out.contention, &used == &clean);
  t.out.median_s = ci.median;
  t.out.ci95_s = ci.half_width;
  return true;
}

bool CaseTimer::converged() const {
  size_t k = m->out.samples_used;
  if (k < static_cast<size_t>(std::max(m->plan.min_samples, 6))) return false;
  return m->out.ci95_s <= m->plan.target_ci * m->out.median_s;
}

size_t CaseTimer::sample_count() const { return m->out.samples_s.size(); }

TimingOutcome CaseTimer::outcome() const { return m->out; }

FreshCallCost fresh_call_cost(const Session::CpuTimes& before, const Session::CpuTimes& after, double wall, bool have_cpu) {
  FreshCallCost c;
  c.wall = std::max(0.0, wall);
  if (!have_cpu) {
    c.cpu = c.cpu_floor = c.wall_floor = c.wall;
    return c;
  }
  // Per-thread deltas (a thread absent before started during the call).
  struct Delta {
    double run = 0, wait = 0;
  };
  std::vector<Delta> d;
  for (const Session::ThreadTimes& a : after.threads) {
    Delta x{static_cast<double>(a.run_ns) * 1e-9, static_cast<double>(a.wait_ns) * 1e-9};
    for (const Session::ThreadTimes& b : before.threads) {
      if (b.tid == a.tid) {
        x.run -= static_cast<double>(b.run_ns) * 1e-9;
        x.wait -= static_cast<double>(b.wait_ns) * 1e-9;
        break;
      }
    }
    d.push_back({std::max(0.0, x.run), std::max(0.0, x.wait)});
  }
  for (const Delta& x : d) {
    c.cpu += x.run;
    c.wait += x.wait;
  }
  // A thread of a parallel kernel spins (burning CPU time) while a teammate waits for a CPU:
  // that spinning is bounded by the other threads' waits. What is left is the kernel's own
  // work, whatever the machine's other load did to the call.
  for (const Delta& x : d) c.cpu_floor += std::max(0.0, x.run - (c.wait - x.wait));
  c.wall_floor = std::max(0.0, c.wall - c.wait);
  return c;
}

FreshRound judge_fresh_round(const std::vector<FreshPair>& pairs, double factor, double slack_seconds) {
  FreshRound rd;
  rd.pairs = pairs.size();
  if (pairs.empty()) return rd;
  constexpr double tiny = 1e-7;
  std::vector<double> cpu_ratios, wall_ratios, fresh_cpu, seen_cpu, fresh_wall, seen_wall;
  for (const FreshPair& p : pairs) {
    cpu_ratios.push_back(p.fresh.cpu_floor / std::max(p.seen.cpu, tiny));
    wall_ratios.push_back(p.fresh.wall_floor / std::max(p.seen.wall, tiny));
    fresh_cpu.push_back(p.fresh.cpu_floor);
    seen_cpu.push_back(p.seen.cpu);
    fresh_wall.push_back(p.fresh.wall_floor);
    seen_wall.push_back(p.seen.wall);
  }
  rd.cpu_ratio = median(cpu_ratios);
  rd.wall_ratio = median(wall_ratios);
  rd.fresh_cpu = median(fresh_cpu);
  rd.seen_cpu = median(seen_cpu);
  rd.fresh_wall = median(fresh_wall);
  rd.seen_wall = median(seen_wall);
  bool by_wall = rd.wall_ratio > factor && rd.fresh_wall - rd.seen_wall > slack_seconds;
  bool by_cpu = rd.cpu_ratio > factor && rd.fresh_cpu - rd.seen_cpu > slack_seconds;
  rd.flagged = by_wall && by_cpu;
  return rd;
}

// What a kept result could flatter is the batches' figure, the one the timing reports: a kernel
// whose never-seen calls cost no more than fresh_factor times its calls in the batches gained
// nothing there. That happens to an honest kernel when the machine's other load slows it in ways
// its threads' waits do not show (a sibling hardware thread, the shared caches): the seen calls'
// least of several tries finds a quiet moment, the single never-seen call does not, and the
// batches, timed under the same load, show its usual cost. A cache still shows: its batches run
// on the results it kept.
bool fresh_check_rejects(const std::vector<FreshRound>& rounds, size_t needed, double factor, double batch_median_s) {
  if (rounds.size() != needed || needed == 0) return false;
  return std::all_of(rounds.begin(), rounds.end(), [&](const FreshRound& rd) {
    return rd.flagged && rd.fresh_wall > factor * batch_median_s;
  });
}

Result<bool> CaseTimer::resume() {
  Impl& t = *m;
  if (t.out.violation) return false;
  KOPE_ASSIGN(bool mapped, t.map_case());
  if (!mapped) return false;
  std::fill(t.pattern_intact.begin(), t.pattern_intact.end(), false);
  t.load_rotating_sets();
  return true;
}

namespace {

// The fresh-data check's rejection: what the rounds `done` measured, stated in full.
Violation fresh_check_violation(const std::vector<FreshRound>& done, bool cpu, int seen_tries, double fresh_factor, double median_s) {
  std::string detail;
  for (size_t r = 0; r < done.size(); ++r) {
    const FreshRound& rd = done[r];
    detail += fmt::format("{}round {} ({} pair{}): {} vs {} of {}, {} vs {} wall, median ratios {:.2f}x and {:.2f}x",
                          r ? "; " : "", r + 1, rd.pairs, rd.pairs == 1 ? "" : "s", fmt_seconds(rd.fresh_cpu), fmt_seconds(rd.seen_cpu),
                          cpu ? "CPU time" : "time", fmt_seconds(rd.fresh_wall), fmt_seconds(rd.seen_wall), rd.cpu_ratio, rd.wall_ratio);
  }
  const FreshRound& first = done.front();
  return Violation{
      Verdict::rejected,
      fmt::format("needed {} of {} on never-seen inputs but {} on inputs it had seen before ({}; single verified calls in "
                  "interleaved pairs of alternating order, each after the same warm-up call and a fresh write of its inputs; "
                  "never-seen calls counted without the time their threads waited for a CPU or could have spun for a waiting "
                  "one, seen calls in full, the least of up to {} tries; limit {:.3g}x in both CPU and wall time, medians "
                  "over the pairs; {} per call in batches): results may not be cached between calls",
                  fmt_seconds(first.fresh_cpu), cpu ? "CPU time" : "time", fmt_seconds(first.seen_cpu), detail, seen_tries,
                  fresh_factor, fmt_seconds(median_s))};
}

}  // namespace

Result<bool> CaseTimer::fresh_check() {
  Impl& t = *m;
  if (t.out.violation) return false;
  // Its calls write both output slots: the next batch poisons them again.
  std::fill(t.pattern_intact.begin(), t.pattern_intact.end(), false);
  if (t.data.sets.size() <= static_cast<size_t>(k_rotating_sets)) return true;
  // Each call's check covers the canaries of both slots, and a call poisons only its own: the
  // other slot must hold this timer's pattern too. On shared pages the other kernel's batch may
  // have been the last to poison it, with canaries of its own.
  for (int slot = 0; slot < k_rotating_sets; ++slot) {
    t.out_seeds[static_cast<size_t>(slot)] = poison_outputs_split(t.s.arena(), t.l, slot, t.rng());
  }
  // Measured calls, each verified: one on a never-seen data set and one on a set the kernel has
  // seen, in pairs, the order alternating from pair to pair. Both calls of a pair start from the
  // same state, so that only a result kept between calls can tell them apart:
  //   - the measured call's inputs are written by the parent just before (same cache and page
  //     state whether the contents are new or not), in the same slot for both calls of a pair
  //     (the slot alternates from pair to pair);
  //   - a warm-up call on seen data in the other slot comes right before (the thread pool is
  //     awake, the kernel's own scratch was just allocated and freed, and the seen contents were
  //     just computed: a cache keyed by content holds them whatever its size).
  // A single call is at the mercy of the machine's other load: a thread of it that waits for a
  // CPU stretches the wall time, and its teammates spin meanwhile, which stretches the CPU time
  // too (an honest OpenMP kernel of 0.3 ms measured 30 ms this way beside two CPU hogs). So the
  // comparison is one-sided in the kernel's favour: the fresh call counts only its floor (CPU
  // time less the spinning the other threads' waits allow, wall time less the waits;
  // fresh_call_cost), the seen call its full cost, the least of up to k_seen_tries calls (seen
  // data can be measured again; the tries stop at an undisturbed one, or when they have taken
  // their time). A cache shows whatever
  // the load: its fresh call computes for real on its own threads, which waiting never adds to.
  // A round flags the kernel when the median over its pairs of floor/seen exceeds fresh_factor
  // (and the difference the slack) in both CPU and wall time; the kernel is rejected when a
  // second round on other never-seen sets confirms it (with one set, one round) and its
  // never-seen calls are also beyond fresh_factor times the batches' median (fresh_check_rejects).
  constexpr int k_seen_tries = 8;
  constexpr double k_seen_budget_calls = 8;
  auto timeout = std::max(t.plan.min_call_timeout, milliseconds(static_cast<int64_t>(t.out.median_s * 100 * 1000) + 1000));
  bool cpu = t.s.runner_pid() > 0;
  // Writes `set` into input slot `slot` (and records it for the integrity check).
  auto place = [&](int slot, const DataSet& set) {
    t.slot_data[static_cast<size_t>(slot)] = &set;
    load_inputs_split(t.s.arena(), t.l, slot, set, t.in_canary);
  };
  auto call = [&](int slot, FreshCallCost* cost) -> Result<bool> {
    t.out_seeds[static_cast<size_t>(slot)] = poison_outputs_split(t.s.arena(), t.l, slot, t.rng());
    Session::CpuTimes before = t.s.cpu_times();
    double wall = 0;
    KOPE_ASSIGN(bool ok, t.s.call(slot, slot, timeout, &wall));
    if (!ok) {
      t.out.violation = from_failure(t.s);
      return false;
    }
    Session::CpuTimes after = t.s.cpu_times();
    if (cost != nullptr) *cost = fresh_call_cost(before, after, wall - t.out.overhead_s, cpu);
    const DataSet& expected = *t.slot_data[static_cast<size_t>(slot)];
    CallCheck checked = check_call_split(t.s.arena(), t.op, t.c, t.l, t.slot_data, t.in_canary, t.out_seeds, slot, expected);
    if (checked.integrity) {
      t.out.violation = checked.integrity;
      return false;
    }
    const OutputCheck& oc = checked.outputs;
    if (!oc.ok) {
      t.out.violation = Violation{Verdict::rejected, fmt::format("gave wrong results on fresh inputs after being timed: {}", oc.first_mismatch)};
      return false;
    }
    return true;
  };
  const DataSet& seen_set = t.data.sets[0];
  // One measured call on `set` in `slot`, after the warm-up call on the seen set in the other.
  auto measured = [&](int slot, const DataSet& set, FreshCallCost* cost) -> Result<bool> {
    int other = 1 - slot;
    place(slot, set);
    place(other, seen_set);
    KOPE_ASSIGN(bool warm, call(other, nullptr));
    if (!warm) return false;
    return call(slot, cost);
  };
  // The seen call's cost: the least over tries, stopping at one that did not wait for a CPU
  // (or when the tries have taken k_seen_budget_calls batch-median calls, at least 0.1 s).
  const double seen_budget = std::max(0.1, k_seen_budget_calls * t.out.median_s);
  auto measured_seen = [&](int slot, FreshCallCost* cost) -> Result<bool> {
    double spent = 0;
    for (int k = 0; k < k_seen_tries; ++k) {
      FreshCallCost c;
      KOPE_ASSIGN(bool ok, measured(slot, seen_set, &c));
      if (!ok) return false;
      if (k == 0 || c.wall < cost->wall) cost->wall = c.wall, cost->wait = c.wait;
      if (k == 0 || c.cpu < cost->cpu) cost->cpu = c.cpu;
      spent += 2 * c.wall;  // with its warm-up call
      if (c.wait <= std::max(20e-6, k_clean_contention * c.wall) || spent > seen_budget) break;
    }
    cost->cpu_floor = cost->cpu;
    cost->wall_floor = cost->wall;
    return true;
  };
  // The case's never-seen sets; the confirmation round's may not be made yet
  // (CaseData::deferred_sets): they are made when that round comes.
  std::vector<const DataSet*> unseen;
  for (size_t f = k_rotating_sets; f < t.data.sets.size(); ++f) unseen.push_back(&t.data.sets[f]);
  for (const DataSet& d : t.deferred) unseen.push_back(&d);
  size_t total = t.data.sets.size() - k_rotating_sets + static_cast<size_t>(std::max(0, t.data.deferred_sets));
  size_t rounds = total >= 2 ? 2 : 1;
  size_t per_round = total / rounds;
  std::vector<double> fresh_cpu_all;
  std::vector<FreshRound> done;
  size_t pair_index = 0;
  for (size_t r = 0; r < rounds; ++r) {
    if ((r + 1) * per_round > unseen.size() && t.deferred.empty() && t.plan.make_deferred) {
      KOPE_ASSIGN(t.deferred, t.plan.make_deferred(t.c, t.data));
      for (const DataSet& d : t.deferred) unseen.push_back(&d);
    }
    if ((r + 1) * per_round > unseen.size()) {
      return fail(ErrorKind::internal, "the fresh-data check of {} has {} of its {} never-seen sets", t.op.case_label(t.c),
                  unseen.size(), total);
    }
    std::vector<FreshPair> pairs;
    for (size_t k = 0; k < per_round; ++k, ++pair_index) {
      const DataSet& novel = *unseen[r * per_round + k];
      int slot = static_cast<int>(pair_index % 2);
      FreshPair p;
      if (pair_index % 2 == 0) {
        KOPE_ASSIGN(bool ok, measured_seen(slot, &p.seen));
        if (!ok) return false;
        KOPE_ASSIGN(bool ok2, measured(slot, novel, &p.fresh));
        if (!ok2) return false;
      } else {
        KOPE_ASSIGN(bool ok, measured(slot, novel, &p.fresh));
        if (!ok) return false;
        KOPE_ASSIGN(bool ok2, measured_seen(slot, &p.seen));
        if (!ok2) return false;
      }
      if (trace_on()) {
        std::fprintf(stderr,
                     "[fresh] round %zu pair %zu: fresh cpu %.3f (floor %.3f) wall %.3f (floor %.3f) wait %.3f ms; seen cpu %.3f wall %.3f "
                     "wait %.3f ms\n",
                     r, pair_index, p.fresh.cpu * 1e3, p.fresh.cpu_floor * 1e3, p.fresh.wall * 1e3, p.fresh.wall_floor * 1e3,
                     p.fresh.wait * 1e3, p.seen.cpu * 1e3, p.seen.wall * 1e3, p.seen.wait * 1e3);
      }
      fresh_cpu_all.push_back(p.fresh.cpu);
      pairs.push_back(p);
    }
    done.push_back(judge_fresh_round(pairs, t.plan.fresh_factor, t.plan.fresh_slack_seconds));
    if (!done.back().flagged) break;  // the confirmation round runs only after a flagged one
  }
  // Leave the rotating sets where the timing expects them.
  t.load_rotating_sets();
  t.out.fresh_s = median(fresh_cpu_all);
  bool rejected = fresh_check_rejects(done, rounds, t.plan.fresh_factor, t.out.median_s);
  if (!rejected && done.size() == rounds && done.back().flagged && trace_on()) {
    std::fprintf(stderr, "[fresh] flagged, but the never-seen calls (%.3f ms) are within %.3gx of the batches' %.3f ms per call\n",
                 done.front().fresh_wall * 1e3, t.plan.fresh_factor, t.out.median_s * 1e3);
  }
  if (rejected) {
    t.out.violation = fresh_check_violation(done, cpu, k_seen_tries, t.plan.fresh_factor, t.out.median_s);
    return false;
  }
  return true;
}

Status time_group(const std::vector<CaseTimer*>& timers, const TimingPlan& plan) {
  auto start = Clock::now();
  double cap = plan.max_seconds * static_cast<double>(timers.size());
  for (;;) {
    bool all_done = true;
    bool all_min = true;
    // A round's batches run on the CPU its first batch ran on (same-CPU rounds, measure.h).
    std::optional<int> cpu;
    for (CaseTimer* t : timers) {
      if (t->outcome().violation) return {};
      if (t->converged()) continue;
      all_done = false;
      if (t->sample_count() >= static_cast<size_t>(plan.max_samples)) continue;
      KOPE_ASSIGN(bool ok, t->sample(&cpu));
      if (!ok) return {};
    }
    for (CaseTimer* t : timers) all_min = all_min && t->sample_count() >= 3;
    if (all_done) return {};
    double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
    if (elapsed >= cap && all_min) return {};
    bool all_full = true;
    for (CaseTimer* t : timers) all_full = all_full && (t->converged() || t->sample_count() >= static_cast<size_t>(plan.max_samples));
    if (all_full) return {};
  }
}

Result<TimingOutcome> time_case(Session& s, const spec::OpSpec& op, const spec::Case& c, const CaseData& data,
                                const TimingPlan& plan, uint64_t rng_seed) {
  CaseTimer t(s, op, c, data, plan, rng_seed);
  KOPE_ASSIGN(bool ok, t.prepare());
  if (ok) {
    KOPE_TRY(time_group({&t}, plan));
    if (plan.fresh_check && !t.outcome().violation) KOPE_TRY(t.fresh_check());
  }
  return t.outcome();
}

}  // namespace kope::eval
