#include "demo_runs.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <regex>

#include "fakes/fakes.h"
#include "agent/run.h"
#include "agent/test_support.h"
#include "util/fs.h"

namespace kope::report::testing {

namespace {

namespace fs = std::filesystem;

const char* const k_ops[] = {"elementwise/relu",
                             "elementwise/gelu",
                             "elementwise/add",
                             "normalization/softmax",
                             "normalization/layernorm",
                             "normalization/rmsnorm",
                             "normalization/layernorm_residual",
                             "reduction/sum_rows",
                             "reduction/argmax_rows",
                             "scan/cumsum",
                             "loss/cross_entropy",
                             "data-movement/transpose2d"};

const char* const k_strategies[] = {"scalar loop",
                                    "OpenMP over rows",
                                    "AVX2 intrinsics, 8 lanes",
                                    "cache blocking 64x64",
                                    "fused single pass",
                                    "unroll by 4 with two accumulators",
                                    "software prefetch",
                                    "OpenMP + AVX2, aligned loads"};

const char* const k_failures[] = {"compile_error", "wrong_result", "runtime_error", "timeout",
                                  "wrong_result"};

uint64_t fnv(std::string_view s) {
  uint64_t h = 1469598103934665603ULL;
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ULL;
  }
  return h;
}

double unit(uint64_t h) {
  return static_cast<double>(h % 10007) / 10007.0;
}

// An evaluator that has a library baseline only for operators with library.cpp.
class DemoEvaluator : public eval::Evaluator {
 public:
  DemoEvaluator()
      : m_with([] {
          fakes::FakeEvaluator::Config c;
          c.hardware = agent::testing::fake_hw();
          return c;
        }()),
        m_without([] {
          fakes::FakeEvaluator::Config c;
          c.library_us = std::nullopt;
          c.hardware = agent::testing::fake_hw();
          return c;
        }()) {}
  Result<eval::EvalResult> evaluate(const spec::OpSpec& op, std::string_view source,
                                    const eval::EvalOptions& options) override {
    return op.library_path ? m_with.evaluate(op, source, options)
                           : m_without.evaluate(op, source, options);
  }
  Target target() const override { return m_with.target(); }
  std::string toolchain_id() const override { return m_with.toolchain_id(); }
  std::string backend() const override { return "cpu"; }
  const HardwareProfile& hardware() const override { return m_with.hardware(); }

 private:
  fakes::FakeEvaluator m_with;
  fakes::FakeEvaluator m_without;
};

// The scripted model: better answers with more context (q = 0 none, 1 passive, 2 active).
std::string answer(const std::string& op, const std::string& stage, int k, int q) {
  uint64_t h = fnv(fmt::format("{}/{}/{}", op, q, k));
  uint64_t hop = fnv(op);
  static const double fail_draft[] = {0.5, 0.38, 0.22}, fail_repair[] = {0.45, 0.3, 0.18},
                      fail_refine[] = {0.3, 0.22, 0.12};
  double p_fail = stage == "draft"    ? fail_draft[q]
                  : stage == "repair" ? fail_repair[q]
                                      : fail_refine[q];
  // Some operators defeat the agent without memory, a few even with all of it in the prompt.
  bool hard = (hop % 4 == 0 && q == 0) || (hop % 6 == 1 && q == 1);
  std::string verdict = hard || unit(h) < p_fail ? k_failures[(h >> 20) % 5] : "correct";
  double base = 0.7 + static_cast<double>(hop % 23) / 10.0;
  double growth = 1 + 0.3 * (k - 1) * (0.6 + 0.4 * q);
  double noise = 0.72 + 0.45 * unit(h >> 7);
  double time_us = 1000.0 / (base * growth * noise);
  const char* strategy =
      k_strategies[(static_cast<uint64_t>(k) + hop + static_cast<uint64_t>(q)) % 8];
  std::string body = "  for (int64_t i = 0; i < n; ++i) y[i] = f(x[i]);\n";
  if (k >= 2) body = "#pragma omp parallel for schedule(static)\n" + body;
  if (k >= 3)
    body = "  // " + std::string(strategy) + "\n" + body + "  // tail handled by the scalar loop\n";
  if (k >= 4) body += "  for (int64_t i = n & ~int64_t{7}; i < n; ++i) y[i] = f(x[i]);\n";
  return fmt::format(
      "OPTIMISATION: {}\n```cpp\n// fake-verdict: {}\n// fake-time-us: {:.2f}\n#include "
      "<cstdint>\n#include <cmath>\n\n"
      "static inline float f(float v) {{ return v > 0 ? v : 0; }}\n\n"
      "extern \"C\" void kope_kernel(const float* x, float* y, int64_t n) {{\n{}}}\n```\n",
      strategy, verdict, time_us, body);
}

}  // namespace

