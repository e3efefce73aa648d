// kope_agent_bench: the agent's own costs, with the model and the evaluator replaced by instant
// fakes so that only kope's work is measured.
//
//   build/bench/kope_agent_bench [--iterations N] [--items N] [--repeats N] [--loop-lessons N]
//
// 1. Loop overhead per iteration: retrieve, assemble, parse, record, credit, event-log appends
//    (each fsynced) and candidate/transcript files, for an op run of N iterations against an
//    in-memory store holding --loop-lessons lessons (default 200).
// 2. Context assembly with 10^5 memory items: (a) classify + assemble when retrieval returned
//    all 10^5 items (the passive worst case) and (b) retrieve + classify + assemble from a store
//    holding 10^5 items, in each mode.
// 3. The same with the SQLite experience store (memory::open_store): the loop overhead with a
//    real, fsynced store, and retrieve + assemble from a database of 10^5 items (cases with
//    lineage, code and journals, plus lessons).
// Prints medians with the 10th/90th percentiles; the machine is shared, so expect noise.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "run/events.h"
#include "fakes/fakes.h"
#include "agent/loop.h"
#include "agent/prompt.h"
#include "kope/memory.h"
#include "util/fs.h"

using namespace kope;
using namespace kope::agent;
using namespace kope::fakes;

