// The sandboxed evaluator: build, verify on every case, time under the machine-wide lock (held
// exclusively while timing; compiles, verification and data generation hold it shared, so they
// wait while any kope on the machine times).
//
// One evaluation runs two pipelines at once: the reference pipeline (its own thread: build the
// trusted reference, start it in a runner, generate the evaluation's data sets case by case and
// compute the expected outputs) and the candidate pipeline (sandboxed build and inspection, then
// a runner that verifies each case as soon as its expected outputs exist). Timing starts only
// after every case verified, holds the timing lock, and times the reference and library
// baselines (or reads their cached times) through the same path as the candidate.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cmath>
#include <condition_variable>
#include <ctime>
#include <future>
#include <list>
#include <memory>
#include <mutex>
#include <random>
#include <thread>

#include <nlohmann/json.hpp>

#include "eval/backend.h"
#include "eval/library.h"
#include "eval/decision.h"
#include "eval/measure.h"
#include "eval/notes.h"
#include "eval/stats.h"
#include "eval/verdict_rules.h"
#include "util/file_lock.h"
#include "util/fs.h"
#include "util/hash.h"
#include "util/strings.h"
#include "util/system.h"
#include "util/time.h"

namespace kope::eval {

namespace {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// Bumped when the timing procedure changes, so cached baseline times are measured again.
constexpr const char* k_timing_recipe = "kope-timing-2";
// The never-seen data sets of a timed case, for the fresh-data check (each costs a reference
// call and its memory): four (two rounds of two pairs) when the reference is cheap and the sets
// small, two (two rounds of one pair) when a reference call takes up to
// k_expensive_reference_seconds, one beyond. Only the first round's are made with the case's
// data; the confirmation round's are deferred (CaseData::deferred_sets) until a first round
// flags the kernel.
constexpr int k_unseen_sets = 4;
constexpr double k_cheap_reference_seconds = 0.05;
constexpr uint64_t k_cheap_set_bytes = 32ull << 20;
constexpr double k_expensive_reference_seconds = 0.5;

// How many never-seen sets a timed case keeps: fewer where a reference call is slow or a set
// is big (each costs a reference call and its memory). Before the reference ran (0 seconds) it
// is the most the case can keep, so no more are generated.
size_t unseen_sets_to_keep(double reference_call_seconds, uint64_t set_bytes) {
  if (reference_call_seconds > k_expensive_reference_seconds) return 1;
  if (reference_call_seconds > k_cheap_reference_seconds || set_bytes > k_cheap_set_bytes) return 2;
  return k_unseen_sets;
}

// Of `unseen` never-seen sets, the first round's (made now) and the confirmation round's
// (deferred): the check runs two rounds of unseen / 2 pairs, or one round of one.
int first_round_sets(size_t unseen) { return unseen >= 2 ? static_cast<int>(unseen / 2) : static_cast<int>(unseen); }
int deferred_round_sets(size_t unseen) { return static_cast<int>(unseen) - first_round_sets(unseen); }

// $KOPE_EVAL_TRACE=1 prints the evaluation's milestones with their times to stderr.
class Trace {
 public:
  Trace() : m_on(util::get_env("KOPE_EVAL_TRACE").has_value()), m_t0(Clock::now()) {}
  void operator()(std::string_view what) const {
    if (m_on) std::fprintf(stderr, "[eval %8.3f s] %.*s\n", std::chrono::duration<double>(Clock::now() - m_t0).count(),
                           static_cast<int>(what.size()), what.data());
  }

 private:
  bool m_on;
  Clock::time_point m_t0;
};

uint64_t max_extent(const spec::OpSpec& op, bool inputs) {
  uint64_t m = 0;
  auto page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  for (const auto& c : op.cases) {
    CaseLayout l = layout_case(op, c, k_rotating_sets, k_rotating_sets, page);
    m = std::max(m, inputs ? l.in_bytes : l.out_bytes);
  }
  return m;
}

Status check_op_fits(const spec::OpSpec& op, const Backend& backend) {
  if (op.cases.empty()) return fail(ErrorKind::config, "{}: the op has no cases", op.spec_path.string());
  if (!op.inout_pairs().empty() && !backend.supports_inouts()) {
    return fail(ErrorKind::config, "{}: the op has inout tensors, which the {} backend does not run (the cpu backend does)",
                op.spec_path.string(), backend.name());
  }
  if (op.inputs.size() > proto::k_max_tensors || op.outputs.size() > proto::k_max_tensors) {
    return fail(ErrorKind::config, "{}: more than {} inputs or outputs", op.spec_path.string(), proto::k_max_tensors);
  }
  if (op.call_args(op.cases[0]).size() > proto::k_max_dims) {
    return fail(ErrorKind::config, "{}: more than {} dims and per-case attrs", op.spec_path.string(), proto::k_max_dims);
  }
  bool case_attrs = std::any_of(op.attrs.begin(), op.attrs.end(), [](const spec::Attr& a) { return a.per_case; });
  if (case_attrs && !backend.supports_case_attrs()) {
    return fail(ErrorKind::config, "{}: the op has attrs that vary per case, which the {} backend does not run (the cpu backend does)",
                op.spec_path.string(), backend.name());
  }
  return {};
}

TimingPlan make_plan(const EvaluatorOptions& o, const EvalOptions& e, bool candidate, bool device_clock = false) {
  TimingPlan p;
  p.device_clock = candidate && device_clock;
  p.target_ci = e.target_ci;
  p.max_seconds = e.max_seconds_per_case;
  p.min_batch_seconds = o.min_batch_seconds;
  p.target_batch_seconds = std::max(o.target_batch_seconds, o.min_batch_seconds);
  p.min_samples = o.min_samples;
  p.min_call_timeout = o.min_call_timeout;
  p.fresh_check = candidate;
  p.fresh_factor = o.fresh_factor;
  p.fresh_slack_seconds = o.fresh_slack_seconds;
  return p;
}

// --- data across evaluations ------------------------------------------------------------------

// A case's data sets (inputs and the reference's outputs for them) for one data seed, kept for
// the next evaluation of the same op in this process. The agent evaluates every attempt of an
// op on one data seed (agent/judge.cpp), and on big cases generating the sets and running the
// reference on them is most of an evaluation's time before the timing. A kernel sees the data
// only through its own runner's arena, a process that ends with its evaluation, so it cannot
// tell reused sets from new ones, and the fresh-data check's sets are still never seen by the
// kernel under test. The key holds everything the data depends on (spec and reference by their
// hash, the backend's toolchain, the case, the seed, whether it is timed); at most an eighth of
// the machine's memory is kept, the least recently used case dropped first.
class CaseDataCache {
 public:
  static CaseDataCache& instance() {
    static auto* cache = new CaseDataCache();  // never destroyed: evaluations may run at exit
    return *cache;
  }

  std::shared_ptr<const CaseData> find(const std::string& key) {
    std::lock_guard lock(m_mu);
    for (auto it = m_entries.begin(); it != m_entries.end(); ++it) {
      if (it->key != key) continue;
      m_entries.splice(m_entries.begin(), m_entries, it);
      ++m_hits;
      return m_entries.front().data;
    }
    return nullptr;
  }

  size_t hits() {
    std::lock_guard lock(m_mu);
    return m_hits;
  }

  void put(const std::string& key, std::shared_ptr<const CaseData> data) {
    size_t bytes = 0;
    for (const auto& set : data->sets) {
      for (const auto& b : set.inputs) bytes += b.size();
      for (const auto& b : set.expected) bytes += b.size();
    }
    std::lock_guard lock(m_mu);
    if (bytes > m_cap) return;
    m_entries.push_front(Entry{key, std::move(data), bytes});
    m_bytes += bytes;
    while (m_bytes > m_cap) {
      m_bytes -= m_entries.back().bytes;
      m_entries.pop_back();
    }
  }

 private:
  CaseDataCache() : m_cap(static_cast<size_t>(util::physical_memory_bytes() / 8)) {}