std::vector<DemoRun> make_demo_runs(const fs::path& root, const std::vector<std::string>& modes,
                                    int iterations) {
  std::vector<DemoRun> out;
  std::vector<spec::OpSpec> ops;
  for (const char* rel : k_ops) {
    auto op = spec::load_op(fs::path(KOPE_SOURCE_DIR) / "ops" / rel);
    EXPECT_TRUE(op) << rel << ": " << op.error().message;
    if (op) ops.push_back(std::move(*op));
  }
  auto prompts = agent::PromptLibrary::load(fs::path(KOPE_SOURCE_DIR) / "prompts", "cpu");
  EXPECT_TRUE(prompts) << prompts.error().message;
  if (!prompts) return out;
  EXPECT_TRUE(util::make_dirs(root));
  auto store = memory::open_store(demo_memory(root));
  EXPECT_TRUE(store) << store.error().message;
  if (!store) return out;
  for (size_t m = 0; m < modes.size(); ++m) {
    const std::string& mode = modes[m];
    int q = mode == "none" ? 0 : mode == "passive" ? 1 : 2;
    llm::Profile profile;
    profile.name = "demo";
    profile.model = "scripted-demo-model";
    profile.context_window = 32000;
    profile.max_output_tokens = 2000;
    static const std::regex head("operator `([^`]+)`[^\\n]*attempt (\\d+) of \\d+, stage: (\\w+)");
    fakes::ScriptedLlm llm(
        profile,
        [q](const std::vector<llm::Message>& messages,
            const llm::ChatParams& params) -> llm::LlmResult<llm::ChatResponse> {
          llm::ChatResponse r;
          if (params.purpose == "reflect") {
            r = fakes::fake_response(
                messages,
                R"({"lessons": [{"action": "add", "kind": "strategy", "title": "Parallelise the outer loop",
          "text": "Rows are independent: an OpenMP parallel for over rows with a vectorised inner loop is the first win."}]})");
          } else {
            std::smatch sm;
            std::string op = "?", stage = "draft";
            int k = 1;
            if (messages.size() >= 2 && std::regex_search(messages[1].content, sm, head)) {
              op = sm[1];
              k = std::stoi(sm[2]);
              stage = sm[3];
            }
            r = fakes::fake_response(messages, answer(op, stage, k, q));
          }
          r.cost_usd = static_cast<double>(r.usage.prompt_tokens) * 3e-6 +
                       static_cast<double>(r.usage.completion_tokens) * 15e-6;
          return r;
        });
    DemoEvaluator evaluator;
    agent::RunConfig c;
    c.run_id = fmt::format("demo-{}", mode);
    c.created_at = "2026-05-01T12:00:00.000Z";
    c.selectors = {"demo"};
    c.suite_root = (fs::path(KOPE_SOURCE_DIR) / "ops").string();
    c.memory_path = demo_memory(root).string();
    c.seed = 11;
    c.target = "x86_64-avx2-fma";
    c.toolchain = "g++ (fake) 12 | -O3";
    c.llm_profile = "demo";
    c.model = {{"profile", "demo"}, {"provider", "scripted"}, {"model", profile.model}};
    c.loop.max_iterations = iterations;
    c.loop.patience = 0;
    c.loop.roofline_target = 0;
    c.loop.budget.window = 32000;
    c.loop.budget.generation = 2000;
    c.loop.budget.recency_reserve = 1000;
    c.loop.backoff_seconds = {0.01};
    c.loop.mode = *context::parse_mode(mode);
    c.loop.seed = 11;
    fs::path dir = root / mode;
    auto run = agent::Run::create(c, ops, dir);
    EXPECT_TRUE(run) << run.error().message;
    if (!run) return out;
    agent::RunServices s;
    s.evaluator = &evaluator;
    s.store = store->get();
    s.llm = &llm;
    s.prompts = &*prompts;
    auto report = (*run)->execute(s);
    EXPECT_TRUE(report) << report.error().message;
    if (report) {
      EXPECT_TRUE(report->complete) << fmt::format("{}", fmt::join(report->errors, "; "));
    }
    out.push_back({mode, dir});
  }
  return out;
}

fs::path demo_memory(const fs::path& root) {
  return root / "memory.db";
}

}  // namespace kope::report::testing