namespace {

using Clock = std::chrono::steady_clock;

struct Stats {
  double median = 0, p10 = 0, p90 = 0;
};

Stats stats(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  auto at = [&](double q) { return v[static_cast<size_t>(q * static_cast<double>(v.size() - 1) + 0.5)]; };
  return {at(0.5), at(0.1), at(0.9)};
}

void print(const std::string& what, const Stats& s, const char* unit, double scale) {
  std::printf("%-62s %10.3f %s  (p10 %.3f, p90 %.3f)\n", what.c_str(), s.median * scale, unit, s.p10 * scale, s.p90 * scale);
  std::fflush(stdout);
}

std::string kernel(int k, double us) {
  return fmt::format(
      "OPTIMISATION: variant {}\n```cpp\n// fake-verdict: {}\n// fake-time-us: {}\n#include <cstdint>\n"
      "extern \"C\" void kope_kernel(const float* x, float* y, int64_t N, int64_t D) {{\n"
      "  for (int64_t i = 0; i < N * D; ++i) y[i] = x[i];\n}}\n```\n",
      k, k % 4 == 1 ? "wrong_result" : "correct", us);
}

void fill_store(memory::Store& store, const spec::OpSpec& op, int lessons, int cases) {
  const char* cats[] = {"normalization", "elementwise", "reduction", "matmul", "conv"};
  static const std::vector<std::string> words = {
      "vectorise", "unroll", "tile", "prefetch", "fuse", "block", "openmp", "schedule", "gather", "transpose",
      "register", "cache", "bandwidth", "latency", "fma", "avx2", "avx512", "mask", "tail", "reduction",
      "shuffle", "aligned", "stream", "nontemporal", "exp", "polynomial", "softmax", "row", "column", "panel",
      "pack", "microkernel", "threads", "chunk", "sharing", "accumulate", "kahan", "precision", "nan", "denormal"};
  std::mt19937 rng(1234);
  auto phrase = [&](int n) {
    std::string out;
    for (int w = 0; w < n; ++w) out += (w ? " " : "") + words[rng() % words.size()];
    return out;
  };
  std::vector<memory::LessonDelta> deltas;
  for (int i = 0; i < lessons; ++i) {
    memory::LessonDelta d;
    d.lesson.title = fmt::format("{} ({})", phrase(4), i);
    d.lesson.text = fmt::format("When {} then {}; {} matters for case {}.", phrase(6), phrase(8), phrase(3), i);
    d.lesson.scope.category = cats[i % 5];
    d.lesson.kind = static_cast<memory::LessonKind>(i % 4);
    if (d.lesson.kind == memory::LessonKind::fix) d.lesson.error_signature = fmt::format("compile_error: {}", phrase(2));
    deltas.push_back(std::move(d));
  }
  // A database has the batch API of StoreAdmin; the in-memory store only the agent's Store.
  auto* admin = dynamic_cast<memory::StoreAdmin*>(&store);
  if (!admin || !admin->apply_all(deltas)) {
    for (const auto& d : deltas) (void)store.apply(d);
  }
  std::vector<memory::CaseRecord> batch;
  auto flush = [&] {
    if (batch.empty()) return;
    if (!admin || !admin->record_cases(batch)) {
      for (const auto& c : batch) (void)store.record_case(c);
    }
    batch.clear();
  };
  for (int i = 0; i < cases; ++i) {
    memory::CaseRecord c;
    c.natural_key = fmt::format("bench/{}", i);
    c.run_id = "bench";
    c.task = task_info(op);
    if (i % 50 != 0) {  // one case in 50 is for the benchmarked op itself
      c.task.op = fmt::format("op{}", i % 500);
      c.task.category = cats[i % 5];
    }
    c.hardware.target = i % 3 ? "x86_64-avx2-fma" : "aarch64-neon";
    c.toolchain.id = "g++";
    c.verdict = i % 2 ? eval::Verdict::correct : eval::Verdict::wrong_result;
    c.message = "case message";
    c.speedup_vs_reference = 1.0 + (i % 37) / 10.0;
    c.optimisation = phrase(5);
    c.code = fmt::format("extern \"C\" void kope_kernel(const float* x, float* y, int64_t N, int64_t D) {{ /* {} */ }}\n", i);
    if (i % 20 != 0) c.parent_key = fmt::format("bench/{}", i - 1);  // chains of 20 attempts
    c.journal = fmt::format("Strategy: refine. Change: {}. Status: {}. Reading: case {}.", c.optimisation, eval::verdict_name(c.verdict), i);
    batch.push_back(std::move(c));
    if (batch.size() >= 2000) flush();
  }
  flush();
}

// Runs `iterations` loop iterations with fakes for the model and the evaluator against `store`.
int loop_overhead(memory::Store& store, const spec::OpSpec& op, const PromptLibrary& lib, const HardwareProfile& h,
                  SharedEstimator& est, int iterations, const std::string& what) {
  FakeEvaluator evaluator;
  llm::Profile profile;
  profile.context_window = 128000;
  std::atomic<int> n{0};
  ScriptedLlm model(profile, [&n](const std::vector<llm::Message>& m, const llm::ChatParams&) {
    int k = ++n;
    return llm::LlmResult<llm::ChatResponse>(fake_response(m, kernel(k, 1000.0 / (1 + k % 5))));
  });
  auto dir = util::TempDir::create("kope-agent-bench");
  auto events = EventLog::open(dir->path() / "events.jsonl");
  LoopConfig cfg;
  cfg.max_iterations = iterations;
  cfg.patience = 0;
  cfg.roofline_target = 0;
  cfg.reflect = false;
  cfg.budget.window = 128000;
  cfg.budget.generation = 8192;
  std::atomic<bool> cancel{false};
  OpEnvironment env;
  env.evaluator = &evaluator;
  env.store = &store;
  env.llm = &model;
  env.hw = &h;
  env.prompts = &lib;
  env.estimator = &est;
  env.events = events->get();
  env.run_dir = dir->path();
  env.run_id = fmt::format("bench-{}", std::chrono::steady_clock::now().time_since_epoch().count());
  env.config = &cfg;
  env.cancel = &cancel;
  OpState st;
  auto t0 = Clock::now();
  auto end = run_op(env, op, st);
  double total = std::chrono::duration<double>(Clock::now() - t0).count();
  if (!end) {
    std::fprintf(stderr, "%s\n", end.error().message.c_str());
    return 1;
  }
  std::vector<double> per;
  for (const auto& a : st.attempts) per.push_back(a.wall_seconds);
  std::printf("loop: %d iterations in %.2f s (%s)\n", iterations, total, what.c_str());
  print("agent overhead per iteration (model and evaluation are fakes)", stats(per), "ms", 1e3);
  return 0;
}

HardwareProfile hw() {
  HardwareProfile h;
  h.target = *Target::parse("x86_64-avx2-fma");
  h.cpu_model = "bench";
  h.cores = 2;
  h.peak_gflops = 200;
  h.peak_gbps = 20;
  return h;
}

}  // namespace

