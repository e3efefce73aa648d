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
// Prints medians with the 10th/90th percentiles; the machine is shared, so expect noise.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "agent/events.h"
#include "agent/fakes.h"
#include "agent/loop.h"
#include "agent/prompt.h"
#include "util/fs.h"

using namespace kope;
using namespace kope::agent;

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

void fill_store(InMemoryStore& store, const spec::OpSpec& op, int lessons, int cases) {
  const char* cats[] = {"normalization", "elementwise", "reduction", "matmul", "conv"};
  for (int i = 0; i < lessons; ++i) {
    memory::LessonDelta d;
    d.lesson.title = fmt::format("lesson {} on {}", i, cats[i % 5]);
    d.lesson.text = fmt::format("When the rows are long (case {}), keep {} accumulators and vectorise the inner loop; "
                                "tail handling for D % {} matters.",
                                i, 2 + i % 7, 4 + i % 13);
    d.lesson.scope.category = cats[i % 5];
    (void)store.apply(d);
  }
  for (int i = 0; i < cases; ++i) {
    memory::CaseRecord c;
    c.natural_key = fmt::format("bench/{}", i);
    c.run_id = "bench";
    c.task = task_info(op);
    c.task.op = fmt::format("op{}", i % 500);
    c.task.category = cats[i % 5];
    c.hardware.target = i % 3 ? "x86_64-avx2-fma" : "aarch64-neon";
    c.toolchain.id = "g++";
    c.verdict = i % 2 ? "correct" : "wrong_result";
    c.message = "case message";
    c.speedup_vs_reference = 1.0 + (i % 37) / 10.0;
    c.optimisation = fmt::format("optimisation {}", i);
    c.code = fmt::format("extern \"C\" void kope_kernel(const float* x, float* y, int64_t N, int64_t D) {{ /* {} */ }}\n", i);
    (void)store.record_case(c);
  }
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
    FakeEvaluator evaluator;
    InMemoryStore store;
    fill_store(store, op, loop_lessons, 0);
    llm::Profile profile;
    profile.context_window = 128000;
    ScriptedLlm model(profile, [](const std::vector<llm::Message>& m, const llm::ChatParams&) {
      static std::atomic<int> n{0};
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
    env.run_id = "bench";
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
    std::printf("loop: %d iterations in %.2f s (active mode, in-memory store with %d lessons, fsynced event log)\n",
                iterations, total, loop_lessons);
    print("agent overhead per iteration (model and evaluation are fakes)", stats(per), "ms", 1e3);
  }

  // --- 2. context assembly with 10^5 items ---
  {
    std::vector<memory::RetrievedItem> all;
    all.reserve(static_cast<size_t>(items));
    for (int i = 0; i < items; ++i) {
      memory::RetrievedItem it;
      it.kind = i % 3 ? memory::RetrievedItem::Kind::lesson : memory::RetrievedItem::Kind::case_summary;
      it.id = fmt::format("lesson:B{}", i);
      it.text = fmt::format("Item {}: keep {} accumulators; vectorise by {}; handle the tail of D % {}.", i, i % 7, 4 << (i % 3), i % 13);
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
  return 0;
}