  struct Entry {
    std::string key;
    std::shared_ptr<const CaseData> data;
    size_t bytes = 0;
  };
  std::mutex m_mu;
  std::list<Entry> m_entries;  // the most recently used first
  size_t m_bytes = 0;
  size_t m_cap = 0;
  size_t m_hits = 0;
};

std::atomic<size_t> g_deferred_sets_made{0};

}  // namespace

size_t reused_case_data() { return CaseDataCache::instance().hits(); }
size_t deferred_sets_made() { return g_deferred_sets_made; }

namespace {

// --- reference pipeline ------------------------------------------------------------------------

// The op's reference (a trusted build) started in a runner sized for its biggest case.
Result<std::unique_ptr<Session>> start_reference(const Backend& b, const spec::OpSpec& op) {
  auto so = b.build_trusted(op, op.reference_path, false);
  if (!so) return std::unexpected(std::move(so).error().with_context(fmt::format("building the reference of {}: ", op.name)));
  uint64_t in = max_extent(op, true), out = max_extent(op, false);
  KOPE_ASSIGN(std::unique_ptr<Session> ref, Session::start(*so, b.runner_options(proto::Mode::trusted, in + out), in, out));
  if (ref->failure()) return fail(ErrorKind::config, "the reference of {} cannot be started: {}", op.name, ref->failure()->message);
  return ref;
}

// A reference call may take a while on big cases: generous but finite.
milliseconds reference_call_timeout(milliseconds min_call_timeout) { return std::max(milliseconds(600'000), min_call_timeout); }

// TimingPlan::make_deferred for `op`: a case's deferred never-seen sets, with the reference's
// outputs for them, from a reference runner of their own (the pipeline's may be in the middle
// of timing the reference, mapped for it). It runs under the timing lock, and seldom: only after
// a first round of the fresh-data check flagged the kernel.
std::function<Result<std::vector<DataSet>>(const spec::Case&, const CaseData&)> deferred_set_maker(const Backend& b,
                                                                                                   const spec::OpSpec& op,
                                                                                                   milliseconds min_timeout) {
  return [&b, &op, min_timeout](const spec::Case& c, const CaseData& data) -> Result<std::vector<DataSet>> {
    if (data.deferred_sets <= 0) return std::vector<DataSet>{};
    KOPE_ASSIGN(std::unique_ptr<Session> ref, start_reference(b, op));
    CaseData more = generate_case_data(op, c, data.evaluation_seed, data.deferred_sets, static_cast<int>(data.sets.size()));
    KOPE_TRY(compute_expected(*ref, op, c, more, reference_call_timeout(min_timeout)));
    g_deferred_sets_made += more.sets.size();
    return std::move(more.sets);
  };
}

// Builds and runs the reference in its own thread, publishing each case's data as it is ready.
class ReferencePipeline {
 public:
  ReferencePipeline(const Backend& backend, const spec::OpSpec& op, uint64_t seed, bool timed,
                    const EvaluatorOptions& options)
      : m_backend(backend), m_op(op), m_seed(seed), m_timed(timed), m_options(options), m_data(op.cases.size()),
        m_ready(op.cases.size(), false) {}

  ~ReferencePipeline() { stop(); }

  void start() {
    m_thread = std::thread([this] { run(); });
  }

  // Stops early (between calls) and joins; the reference's runner goes with it.
  void stop() {
    {
      std::lock_guard lock(m_mu);
      m_cancel = true;
      m_cv.notify_all();
    }
    if (m_thread.joinable()) m_thread.join();
    m_session.reset();
  }

  // Waits for case i; an Error when the reference failed.
  Result<const CaseData*> wait(size_t i) {
    std::unique_lock lock(m_mu);
    m_cv.wait(lock, [&] { return m_ready[i] || m_error.has_value(); });
    if (m_ready[i]) return m_data[i].get();
    return std::unexpected(*m_error);
  }

  // After every case: the reference's live session, for timing the reference. The pipeline's
  // thread stays parked until stop(), because the runner dies with the thread that started it
  // (PR_SET_PDEATHSIG is per thread).
  Result<Session*> session() {
    std::unique_lock lock(m_mu);
    m_cv.wait(lock, [&] { return m_finished || m_error.has_value(); });
    if (m_error) return std::unexpected(*m_error);
    if (!m_session) return fail(ErrorKind::internal, "the reference session is gone");
    return m_session.get();
  }

 private:
  void publish_error(Error e) {
    std::lock_guard lock(m_mu);
    if (!m_error) m_error = std::move(e);
    m_cv.notify_all();
  }

  void run() {
    try {
      produce();
    } catch (const std::exception& e) {
      publish_error(Error{ErrorKind::internal, fmt::format("the reference pipeline of {} failed: {}", m_op.name, e.what())});
    }
    std::unique_lock lock(m_mu);
    m_finished = true;
    m_cv.notify_all();
    m_cv.wait(lock, [&] { return m_cancel.load(); });
  }

  void produce() {
    // kope's own work waits while another kope times (util::lock_for_work), case by case.
    auto work = util::lock_for_work();
    if (!work) return publish_error(work.error());
    auto s = start_reference(m_backend, m_op);
    if (!s) return publish_error(s.error());
    m_session = std::move(*s);
    work->release();
    for (size_t i = 0; i < m_op.cases.size(); ++i) {
      if (m_cancel) return publish_error(Error{ErrorKind::internal, "cancelled"});
      const spec::Case& c = m_op.cases[i];
      std::string key = cache_key(c);
      if (auto cached = key.empty() ? nullptr : CaseDataCache::instance().find(key)) {
        publish(i, std::move(cached));
        continue;
      }
      auto case_work = util::lock_for_work();
      if (!case_work) return publish_error(case_work.error());
      uint64_t set_bytes = 0;
      for (const auto& t : m_op.inputs) set_bytes += m_op.byte_size(t, c);
      for (const auto& t : m_op.outputs) set_bytes += m_op.byte_size(t, c);
      // The most never-seen sets the case can keep (fewer once the reference's cost is known).
      size_t unseen = m_timed && c.timed ? unseen_sets_to_keep(0, set_bytes) : 0;
      int sets = k_rotating_sets + first_round_sets(unseen);
      CaseData d = generate_case_data(m_op, c, m_seed ^ (0x51ed27a1ULL * (static_cast<uint64_t>(i) + 1)), sets);
      d.deferred_sets = deferred_round_sets(unseen);
      milliseconds timeout = reference_call_timeout(m_options.min_call_timeout);
      if (sets > k_rotating_sets + 1) {
        // Compute the first set alone to learn the cost; drop one fresh set when it is expensive.
        CaseData first;
        first.case_index = d.case_index;
        first.sets.push_back(std::move(d.sets[0]));
        if (auto st = compute_expected(*m_session, m_op, c, first, timeout); !st) return publish_error(st.error());
        d.sets[0] = std::move(first.sets[0]);
        d.reference_call_seconds = first.reference_call_seconds;
        size_t keep = unseen_sets_to_keep(first.reference_call_seconds, set_bytes);
        d.sets.resize(std::min(d.sets.size(), static_cast<size_t>(k_rotating_sets + first_round_sets(keep))));
        d.deferred_sets = deferred_round_sets(keep);
        CaseData rest;
        rest.case_index = d.case_index;
        for (size_t k = 1; k < d.sets.size(); ++k) rest.sets.push_back(std::move(d.sets[k]));
        if (auto st = compute_expected(*m_session, m_op, c, rest, timeout); !st) return publish_error(st.error());
        for (size_t k = 1; k < d.sets.size(); ++k) d.sets[k] = std::move(rest.sets[k - 1]);
        d.reference_call_seconds = std::max(d.reference_call_seconds, rest.reference_call_seconds);
      } else {
        if (auto st = compute_expected(*m_session, m_op, c, d, timeout); !st) return publish_error(st.error());
        // An expensive reference keeps one never-seen set: nothing to confirm with.
        if (unseen > 0) d.deferred_sets = deferred_round_sets(unseen_sets_to_keep(d.reference_call_seconds, set_bytes));
      }
      auto data = std::make_shared<const CaseData>(std::move(d));
      if (!key.empty()) CaseDataCache::instance().put(key, data);
      publish(i, std::move(data));
    }
  }

  void publish(size_t i, std::shared_ptr<const CaseData> data) {
    std::lock_guard lock(m_mu);
    m_data[i] = std::move(data);
    m_ready[i] = true;
    m_cv.notify_all();
  }

  // What case c's data depends on; "" for an op without a content hash (not cached).
  std::string cache_key(const spec::Case& c) const {
    if (m_op.spec_hash.empty()) return "";
    return fmt::format("{}|{}|{}|{}|case {}|seed {}|{}", m_op.spec_hash, m_op.name, m_backend.name(), m_backend.toolchain_id(),
                       c.index, m_seed, m_timed && c.timed ? "timed" : "untimed");
  }

  const Backend& m_backend;
  const spec::OpSpec& m_op;
  uint64_t m_seed;
  bool m_timed;
  EvaluatorOptions m_options;
  std::vector<std::shared_ptr<const CaseData>> m_data;
  std::vector<bool> m_ready;
  std::optional<Error> m_error;
  std::unique_ptr<Session> m_session;
  std::mutex m_mu;
  std::condition_variable m_cv;
  std::atomic<bool> m_cancel{false};
  bool m_finished = false;
  std::thread m_thread;
};

// --- baselines ---------------------------------------------------------------------------------

struct BaselineResult {
  std::optional<BaselineTiming> timing;
  std::string problem;  // why there is none
  std::optional<LibraryConfig> config;  // library baselines: what the library ran with
};

// The configuration library baselines run with in this evaluation.
struct LibraryChoice {
  LibraryEnv env = library_env_default();
  std::string setting = "environment";
};

// EvaluatorOptions::library_config: the user's environment, or the cached (or now measured)
// fastest correct configuration. Called before the timing lock is taken (selecting times).
Result<LibraryChoice> choose_library(const HardwareProfile& hw, const spec::OpSpec& op, const EvaluatorOptions& options,
                                     const EvalOptions& timing) {
  LibraryChoice choice;
  if (options.library_config != "best" || !op.library_path || library_env_vars(op.library_name).empty()) return choice;
  // The cached selection when there is one: --refresh-baselines re-times baselines, not the
  // choice (`kope bench --library-config best --refresh` makes it again, before this runs).
  EvaluatorOptions cached = options;
  cached.refresh_baselines = false;
  KOPE_ASSIGN(auto sel, select_library_config(hw, op, cached, timing));
  if (!sel || sel->best < 0) return choice;  // nothing correct: the environment's, which then fails visibly
  const LibraryTrial& best = sel->trials[static_cast<size_t>(sel->best)];
  if (auto env = library_env_for_setting(op.library_name, best.setting)) {
    choice.env = *env;
    choice.setting = best.setting;
  }
  return choice;
}

fs::path baseline_path(const Backend& b, const spec::OpSpec& op, const spec::Case& c, bool library,
                       const LibraryChoice& lib = {}) {
  std::string lib_hash;
  if (library && op.library_path) {
    if (auto t = util::read_file(*op.library_path)) lib_hash = util::sha256_hex(*t);
    // The library's configuration is part of what was timed.
    lib_hash += " " + library_env_text(lib.env);
  }
  std::vector<std::string> dims;
  for (int64_t d : op.call_args(c)) dims.push_back(std::to_string(d));  // dims and per-case attrs
  std::string key = util::sha256_hex(fmt::format("{}\n{}\n{}\n{}\n{}\n{}\n{}\n{}", k_timing_recipe, library ? "library" : "reference",
                                                 op.spec_hash, lib_hash, util::join(dims, ","), b.threads(), b.target().str(),
                                                 b.toolchain_id()));
  return util::cache_dir() / "eval" / "baselines" / (key.substr(0, 40) + ".json");
}

std::optional<BaselineResult> read_baseline(const fs::path& p) {
  auto text = util::read_file(p);
  if (!text) return std::nullopt;
  try {
    json j = json::parse(*text);
    BaselineResult r;
    if (j.contains("problem")) {
      r.problem = j.at("problem").get<std::string>();
      return r;
    }
    BaselineTiming t;
    t.median_us = j.at("median_us").get<double>();
    t.ci95_us = j.at("ci95_us").get<double>();
    t.samples_us = j.at("samples_us").get<std::vector<double>>();
    t.calls_per_batch = j.at("calls_per_batch").get<int64_t>();
    t.measured_at = j.value("measured_at", "");
    t.target_ci = j.value("target_ci", 0.0);
    t.cached = true;
    if (!(t.median_us > 0)) return std::nullopt;
    r.timing = t;
    if (j.contains("library_config")) r.config = library_config_from_json(j.at("library_config"));
    return r;
  } catch (const json::exception&) {
    return std::nullopt;  // a damaged entry is measured again
  }
}

void write_baseline(const fs::path& p, const spec::OpSpec& op, const spec::Case& c, bool library, const BaselineResult& r) {
  json j;
  j["op"] = op.name;
  j["case"] = op.case_label(c);
  j["kind"] = library ? "library" : "reference";
  if (r.timing) {
    j["median_us"] = r.timing->median_us;
    j["ci95_us"] = r.timing->ci95_us;
    j["samples_us"] = r.timing->samples_us;
    j["calls_per_batch"] = r.timing->calls_per_batch;
    j["measured_at"] = r.timing->measured_at;
    if (r.timing->target_ci > 0) j["target_ci"] = r.timing->target_ci;
  } else {
    j["problem"] = r.problem;
  }
  if (r.config) j["library_config"] = library_config_to_json(*r.config);
  if (util::make_dirs(p.parent_path())) (void)util::write_file_atomic(p, j.dump(2));
}

// A cached time that was asked for less precision than `target_ci` and did not reach it
// (replay's quick timing, read by a later run that times closely) is measured again.
bool less_precise_than(const BaselineResult& r, double target_ci) {
  if (!r.timing || !(r.timing->target_ci > target_ci)) return false;
  return r.timing->ci95_us > target_ci * r.timing->median_us;
}

BaselineTiming to_baseline(const TimingOutcome& t, double target_ci) {
  BaselineTiming bt;
  bt.target_ci = target_ci;
  bt.median_us = t.median_s * 1e6;
  bt.ci95_us = t.ci95_s * 1e6;
  for (double x : t.samples_s) bt.samples_us.push_back(x * 1e6);
  bt.calls_per_batch = t.calls_per_batch;
  bt.measured_at = util::now_iso8601(util::TimePrecision::seconds);
  return bt;
}

struct GroupResult {
  std::optional<TimingOutcome> candidate;
  BaselineResult reference;
  std::optional<BaselineResult> library;  // set when the op has a library baseline
  bool baseline_disturbed = false;         // a baseline timed now (beside the candidate) was disturbed
  std::optional<double> reference_contention;  // the reference's median wait share, when timed now
};

// Times one case: the candidate (when given) and its baselines, batch by batch in alternation,
// so that their ratio is measured under the same machine conditions. A candidate's baselines
// are always timed beside it: a cached time was taken at another moment, and on a shared
// machine the same kernel's time moves several-fold within minutes (0.13x to 6.85x of its own
// earlier median in one model run here), so a ratio to it says as much about the moment as
// about the kernel. The cache serves timings of the baselines alone (`kope bench`, an attempt
// that is not a new incumbent, whose figures are its comparison's). Baselines measured here are
// written to the cache. The caller holds the timing lock.
// `resume`: the candidate's timer of the comparison with the incumbent on this case, whose
// samples the timing goes on from (the candidate's batches there alternated with the
// incumbent's, under the same conditions as these); its fresh-data check, passed there, is not
// run twice.
Result<GroupResult> time_case_group(const Backend& b, const spec::OpSpec& op, const spec::Case& c, const CaseData& data,
                                    Session* candidate, Session* reference, std::unique_ptr<Session>* library_session,
                                    const EvaluatorOptions& options, const EvalOptions& eo, uint64_t seed,
                                    const LibraryChoice& lib, CaseTimer* resume = nullptr,
                                    const std::shared_future<Result<fs::path>>* library_build = nullptr) {
  GroupResult g;
  std::mt19937_64 rng(seed);
  fs::path ref_path = baseline_path(b, op, c, false);
  fs::path lib_path = op.library_path ? baseline_path(b, op, c, true, lib) : fs::path();
  std::optional<BaselineResult> ref_cached, lib_cached;
  if (!options.refresh_baselines && candidate == nullptr) {
    ref_cached = read_baseline(ref_path);
    if (ref_cached && (!ref_cached->timing || less_precise_than(*ref_cached, eo.target_ci))) ref_cached.reset();
    if (op.library_path) lib_cached = read_baseline(lib_path);
    if (lib_cached && less_precise_than(*lib_cached, eo.target_ci)) lib_cached.reset();
  }
  TimingPlan cand_plan = make_plan(options, eo, true, b.device_clock());
  cand_plan.make_deferred = deferred_set_maker(b, op, options.min_call_timeout);
  TimingPlan base_plan = make_plan(options, eo, false);
  TimingPlan lib_plan = base_plan;
  lib_plan.device_clock = b.library_device_clock();  // a device baseline: timed like a candidate
  std::vector<CaseTimer*> group;
  std::optional<CaseTimer> own_cand_t, ref_t, lib_t;
  CaseTimer* cand_t = resume;
  if (candidate != nullptr) {
    if (cand_t == nullptr) cand_t = &own_cand_t.emplace(*candidate, op, c, data, cand_plan, rng());
    KOPE_ASSIGN(bool ok, resume != nullptr ? cand_t->resume() : cand_t->prepare());
    if (!ok) {
      g.candidate = cand_t->outcome();
      return g;
    }
    group.push_back(cand_t);
  }
  auto reference_broke = [&](const TimingOutcome& t) {
    return fail(ErrorKind::config, "the reference of {} failed while being timed on {}: {}", op.name, op.case_label(c),
                t.violation ? t.violation->message : std::string("?"));
  };
  if (ref_cached) {
    g.reference = *ref_cached;
  } else {
    if (reference == nullptr || data.sets.size() < static_cast<size_t>(k_rotating_sets)) {
      return fail(ErrorKind::internal, "no reference session to time {} on {}", op.name, op.case_label(c));
    }
    ref_t.emplace(*reference, op, c, data, base_plan, rng());
    KOPE_ASSIGN(bool ok, ref_t->prepare());
    if (!ok) return reference_broke(ref_t->outcome());
    group.push_back(&*ref_t);
  }
  if (op.library_path) {
    if (lib_cached) {
      g.library = *lib_cached;
      // The same variables may have been set by the environment then and by best now (or the
      // reverse): whether it is forced is decided by how it was chosen this time.
      if (g.library->config) mark_library_forced(*g.library->config, lib.setting, b.threads());
    } else {
      g.library = BaselineResult{};
      if (!*library_session) {
        // Built beside the verification (prebuild_library) when that could run; else now.
        bool prebuilt = library_build && library_build->valid() &&
                        library_build->wait_for(std::chrono::seconds(0)) == std::future_status::ready && library_build->get();
        auto so = prebuilt ? library_build->get() : b.build_trusted(op, *op.library_path, true);
        if (so) {
          uint64_t in = max_extent(op, true), out = max_extent(op, false);
          RunnerOptions ro = b.library_runner_options(in + out);
          ro.library_env = lib.env;
          KOPE_ASSIGN(*library_session, Session::start(*so, ro, in, out));
        } else {
          // Not cached: a missing library may be installed later.
          g.library->problem = fmt::format("the library baseline does not build: {}", util::truncate_text(so.error().message, 600, 8));
        }
      }
      if (*library_session && !(*library_session)->failure()) {
        g.library->config = parse_library_report((*library_session)->library_report(), op.library_name, lib.setting, lib.env,
                                                 b.threads());
      }
      if (*library_session && (*library_session)->failure()) {
        g.library->problem = "the library baseline cannot be loaded: " + (*library_session)->failure()->message;
      } else if (*library_session && lib_plan.device_clock) {
        // A device baseline is verified against the reference before it is timed (the CPU's are
        // checked by the suite test).
        KOPE_ASSIGN(VerifyOutcome v, verify_case(**library_session, op, c, data, std::max(milliseconds(60'000), options.min_call_timeout), rng()));
        if (v.violation || !v.check.ok) {
          g.library->problem = "the library baseline gives wrong results: " + (v.violation ? v.violation->message : v.check.first_mismatch);
          write_baseline(lib_path, op, c, true, *g.library);
        }
      }
      if (*library_session && !(*library_session)->failure() && g.library->problem.empty()) {
        lib_t.emplace(**library_session, op, c, data, lib_plan, rng());
        KOPE_ASSIGN(bool ok, lib_t->prepare());
        if (ok) {
          group.push_back(&*lib_t);
        } else {
          g.library->problem = "the library baseline failed: " + lib_t->outcome().violation->message;
          write_baseline(lib_path, op, c, true, *g.library);
          lib_t.reset();
        }
      }
    }
  }
  if (!group.empty()) KOPE_TRY(time_group(group, cand_plan));
  if (cand_t) {
    g.candidate = cand_t->outcome();
    if (!g.candidate->violation && cand_plan.fresh_check && resume == nullptr) {
      KOPE_TRY(cand_t->fresh_check());
      g.candidate = cand_t->outcome();
    }
    // A failed candidate ends the evaluation: no partial baseline is kept.
    if (g.candidate->violation) return g;
  }
  if (ref_t) {
    // A candidate failure can end the group early; the reference's samples are then too few.
    TimingOutcome t = ref_t->outcome();
    if (t.violation) return reference_broke(t);
    if (t.samples_s.size() < 3) {
      KOPE_TRY(time_group({&*ref_t}, base_plan));
      t = ref_t->outcome();
      if (t.violation) return reference_broke(t);
    }
    g.reference.timing = to_baseline(t, eo.target_ci);
    g.baseline_disturbed = g.baseline_disturbed || t.disturbed;
    if (!t.contention.empty()) g.reference_contention = median(t.contention);
    write_baseline(ref_path, op, c, false, g.reference);
  }
  if (lib_t) {
    TimingOutcome t = lib_t->outcome();
    if (!t.violation && t.samples_s.size() < 3) {
      KOPE_TRY(time_group({&*lib_t}, lib_plan));
      t = lib_t->outcome();
    }
    if (t.violation) {
      g.library->problem = "the library baseline failed: " + t.violation->message;
    } else {
      g.library->timing = to_baseline(t, eo.target_ci);
      g.baseline_disturbed = g.baseline_disturbed || t.disturbed;
    }
    write_baseline(lib_path, op, c, true, *g.library);
  }
  return g;
}

// --- fast verdicts: the candidate against the incumbent ------------------------------------------

struct ComparisonRun {
  IncumbentComparison comparison;
  // The candidate's timer per timed case, in order (every case when it ran through), its
  // samples for the comparison's figures and for a full timing to go on from.
  std::vector<std::unique_ptr<CaseTimer>> timers;
  // The candidate failed while being timed: the timed case's index and what happened.
  std::optional<std::pair<int, Violation>> violation;
};

// Times the candidate and the incumbent case by case in alternating batches (the order within a
// pair alternates too) and stops each case as the rule of eval/decision.h allows; the candidate
// then gets its fresh-data check on each case. An incumbent that fails makes the comparison
// `unavailable` (problem says why), never the candidate's verdict. The caller holds the timing lock.
Result<ComparisonRun> compare_with_incumbent(const spec::OpSpec& op, const std::vector<const spec::Case*>& timed,
                                             const std::function<Result<const CaseData*>(size_t)>& case_data, Session& candidate,
                                             Session& incumbent, const TimingPlan& cand_plan, const EvalOptions& eo,
                                             std::mt19937_64& rng, const Trace& trace) {
  ComparisonRun run;
  IncumbentComparison& cmp = run.comparison;
  cmp.alpha = eo.decision_alpha;
  cmp.margin = eo.incumbent_margin;
  DecisionRule rule;
  rule.alpha = eo.decision_alpha;
  rule.margin = eo.incumbent_margin;
  rule.cases = static_cast<int>(timed.size());
  rule.precision = std::max(0.005, eo.target_ci / 2);
  rule.clean_contention = k_clean_contention;
  TimingPlan inc_plan = cand_plan;
  inc_plan.fresh_check = false;
  auto t0 = Clock::now();
  // Each case's share of the comparison budget (EvalOptions::comparison_seconds).
  const double budget_share = eo.comparison_seconds > 0 ? eo.comparison_seconds / static_cast<double>(timed.size()) : 0.0;
  std::vector<CaseRatio> estimates;
  CaseSides sides = CaseSides::none;
  for (const spec::Case* c : timed) {
    KOPE_ASSIGN(const CaseData * data, case_data(static_cast<size_t>(c->index)));
    auto cand_timer = std::make_unique<CaseTimer>(candidate, op, *c, *data, cand_plan, rng());
    CaseTimer& ct = *cand_timer;
    CaseTimer it(incumbent, op, *c, *data, inc_plan, rng());
    KOPE_ASSIGN(bool ok, ct.prepare());
    if (!ok) {
      run.violation = {c->index, *ct.outcome().violation};
      return run;
    }
    // Both kernels on the same pages (start_incumbent shares the candidate's buffers).
    const bool shared = incumbent.arena().in_base() == candidate.arena().in_base();
    if (shared) it.share_data_of(ct);
    KOPE_ASSIGN(ok, it.prepare());
    auto incumbent_failed = [&](const TimingOutcome& t) {
      cmp.decision = IncumbentDecision::unavailable;
      cmp.problem = fmt::format("the incumbent failed while being timed on case {}: {}", op.case_label(*c),
                                t.violation ? t.violation->message : std::string("?"));
      run.timers.clear();
      return std::move(run);
    };
    if (!ok) return incumbent_failed(it.outcome());
    trace(fmt::format("case {}: both kernels calibrated", c->index));
    auto case_start = Clock::now();
    std::optional<Error> error;
    bool cand_failed = false, inc_failed = false;
    size_t index = 0;
    auto next = [&](PairSample& p) -> PairStatus {
      // Which kernel goes first alternates, so neither always inherits the other's cache state;
      // the second runs on the CPU the first ended on (same-CPU rounds, eval/measure.h).
      CaseTimer* order[2] = {&ct, &it};
      if (index++ % 2 == 1) std::swap(order[0], order[1]);
      std::optional<int> cpu;
      if (shared) ct.move_shared_data();
      for (CaseTimer* t : order) {
        auto r = t->sample(&cpu);
        if (!r) {
          error = r.error();
          return PairStatus::failed;
        }
        if (!*r) {
          (t == &ct ? cand_failed : inc_failed) = true;
          return PairStatus::failed;
        }
      }
      TimingOutcome oc = ct.outcome(), oi = it.outcome();
      p.candidate = oc.samples_s.back();
      p.incumbent = oi.samples_s.back();
      p.contention = std::max(oc.contention.empty() ? 0.0 : oc.contention.back(), oi.contention.empty() ? 0.0 : oi.contention.back());
      p.outside = std::max(oc.outside_load, oi.outside_load);
      double elapsed = std::chrono::duration<double>(Clock::now() - case_start).count();
      if (elapsed >= eo.max_seconds_per_case) return PairStatus::time_up;
      return budget_share > 0 && elapsed >= budget_share ? PairStatus::budget_spent : PairStatus::ok;
    };
    CaseRatio est = run_case(rule, next, sides);
    if (error) return std::unexpected(*error);
    if (cand_failed) {
      run.violation = {c->index, *ct.outcome().violation};
      return run;
    }
    if (inc_failed) return incumbent_failed(it.outcome());
    trace(fmt::format("case {}: compared, {} pairs", c->index, est.pairs_total));
    if (cand_plan.fresh_check) {
      KOPE_ASSIGN(bool fresh_ok, ct.fresh_check());
      if (!fresh_ok) {
        run.violation = {c->index, *ct.outcome().violation};
        return run;
      }
    }
    CaseComparison cc;
    cc.case_index = c->index;
    cc.label = op.case_label(*c);
    cc.ratio = est.ratio;
    cc.lower = est.lower;
    if (std::isfinite(est.upper)) cc.upper = est.upper;
    cc.pairs = static_cast<int>(est.pairs);
    cc.pairs_total = static_cast<int>(est.pairs_total);
    cc.looks = est.looks;
    cc.contention = est.contention;
    {
      // Each kernel's own figures over its batches of the comparison (the side-by-side times).
      TimingOutcome oc = ct.outcome(), oi = it.outcome();
      auto median_of = [](const std::vector<double>& v) { return v.empty() ? 0.0 : median(v); };
      cc.candidate_us = median_of(oc.samples_s) * 1e6;
      cc.incumbent_us = median_of(oi.samples_s) * 1e6;
      cc.candidate_contention = median_of(oc.contention);
      cc.incumbent_contention = median_of(oi.contention);
      cc.outside_load = std::max(oc.outside_load, oi.outside_load);
    }
    cmp.outside_load = std::max(cmp.outside_load, cc.outside_load);
    cmp.disturbed = cmp.disturbed || est.disturbed;
    cc.seconds = std::chrono::duration<double>(Clock::now() - case_start).count();
    trace(fmt::format("case {}: fresh-data check done", c->index));
    cmp.pairs += cc.pairs_total;
    cmp.contention = std::max(cmp.contention, cc.contention);
    cmp.cases.push_back(std::move(cc));
    sides = add_case_side(sides, est, rule);
    estimates.push_back(est);
    run.timers.push_back(std::move(cand_timer));
  }
  CombinedRatio combined = combine_cases(estimates, rule);
  cmp.decision = combined.decision;
  cmp.ratio = combined.ratio;
  cmp.lower = combined.lower;
  if (std::isfinite(combined.upper)) cmp.upper = combined.upper;
  cmp.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  return run;
}

std::string describe_comparison(const IncumbentComparison& c) {
  if (c.decision == IncumbentDecision::unavailable) return "no comparison with the incumbent: " + c.problem;
  return fmt::format("vs the incumbent: {} ({:.3g}x, interval [{:.3g}, {}] at {:.0f}%, {} pairs of batches, {:.1f} s{}){}",
                     incumbent_decision_name(c.decision), c.ratio, c.lower, c.upper ? fmt::format("{:.3g}", *c.upper) : "inf",
                     100 * (1 - c.alpha), c.pairs, c.seconds, c.disturbed ? fmt::format(", disturbed: {:.0f}% contention", 100 * c.contention) : "",
                     c.full_timing ? "" : "; timings are the comparison's early figures");
}

// --- the evaluator -----------------------------------------------------------------------------

void mark_unchecked(EvalResult& r, const spec::OpSpec& op, size_t from, std::string_view why) {
  for (size_t i = from; i < op.cases.size(); ++i) {
    CaseCheck c;
    c.case_index = static_cast<int>(i);
    c.label = op.case_label(op.cases[i]);
    c.ok = false;
    c.first_mismatch = std::string(why);
    if (i < r.cases.size()) {
      r.cases[i] = c;
    } else {
      r.cases.push_back(c);
    }
  }
}

// The library baseline's build, started once the candidate builds and run beside its
// verification: a trusted compile, often of a heavy header (oneDNN's takes about 2 s), that
// timing would otherwise wait for with the timing lock held. Like every compile it holds the
// machine lock shared, but it waits for it briefly only (k_prebuild_lock_wait, the time other
// work takes to pass the lock's turnstile): while another kope times, it gives up (and timing
// builds the library itself), so that it never waits long for a lock its own evaluation may
// hold by then. The result is also the compile cache's entry.
constexpr std::chrono::milliseconds k_prebuild_lock_wait{200};
std::shared_future<Result<fs::path>> prebuild_library(const Backend& b, const spec::OpSpec& op) {
  return std::async(std::launch::async, [&b, &op]() -> Result<fs::path> {
           KOPE_ASSIGN(util::SharedLock work, util::SharedLock::acquire(util::timing_lock_path(), util::SharedLock::Mode::shared,
                                                                          k_prebuild_lock_wait));
           return b.build_trusted(op, *op.library_path, true);
         })
      .share();
}

// --- one evaluation's steps --------------------------------------------------------------------

// What one evaluation's steps share: the op, the result being filled in, the notes for its
// diagnostics, the reference pipeline, the candidate's runner and the timing lock. The members
// are torn down in reverse: the timing lock first, then the candidate's runner, then the
// reference pipeline.
struct EvalRun {
  EvalRun(const Backend& backend, const spec::OpSpec& op_in, std::string_view source, const EvalOptions& options_in,
          const EvaluatorOptions& evaluator_options)
      : op(op_in), options(options_in), res(new_result(backend, op_in, source, options_in)), rng(res.seed ^ 0x6b6f7065ULL),
        in_bytes(max_extent(op_in, true)), out_bytes(max_extent(op_in, false)),
        ref(backend, op_in, res.seed, options_in.time, evaluator_options) {}

  static EvalResult new_result(const Backend& backend, const spec::OpSpec& op, std::string_view source, const EvalOptions& options) {
    EvalResult r;
    r.op = op.name;
    r.target = backend.target().str();
    r.toolchain = backend.toolchain_id();
    r.code_hash = util::sha256_hex(source);
    r.seed = options.seed.value_or(util::random_seed());
    return r;
  }

  // The result as it stands, with the evaluation's wall time.
  EvalResult finish() {
    res.wall_seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    return res;
  }

  // Ends the evaluation with a failure verdict: cases from `unchecked_from` on are marked `why`,
  // and the diagnostics are the notes followed by the candidate's output.
  EvalResult fail(Verdict v, std::string message, size_t unchecked_from, std::string_view why) {
    timing_lock.reset();
    ref.stop();
    res.verdict = v;
    res.message = std::move(message);
    res.diagnostics = notes.text_with_output(session->output_tail());
    mark_unchecked(res, op, unchecked_from, why);
    session.reset();
    return finish();
  }

  // Ends the evaluation with the candidate's failure while timed on case `c`: no timings are kept.
  EvalResult fail_timing(const spec::Case& c, const Violation& v) {
    timing_lock.reset();
    res.timing.clear();
    return fail(v.verdict, fmt::format("case {}: {}", op.case_label(c), v.message), op.cases.size(), "");
  }

  const spec::OpSpec& op;
  const EvalOptions& options;
  Clock::time_point t0 = Clock::now();
  EvalResult res;
  Notes notes;
  Trace trace;
  std::mt19937_64 rng;
  uint64_t in_bytes = 0, out_bytes = 0;  // the largest case's inputs and outputs (the runners' arenas)
  ReferencePipeline ref;
  std::unique_ptr<Session> session;             // the candidate's runner, from the build on
  std::optional<util::SharedLock> timing_lock;  // held while timing
};

// The incumbent's runner for fast verdicts; the comparison says why there is none.
struct IncumbentRunner {
  std::unique_ptr<Session> session;
  std::optional<IncumbentComparison> comparison;  // set when the evaluation compares with an incumbent
};

// The baselines the timed cases are measured against.
struct Baselines {
  LibraryChoice choice;                    // the library's configuration
  Session* reference = nullptr;            // the reference pipeline's runner
  std::unique_ptr<Session> library;        // started by the first case that times the library
  std::shared_future<Result<fs::path>> library_build;  // its build, started beside the verification
};

// The outcome of the comparison with the incumbent.
struct Compared {
  std::optional<IncumbentComparison> comparison;
  // Per timed case, the candidate's timer in the comparison (every case when it ran through):
  // its samples are the case's figures when the comparison stands, and a full timing goes on
  // from them and from its fresh-data check.
  std::vector<std::unique_ptr<CaseTimer>> timers;
  // The candidate is timed in full: there is no comparison, or it found the candidate faster
  // or could not be made.
  bool full = true;
  // The candidate failed while being compared: on which timed case, and how.
  std::optional<std::pair<const spec::Case*, Violation>> violation;
};

// One timed case's timing: the candidate's and the baselines'.
struct TimedCase {
  TimingOutcome candidate;
  GroupResult group;
  Roof roof;                      // the case's roofline from the profile (case_roofline)
  double bandwidth_now_gbps = 0;  // the triad's bandwidth around the timing (bandwidth_now_applies); 0: not read
};

class SandboxedEvaluator final : public Evaluator {
 public:
  SandboxedEvaluator(std::unique_ptr<Backend> backend, HardwareProfile hw, EvaluatorOptions options)
      : m_backend(std::move(backend)), m_hw(m_backend->device_profile().value_or(std::move(hw))), m_options(options) {}

  Target target() const override { return m_backend->target(); }
  std::string toolchain_id() const override { return m_backend->toolchain_id(); }
  std::string backend() const override { return m_backend->name(); }
  const HardwareProfile& hardware() const override { return m_hw; }

  Result<EvalResult> evaluate(const spec::OpSpec& op, std::string_view source, const EvalOptions& options) override;

 private:
  milliseconds call_timeout(double reference_seconds) const {
    auto scaled = milliseconds(static_cast<int64_t>(reference_seconds * m_options.call_timeout_factor * 1000));
    return std::max(m_options.min_call_timeout, scaled);
  }

  // The steps of evaluate(), in order. A step that returns an EvalResult ends the evaluation
  // with it.
  Result<std::optional<EvalResult>> build(EvalRun& run, std::string_view source) const;
  Result<std::optional<EvalResult>> verify(EvalRun& run) const;
  EvalResult pass_untimed(EvalRun& run) const;
  IncumbentRunner start_incumbent(EvalRun& run, std::future<Result<BuildOutcome>>& build) const;
  Status lock_for_timing(EvalRun& run) const;
  Result<Compared> compare(EvalRun& run, IncumbentRunner& incumbent) const;
  Result<TimedCase> time_case(EvalRun& run, const spec::Case& c, size_t i, const Compared& compared, Baselines& baselines) const;
  std::optional<RuleVerdict> judge_case(EvalRun& run, const spec::Case& c, const TimedCase& t,
                                        const std::optional<IncumbentComparison>& comparison) const;
  EvalResult summarise(EvalRun& run, std::optional<IncumbentComparison> comparison) const;

  // judge_case's parts.
  CaseTiming case_figures(EvalRun& run, const spec::Case& c, const TimedCase& t) const;
  void note_waits(EvalRun& run, const CaseTiming& ct, const TimedCase& t, const std::optional<IncumbentComparison>& comparison) const;

  std::unique_ptr<Backend> m_backend;
  HardwareProfile m_hw;
  EvaluatorOptions m_options;
};

Result<EvalResult> SandboxedEvaluator::evaluate(const spec::OpSpec& op_in, std::string_view source, const EvalOptions& options) {
  const spec::OpSpec op = m_backend->baseline_op(op_in);  // with the library baseline of the backend's device
  KOPE_TRY(check_op_fits(op, *m_backend));
  EvalRun run(*m_backend, op, source, options, m_options);
  run.ref.start();
  // Fast verdicts: the incumbent is built beside the candidate (normally a compile-cache hit).
  std::future<Result<BuildOutcome>> incumbent_build;
  if (options.time && options.incumbent_source && !op.timed_cases().empty()) {
    incumbent_build = std::async(std::launch::async, [this, &op, &options] {
      return m_backend->build_candidate(op, *options.incumbent_source, options.extra_flags);
    });
  }

  KOPE_ASSIGN(std::optional<EvalResult> unbuilt, build(run, source));
  if (unbuilt) return *unbuilt;
  Baselines baselines;
  if (options.time && op.library_path && !op.timed_cases().empty()) baselines.library_build = prebuild_library(*m_backend, op);
  KOPE_ASSIGN(std::optional<EvalResult> wrong, verify(run));
  if (wrong) return *wrong;
  auto timed = op.timed_cases();
  if (!options.time || timed.empty()) return pass_untimed(run);

  // --library-config best selects (and caches) the library's configuration before the lock.
  KOPE_ASSIGN(baselines.choice, choose_library(m_hw, op, m_options, options));
  IncumbentRunner incumbent = start_incumbent(run, incumbent_build);
  KOPE_ASSIGN(baselines.reference, run.ref.session());
  KOPE_TRY(lock_for_timing(run));
  KOPE_ASSIGN(Compared compared, compare(run, incumbent));
  if (compared.violation) return run.fail_timing(*compared.violation->first, compared.violation->second);
  for (size_t i = 0; i < timed.size(); ++i) {
    KOPE_ASSIGN(TimedCase t, time_case(run, *timed[i], i, compared, baselines));
    if (t.candidate.violation) return run.fail_timing(*timed[i], *t.candidate.violation);
    if (auto bad = judge_case(run, *timed[i], t, compared.comparison)) {
      return run.fail(bad->verdict, std::move(bad->message), op.cases.size(), "");
    }
  }
  return summarise(run, std::move(compared.comparison));
}

// Build: the candidate's sandboxed build and its runner. Ends the evaluation when the kernel
// does not compile, is rejected or cannot be loaded.
Result<std::optional<EvalResult>> SandboxedEvaluator::build(EvalRun& run, std::string_view source) const {
  // Compiles and verification hold the machine lock shared: they wait while any kope times.
  KOPE_ASSIGN(util::SharedLock build_work, util::lock_for_work());
  KOPE_ASSIGN(BuildOutcome build, m_backend->build_candidate(run.op, source, run.options.extra_flags));
  build_work.release();
  run.trace(fmt::format("built ({}{})", build.message, build.cached ? ", cached" : ""));
  EvalResult& res = run.res;
  res.compile_seconds = build.seconds;
  res.compile_cached = build.cached;
  if (build.status != BuildOutcome::Status::ok) {
    run.ref.stop();
    bool rejected = build.status == BuildOutcome::Status::rejected;
    res.verdict = rejected ? Verdict::rejected : Verdict::compile_error;
    res.message = build.message;
    res.diagnostics = build.diagnostics;
    mark_unchecked(res, run.op, 0, rejected ? "not run: the kernel was rejected" : "not run: the kernel did not compile");
    return run.finish();
  }
  run.notes.add(build.diagnostics);

  KOPE_ASSIGN(run.session, Session::start(build.shared_object, m_backend->runner_options(proto::Mode::candidate, run.in_bytes + run.out_bytes),
                                          run.in_bytes, run.out_bytes));
  run.trace("candidate runner started");
  if (run.session->failure()) {
    return run.fail(run.session->failure()->verdict, "cannot be loaded: " + run.session->failure()->message, 0,
                    "not run: the kernel could not be loaded");
  }
  return std::nullopt;
}

// Verify: every case, in order, as soon as its expected outputs exist. Ends the evaluation
// when the kernel fails on a case or gives a wrong result on any.
Result<std::optional<EvalResult>> SandboxedEvaluator::verify(EvalRun& run) const {
  const spec::OpSpec& op = run.op;
  EvalResult& res = run.res;
  std::optional<size_t> first_wrong;
  size_t wrong = 0;
  res.cases.clear();
  for (size_t i = 0; i < op.cases.size(); ++i) {
    const spec::Case& c = op.cases[i];
    KOPE_ASSIGN(const CaseData * data, run.ref.wait(i));
    run.trace(fmt::format("case {}: reference outputs ready", i));
    KOPE_ASSIGN(util::SharedLock verify_work, util::lock_for_work());
    KOPE_ASSIGN(VerifyOutcome v, verify_case(*run.session, op, c, *data, call_timeout(data->reference_call_seconds), run.rng()));
    verify_work.release();
    run.trace(fmt::format("case {}: verified", i));
    if (v.violation) {
      res.cases.push_back(v.check);
      res.cases.back().ok = false;
      res.cases.back().first_mismatch = v.violation->message;
      return run.fail(v.violation->verdict, fmt::format("case {}: {}", op.case_label(c), v.violation->message), i + 1,
                      "not checked: the kernel failed on an earlier case");
    }
    if (!v.check.ok) {
      ++wrong;
      if (!first_wrong) first_wrong = i;
    }
    res.cases.push_back(v.check);
  }
  if (first_wrong) {
    const CaseCheck& w = res.cases[*first_wrong];
    return run.fail(Verdict::wrong_result,
                    fmt::format("case {}: {}{}", w.label, w.first_mismatch,
                                wrong > 1 ? fmt::format("; {} of {} cases wrong", wrong, op.cases.size()) : std::string()),
                    op.cases.size(), "");
  }
  res.verdict = Verdict::correct;
  return std::nullopt;
}

// A correct kernel that is not timed (not asked, or the op has no timed cases).
EvalResult SandboxedEvaluator::pass_untimed(EvalRun& run) const {
  run.session->close();
  run.ref.stop();
  run.res.message = fmt::format("matches the reference on all {} cases{}", run.op.cases.size(),
                                run.options.time ? " (the op has no timed cases)" : " (not timed)");
  run.res.diagnostics = run.notes.text();
  return run.finish();
}

// The incumbent (fast verdicts): its build was started beside the candidate's. An incumbent
// that cannot be run leaves a comparison that says why, never the candidate's verdict.
IncumbentRunner SandboxedEvaluator::start_incumbent(EvalRun& run, std::future<Result<BuildOutcome>>& build) const {
  IncumbentRunner inc;
  if (!build.valid()) return inc;
  IncumbentComparison& cmp = inc.comparison.emplace();
  cmp.alpha = run.options.decision_alpha;
  cmp.margin = run.options.incumbent_margin;
  auto ib = build.get();
  if (!ib) {
    cmp.problem = "the incumbent could not be built: " + ib.error().message;
  } else if (ib->status != BuildOutcome::Status::ok) {
    cmp.problem = "the incumbent did not build: " + ib->message;
  } else {
    // On the candidate's buffers: both kernels run on the same pages (CaseTimer::share_data_of).
    auto is = Session::start(ib->shared_object, m_backend->runner_options(proto::Mode::candidate, run.in_bytes + run.out_bytes),
                             run.in_bytes, run.out_bytes, &run.session->arena());
    if (!is) {
      cmp.problem = "the incumbent's runner did not start: " + is.error().message;
    } else if ((*is)->failure()) {
      cmp.problem = "the incumbent cannot be loaded: " + (*is)->failure()->message;
    } else {
      inc.session = std::move(*is);
    }
  }
  run.trace(fmt::format("incumbent {}", inc.session ? "ready" : cmp.problem));
  return inc;
}

// Timing is exclusive on this machine.
Status SandboxedEvaluator::lock_for_timing(EvalRun& run) const {
  KOPE_ASSIGN(run.timing_lock, util::lock_for_timing());
  run.trace("timing lock held");
  if (run.options.quiet_wait_seconds > 0) {
    double load = wait_until_quiet(run.options.quiet_wait_seconds);
    run.trace(fmt::format("waited for a quiet machine: other work uses {:.0f}% of the CPUs", 100 * load));
  }
  return {};
}

// Compare: the candidate against the incumbent, when there is one; the comparison decides
// whether the candidate is timed in full.
Result<Compared> SandboxedEvaluator::compare(EvalRun& run, IncumbentRunner& incumbent) const {
  Compared out;
  out.comparison = std::move(incumbent.comparison);
  if (incumbent.session) {
    auto timed = run.op.timed_cases();
    TimingPlan cand_plan = make_plan(m_options, run.options, true, m_backend->device_clock());
    cand_plan.make_deferred = deferred_set_maker(*m_backend, run.op, m_options.min_call_timeout);
    KOPE_ASSIGN(ComparisonRun cr, compare_with_incumbent(run.op, timed, [&](size_t i) { return run.ref.wait(i); }, *run.session,
                                                         *incumbent.session, cand_plan, run.options, run.rng, run.trace));
    incumbent.session->close();
    incumbent.session.reset();
    run.trace(fmt::format("compared with the incumbent: {}", incumbent_decision_name(cr.comparison.decision)));
    if (cr.violation) {
      const spec::Case* c = *std::find_if(timed.begin(), timed.end(), [&](const spec::Case* x) { return x->index == cr.violation->first; });
      out.violation.emplace(c, cr.violation->second);
      return out;
    }
    out.comparison = cr.comparison;
    if (cr.timers.size() == timed.size()) out.timers = std::move(cr.timers);
    // Not a new incumbent: the comparison's figures stand, with the (cached) baselines.
    out.full = cr.comparison.decision == IncumbentDecision::faster || cr.comparison.decision == IncumbentDecision::unavailable;
  }
  if (out.comparison) out.comparison->full_timing = out.full;
  return out;
}

// Time: timed case `c` (the i-th) with its baselines. In a full timing the candidate is timed
// beside them (going on from its comparison's samples when there are some); otherwise its
// comparison's figures stand and only the baselines are timed (or read from the cache).
Result<TimedCase> SandboxedEvaluator::time_case(EvalRun& run, const spec::Case& c, size_t i, const Compared& compared,
                                                Baselines& baselines) const {
  KOPE_ASSIGN(const CaseData * data, run.ref.wait(static_cast<size_t>(c.index)));
  // The bandwidth now, read before and after the group (the timing lock is held).
  TimedCase out;
  out.roof = case_roofline(m_hw, run.op, c);
  const Roof& roof = out.roof;
  const bool read_bandwidth = bandwidth_now_applies(m_backend->name(), m_hw, roof);
  double before = read_bandwidth ? measure_bandwidth_now(roof.working_set_bytes, m_backend->threads(), k_bandwidth_now_reps) : 0;
  if (!compared.full) {
    KOPE_ASSIGN(out.group, time_case_group(*m_backend, run.op, c, *data, nullptr, baselines.reference, &baselines.library, m_options,
                                           run.options, run.rng(), baselines.choice, nullptr, &baselines.library_build));
    out.candidate = compared.timers[i]->outcome();
  } else {
    CaseTimer* resume = compared.timers.empty() ? nullptr : compared.timers[i].get();
    KOPE_ASSIGN(out.group, time_case_group(*m_backend, run.op, c, *data, run.session.get(), baselines.reference, &baselines.library,
                                           m_options, run.options, run.rng(), baselines.choice, resume, &baselines.library_build));
    run.trace(fmt::format("case {}: timed", c.index));
    out.candidate = *out.group.candidate;
  }
  if (read_bandwidth) {
    double after = measure_bandwidth_now(roof.working_set_bytes, m_backend->threads(), k_bandwidth_now_reps);
    out.bandwidth_now_gbps = before > 0 && after > 0 ? 0.5 * (before + after) : std::max(before, after);
    run.trace(fmt::format("case {}: bandwidth now {:.1f} GB/s (before {:.1f}, after {:.1f}; the profile's {:.1f})", c.index,
                          out.bandwidth_now_gbps, before, after, roof.gbps));
  }
  return out;
}

// Figures: one timed case's figures from its timing, judged by the verdict rules
// (verdict_rules.h). Returns the failure verdict when the figures show the work is not being
// done; otherwise the case's figures join the result.
std::optional<RuleVerdict> SandboxedEvaluator::judge_case(EvalRun& run, const spec::Case& c, const TimedCase& t,
                                                          const std::optional<IncumbentComparison>& comparison) const {
  CaseTiming ct = case_figures(run, c, t);
  // A kernel that leaves the work to the host shows as a device that is idle for most of the
  // call (the static inspection rejects the usual ways; this catches the rest).
  const TimingOutcome& ot = t.candidate;
  if (auto bad = rule_cpu_fallback(ct.label, ot.median_s, ot.wall_samples_s.empty() ? 0.0 : median(ot.wall_samples_s))) return bad;
  note_waits(run, ct, t, comparison);
  // The working-set roofline; a time beyond it by more than the CI is the model's bug.
  if (auto note = apply_roofline(ct, t.roof, run.op, t.bandwidth_now_gbps)) {
    run.res.roofline_notes.push_back(*note);
    run.notes.add(*note);
  }
  if (auto bad = rule_below_floor(ct.label, ct.median_us, ct.floor_us, m_options.floor_margin, run.op.flops_for(c), run.op.bytes_for(c))) {
    return bad;
  }
  run.res.timing.push_back(std::move(ct));
  return std::nullopt;
}

// The case's times from the candidate's timing and the baselines, its floor and its waits, with
// the notes on a baseline's problem and on a floor the baselines beat.
CaseTiming SandboxedEvaluator::case_figures(EvalRun& run, const spec::Case& c, const TimedCase& timed) const {
  const spec::OpSpec& op = run.op;
  const TimingOutcome& t = timed.candidate;
  const BaselineResult& rb = timed.group.reference;
  const std::optional<BaselineResult>& lb = timed.group.library;
  CaseTiming ct;
  ct.case_index = c.index;
  ct.label = op.case_label(c);
  ct.median_us = t.median_s * 1e6;
  ct.ci95_us = t.ci95_s * 1e6;
  for (double smp : t.samples_s) ct.samples_us.push_back(smp * 1e6);
  ct.calls_per_batch = t.calls_per_batch;
  ct.reference_us = rb.timing->median_us;
  ct.reference_ci95_us = rb.timing->ci95_us;
  if (lb && lb->timing) {
    ct.library_us = lb->timing->median_us;
    ct.library_ci95_us = lb->timing->ci95_us;
    if (lb->config && !run.res.library_config) run.res.library_config = lb->config;
  } else if (lb && !lb->problem.empty()) {
    run.notes.add(fmt::format("case {}: {}", ct.label, lb->problem));
  }
  ct.floor_us = m_hw.floor_seconds(compute_floor_applies(op) ? op.flops_for(c) : 0, op.bytes_for(c), op.case_buffer_bytes(c)) /
                HardwareProfile::k_floor_headroom * 1e6;
  LoweredFloor lowered = lower_floor_to_baselines(ct.label, ct.floor_us, {ct.reference_us, ct.library_us.value_or(0.0)});
  ct.floor_us = lowered.floor_us;
  for (std::string& note : lowered.notes) run.notes.add(std::move(note));
  ct.fresh_us = t.fresh_s * 1e6;
  if (!t.wall_samples_s.empty()) ct.wall_us = median(t.wall_samples_s) * 1e6;
  ct.contention = t.contention.empty() ? 0.0 : median(t.contention);
  ct.outside_load = t.outside_load;
  ct.disturbed = t.disturbed || timed.group.baseline_disturbed;
  return ct;
}

// The note on the case's waits for a CPU, when they make its figures doubtful.
void SandboxedEvaluator::note_waits(EvalRun& run, const CaseTiming& ct, const TimedCase& timed,
                                    const std::optional<IncumbentComparison>& comparison) const {
  const TimingOutcome& t = timed.candidate;
  if (ct.disturbed) {
    run.notes.add(fmt::format("case {}: timing disturbed by other load: the {} waited for a CPU in too many batches to trust "
                              "the figures (the kernel's median wait {:.0f}% of its runnable time; other work used {:.0f}% of its CPUs)",
                              ct.label, t.disturbed ? "kernel" : "baseline timed beside it", 100 * ct.contention, 100 * ct.outside_load));
  } else if (ct.contention > k_busy_contention && !outside_load_seen(ct.outside_load)) {
    // Waits of its own: worth a note only when a kernel timed on the same CPUs in this
    // evaluation waited clearly less (a wait every kernel shows here is the machine's).
    std::vector<WaitComparator> others;
    if (timed.group.reference_contention) others.push_back({"the reference", *timed.group.reference_contention});
    if (comparison) {
      for (const CaseComparison& cc : comparison->cases) {
        if (cc.case_index == ct.case_index && cc.incumbent_us > 0) others.push_back({"the incumbent (timed beside it)", cc.incumbent_contention});
      }
    }
    if (auto note = own_waits_note("case " + ct.label, ct.contention, ct.outside_load, others, m_hw.cores, t.threads)) {
      run.notes.add(*note);
    }
  } else if (ct.contention > k_busy_contention) {
    run.notes.add(fmt::format("case {}: timings disturbed by other load (the kernel waited for a CPU {:.0f}% of the time; {} of {} batches "
                              "undisturbed)",
                              ct.label, 100 * ct.contention, std::count_if(t.contention.begin(), t.contention.end(), [](double x) { return x < k_clean_contention; }),
                              t.contention.size()));
  }
}

// Figures: the op's speedups over the timed cases and the verdict's message; the timing lock
// and the runners go.
EvalResult SandboxedEvaluator::summarise(EvalRun& run, std::optional<IncumbentComparison> comparison) const {
  run.timing_lock.reset();
  run.session->close();
  run.ref.stop();
  EvalResult& res = run.res;
  std::vector<double> vs_ref, vs_lib, fractions;
  for (const CaseTiming& ct : res.timing) {
    vs_ref.push_back(ct.reference_us / ct.median_us);
    if (ct.library_us) vs_lib.push_back(*ct.library_us / ct.median_us);
    if (ct.fraction_of_roofline > 0) fractions.push_back(ct.fraction_of_roofline);
  }
  size_t disturbed = static_cast<size_t>(std::count_if(res.timing.begin(), res.timing.end(), [](const CaseTiming& t) { return t.disturbed; }));
  res.disturbed = disturbed > 0;
  res.speedup_vs_reference = geomean(vs_ref);
  if (!vs_lib.empty()) res.speedup_vs_library = geomean(vs_lib);
  if (!fractions.empty()) res.fraction_of_roofline = geomean(fractions);
  std::string forced = res.library_config ? res.library_config->forced_note() : std::string();
  res.message = fmt::format("matches the reference on all {} cases; {:.3g}x the reference's speed{} (geomean over {} timed case{})",
                            run.op.cases.size(), *res.speedup_vs_reference,
                            res.speedup_vs_library ? fmt::format(", {:.3g}x the library's{}", *res.speedup_vs_library, forced) : std::string(),
                            res.timing.size(), res.timing.size() == 1 ? "" : "s");
  if (res.disturbed) res.message += fmt::format("; timing disturbed by other load on {} of {} timed cases", disturbed, res.timing.size());
  if (comparison) {
    if (comparison->decision == IncumbentDecision::unavailable) {
      run.notes.add(describe_comparison(*comparison));
    } else {
      res.message += "; " + describe_comparison(*comparison);
    }
    res.incumbent = comparison;
  }
  res.diagnostics = run.notes.text();
  return run.finish();
}

}  // namespace

std::unique_ptr<Evaluator> make_sandboxed_evaluator(std::unique_ptr<Backend> backend, const HardwareProfile& hw,
                                                    const EvaluatorOptions& options) {
  return std::unique_ptr<Evaluator>(new SandboxedEvaluator(std::move(backend), hw, options));
}

Result<std::unique_ptr<Evaluator>> make_cpu_evaluator(const HardwareProfile& hw, const EvaluatorOptions& options) {
  KOPE_ASSIGN(auto backend, make_cpu_backend(hw, options));
  return make_sandboxed_evaluator(std::move(backend), hw, options);
}

Result<std::vector<CaseBaselines>> measure_cpu_baselines(const HardwareProfile& hw, const spec::OpSpec& op,
                                                         const EvaluatorOptions& options, const EvalOptions& timing,
                                                         const std::function<void(std::string_view)>& progress) {
  return measure_baselines("cpu", hw, op, options, timing, progress);
}

Result<std::vector<CaseBaselines>> measure_baselines(std::string_view backend_name, const HardwareProfile& hw, const spec::OpSpec& op_in,
                                                     const EvaluatorOptions& options, const EvalOptions& timing,
                                                     const std::function<void(std::string_view)>& progress) {
  KOPE_ASSIGN(auto backend, make_backend(backend_name, hw, options));
  const spec::OpSpec op = backend->baseline_op(op_in);
  const HardwareProfile roof_hw = backend->device_profile().value_or(hw);
  KOPE_TRY(check_op_fits(op, *backend));
  std::vector<CaseBaselines> out;
  auto timed = op.timed_cases();
  if (timed.empty()) return out;
  KOPE_ASSIGN(LibraryChoice library_choice, choose_library(hw, op, options, timing));
  // Everything cached: no runner at all.
  bool all_cached = !options.refresh_baselines;
  for (const spec::Case* c : timed) {
    auto usable = [&](const std::optional<BaselineResult>& r) { return r && !less_precise_than(*r, timing.target_ci); };
    all_cached = all_cached && usable(read_baseline(baseline_path(*backend, op, *c, false)));
    if (op.library_path) all_cached = all_cached && usable(read_baseline(baseline_path(*backend, op, *c, true, library_choice)));
  }
  std::unique_ptr<Session> ref_session;
  std::unique_ptr<Session> library_session;
  uint64_t seed = timing.seed.value_or(util::random_seed());
  for (const spec::Case* c : timed) {
    CaseBaselines cb;
    cb.case_index = c->index;
    cb.label = op.case_label(*c);
    cb.flops = op.flops_for(*c);
    cb.bytes = op.bytes_for(*c);
    cb.roof = case_roofline(roof_hw, op, *c);
    cb.roofline_us = cb.roof.seconds * 1e6;
    CaseData data;
    if (!all_cached) {
      if (!ref_session) {
        KOPE_ASSIGN(util::SharedLock build_work, util::lock_for_work());
        KOPE_ASSIGN(ref_session, start_reference(*backend, op));
      }
      if (progress) progress(fmt::format("{} {}: computing reference outputs", op.name, cb.label));
      KOPE_ASSIGN(util::SharedLock work, util::lock_for_work());
      data = generate_case_data(op, *c, seed ^ static_cast<uint64_t>(c->index), k_rotating_sets);
      KOPE_TRY(compute_expected(*ref_session, op, *c, data, reference_call_timeout(options.min_call_timeout)));
    }
    auto lock = util::lock_for_timing();
    if (!lock) return std::unexpected(lock.error());
    if (progress && !all_cached) {
      progress(fmt::format("{} {}: timing the reference{}", op.name, cb.label, op.library_path ? " and the library baseline" : ""));
    }
    KOPE_ASSIGN(GroupResult g, time_case_group(*backend, op, *c, data, nullptr, ref_session.get(), &library_session, options, timing,
                                               util::random_seed(), library_choice));
    if (!g.reference.timing) return fail(ErrorKind::config, "the reference of {} has no time for {}: {}", op.name, cb.label, g.reference.problem);
    cb.reference = *g.reference.timing;
    if (g.library) {
      cb.library = g.library->timing;
      cb.library_problem = g.library->problem;
      cb.library_config = g.library->config;
    }
    out.push_back(std::move(cb));
  }
  if (ref_session) ref_session->close();
  if (library_session) library_session->close();
  return out;
}

}  // namespace kope::eval