int main(int argc, char** argv) {
  int iterations = 60, items = 100000, repeats = 15, loop_lessons = 200;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--iterations")) iterations = std::atoi(argv[i + 1]);
    if (!std::strcmp(argv[i], "--items")) items = std::atoi(argv[i + 1]);
    if (!std::strcmp(argv[i], "--repeats")) repeats = std::atoi(argv[i + 1]);
    if (!std::strcmp(argv[i], "--loop-lessons")) loop_lessons = std::atoi(argv[i + 1]);
  }
  auto op_r = spec::load_op(util::share_dir() / "ops/normalization/softmax");
  auto lib_r = PromptLibrary::load(default_prompts_dir(), "cpu");
  if (!op_r || !lib_r) {
    std::fprintf(stderr, "%s\n", (!op_r ? op_r.error() : lib_r.error()).message.c_str());
    return 2;
  }
  spec::OpSpec op = *op_r;
  PromptLibrary lib = *lib_r;
  HardwareProfile h = hw();
  SharedEstimator est;

  // --- 1. loop overhead per iteration ---
  {
    InMemoryStore store;
    fill_store(store, op, loop_lessons, 0);
    if (int rc = loop_overhead(store, op, lib, h, est, iterations,
                               fmt::format("active mode, in-memory store with {} lessons, fsynced event log", loop_lessons))) {
      return rc;
    }
  }

  // --- 2. context assembly with 10^5 items ---
  {
    std::vector<memory::RetrievedItem> all;
    all.reserve(static_cast<size_t>(items));
    for (int i = 0; i < items; ++i) {
      memory::RetrievedItem it;
      it.kind = i % 3 ? memory::RetrievedItem::Kind::lesson : memory::RetrievedItem::Kind::case_summary;
      it.id = fmt::format("lesson:B{}", i);
      std::string advice = fmt::format("Item {}: keep {} accumulators; vectorise by {}; handle the tail of D % {}.", i, i % 7,
                                       4 << (i % 3), i % 13);
      if (it.kind == memory::RetrievedItem::Kind::lesson) {
        it.lesson.emplace();
        it.lesson->id = fmt::format("B{}", i);
        it.lesson->title = advice;
      } else {
        it.case_id = i + 1;
        it.kase.emplace();
        it.kase->verdict = eval::Verdict::correct;
        it.kase->optimisation = advice;
      }
      it.score = 1.0 / (1 + i % 1000);
      it.foreign = i % 5 == 0;
      it.op = "softmax";
      all.push_back(std::move(it));
    }
    PromptInput in;
    in.op = &op;
    in.reference_source = *util::read_file(op.reference_path);
    in.hardware = render_hardware(h, "g++");
    in.toolchain = "g++";
    context::Budget budget;
    budget.window = 128000;
    budget.generation = 8192;
    for (auto mode : {context::Mode::active, context::Mode::passive, context::Mode::none}) {
      std::vector<double> times;
      int64_t tokens = 0;
      for (int r = 0; r < repeats; ++r) {
        auto t0 = Clock::now();
        auto k = classify_knowledge(all, {}, op, memory::Stage::refine, lib, est, [](std::string_view) { return std::nullopt; });
        auto p = assemble_prompt(lib, in, k, budget, mode, est);
        times.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
        if (p) tokens = p->total_tokens;
      }
      print(fmt::format("assemble from {} retrieved items, {} (prompt {} tok)", items, context::mode_name(mode), tokens),
            stats(times), "ms", 1e3);
    }
    InMemoryStore store;
    fill_store(store, op, items / 2, items / 2);
    for (auto mode : {context::Mode::active, context::Mode::passive}) {
      std::vector<double> times;
      for (int r = 0; r < repeats; ++r) {
        auto t0 = Clock::now();
        memory::RetrievalQuery q;
        q.task = task_info(op);
        q.target = "x86_64-avx2-fma";
        q.toolchain = "g++";
        q.limit = mode == context::Mode::active ? 40 : 400;
        auto got = store.retrieve(q);
        auto q2 = q;
        q2.task.op.clear();
        q2.task.category.clear();
        q2.limit /= 2;
        auto broad = store.retrieve(q2);
        auto k = classify_knowledge(*got, *broad, op, memory::Stage::refine, lib, est, [](std::string_view) { return std::nullopt; });
        auto p = assemble_prompt(lib, in, k, budget, mode, est);
        times.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
      }
      print(fmt::format("retrieve + assemble, in-memory store of {} items, {}", items, context::mode_name(mode)), stats(times),
            "ms", 1e3);
    }
  }
  // --- 3. the SQLite store ---
  {
    auto dir = util::TempDir::create("kope-agent-bench-db");
    auto small = memory::open_store(dir->path() / "small.db");
    if (!small) {
      std::fprintf(stderr, "%s\n", small.error().message.c_str());
      return 1;
    }
    fill_store(**small, op, loop_lessons, 0);
    if (int rc = loop_overhead(**small, op, lib, h, est, iterations,
                               fmt::format("active mode, SQLite store with {} lessons, fsynced commits", loop_lessons))) {
      return rc;
    }
    auto big = memory::open_store(dir->path() / "big.db");
    if (!big) {
      std::fprintf(stderr, "%s\n", big.error().message.c_str());
      return 1;
    }
    auto t0 = Clock::now();
    fill_store(**big, op, items / 10, items - items / 10);
    std::printf("filled a SQLite store with %d cases and %d lessons in %.1f s\n", items - items / 10, items / 10,
                std::chrono::duration<double>(Clock::now() - t0).count());
    PromptInput in;
    in.op = &op;
    in.reference_source = *util::read_file(op.reference_path);
    in.hardware = render_hardware(h, "g++");
    in.toolchain = "g++";
    context::Budget budget;
    budget.window = 128000;
    budget.generation = 8192;
    for (auto mode : {context::Mode::active, context::Mode::passive}) {
      std::vector<double> times;
      int64_t tokens = 0;
      for (int r = 0; r < repeats; ++r) {
        auto t1 = Clock::now();
        memory::RetrievalQuery q;
        q.task = task_info(op);
        q.target = "x86_64-avx2-fma";
        q.toolchain = "g++";
        q.backend = "cpu";
        q.stage = memory::Stage::refine;
        q.text = fmt::format("vectorise the row loop {}", r);
        q.limit = mode == context::Mode::active ? 40 : 400;
        auto got = (*big)->retrieve(q);
        auto q2 = q;
        q2.task.op.clear();
        q2.task.category.clear();
        q2.limit /= 2;
        auto broad = (*big)->retrieve(q2);
        if (!got || !broad) {
          std::fprintf(stderr, "%s\n", (!got ? got.error() : broad.error()).message.c_str());
          return 1;
        }
        auto k = classify_knowledge(*got, *broad, op, memory::Stage::refine, lib, est, [](std::string_view) { return std::nullopt; });
        auto p = assemble_prompt(lib, in, k, budget, mode, est);
        times.push_back(std::chrono::duration<double>(Clock::now() - t1).count());
        if (p) tokens = p->total_tokens;
      }
      print(fmt::format("retrieve + assemble, SQLite store of {} items, {} (prompt {} tok)", items, context::mode_name(mode), tokens),
            stats(times), "ms", 1e3);
    }
  }
  return 0;
}
