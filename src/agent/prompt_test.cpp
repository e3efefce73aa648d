#include "agent/prompt.h"

#include <random>

#include <gtest/gtest.h>

#include "agent/test_support.h"

namespace kope::agent {
namespace {

struct Fixture {
  spec::OpSpec op = testing::load_softmax();
  PromptLibrary lib = *PromptLibrary::load(std::filesystem::path(KOPE_SOURCE_DIR) / "prompts", "cpu");
  SharedEstimator est;
  PromptInput input() {
    PromptInput in;
    in.op = &op;
    in.reference_source = *util::read_file(op.reference_path);
    in.hardware = render_hardware(testing::fake_hw(), "g++ 12 | -O3 -march=native -fopenmp");
    in.toolchain = "g++ 12 | -O3 -march=native -fopenmp";
    in.iteration = 2;
    in.max_iterations = 8;
    return in;
  }
};

memory::RetrievedItem item(std::string id, memory::RetrievedItem::Kind kind, std::string text, double score, bool foreign = false,
                           std::string op = "") {
  memory::RetrievedItem it;
  it.id = std::move(id);
  it.kind = kind;
  it.text = std::move(text);
  it.score = score;
  it.foreign = foreign;
  it.target = foreign ? "aarch64-neon" : "x86_64-avx2-fma";
  it.op = std::move(op);
  return it;
}

using Kind = memory::RetrievedItem::Kind;

TEST(PromptLibrary, LoadsEveryTemplateAndSplitsNotes) {
  Fixture f;
  EXPECT_FALSE(f.lib.system.empty());
  EXPECT_NE(f.lib.draft.find("## Target hardware"), std::string::npos);  // hot.md expanded
  EXPECT_EQ(f.lib.draft.find("{{>"), std::string::npos);
  EXPECT_GE(f.lib.notes.size(), 4u);
  auto missing = PromptLibrary::load(std::filesystem::path(KOPE_SOURCE_DIR) / "prompts", "no-such-backend");
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().kind, ErrorKind::not_found);
}

TEST(PromptLibrary, BadTemplateNamesFileAndLine) {
  auto dir = util::TempDir::create("kope-prompts");
  auto src = std::filesystem::path(KOPE_SOURCE_DIR) / "prompts/cpu";
  std::filesystem::create_directories(dir->path() / "cpu");
  for (const auto& e : std::filesystem::directory_iterator(src)) std::filesystem::copy(e.path(), dir->path() / "cpu");
  ASSERT_TRUE(util::write_file_atomic(dir->path() / "cpu/refine.md", "ok\n{{#incumbent}}\nnever closed\n"));
  auto lib = PromptLibrary::load(dir->path(), "cpu");
  ASSERT_FALSE(lib);
  EXPECT_NE(lib.error().message.find("refine.md:2"), std::string::npos) << lib.error().message;
}

TEST(Prompt, TiersAndSectionsPerMode) {
  Fixture f;
  std::vector<memory::RetrievedItem> state = {
      item("lesson:L1", Kind::lesson, "Subtract the row max before exp.", 2.0),
      item("case:4", Kind::best_kernel, "Best kernel for softmax: AVX2 exp, 3.1x", 1.8, false, "softmax"),
      item("case:9", Kind::case_summary, "Attempt on softmax ended wrong_result: missed the tail", 1.2, false, "softmax"),
      item("case:12", Kind::best_kernel, "Best kernel for softmax on aarch64: NEON", 1.5, true, "softmax"),
      item("case:20", Kind::best_kernel, "Best kernel for sgemm: packed panels", 1.0, false, "sgemm")};
  std::vector<memory::RetrievedItem> broad = {item("lesson:L7", Kind::lesson, "General: avoid false sharing.", 0.5)};
  auto knowledge = classify_knowledge(state, broad, f.op, memory::Stage::refine, f.lib, f.est,
                                      [](std::string_view name) -> std::optional<std::string> {
                                        if (name == "sgemm") return "matmul";
                                        return std::nullopt;
                                      });
  std::set<std::string> warm, cold;
  for (const auto& it : knowledge.warm) warm.insert(it.id);
  for (const auto& it : knowledge.cold) cold.insert(it.id);
  EXPECT_EQ(warm, (std::set<std::string>{"lesson:L1", "case:4", "case:9", "case:12"}));
  EXPECT_TRUE(cold.contains("case:20"));  // another category
  EXPECT_TRUE(cold.contains("lesson:L7"));  // only the broad query found it
  EXPECT_TRUE(cold.contains("note:1"));
  for (const auto& it : knowledge.warm) {
    if (it.id == "case:12") {
      EXPECT_EQ(it.section, "feasibility");
      EXPECT_NE(it.text.find("aarch64-neon"), std::string::npos);
    }
  }

  context::Budget budget;
  budget.window = 32000;
  budget.generation = 4000;
  budget.recency_reserve = 1000;
  auto active = assemble_prompt(f.lib, f.input(), knowledge, budget, context::Mode::active, f.est);
  ASSERT_TRUE(active) << active.error().message;
  const std::string& user = active->messages[1].content;
  EXPECT_NE(user.find("## Feasibility evidence from other hardware"), std::string::npos);
  EXPECT_NE(user.find("not\nwhat is fast here"), std::string::npos);
  EXPECT_NE(user.find("Best kernel for softmax on aarch64"), std::string::npos);
  EXPECT_NE(user.find("## Lessons learned on this machine"), std::string::npos);
  EXPECT_NE(user.find("## General notes"), std::string::npos);
  EXPECT_GT(active->tier_tokens["warm"], 0);
  EXPECT_GT(active->tier_tokens["cold"], 0);
  EXPECT_LE(active->total_tokens, active->limit);
  EXPECT_EQ(active->total_tokens, active->tier_tokens["system"] + active->tier_tokens["hot"] + active->tier_tokens["warm"] +
                                      active->tier_tokens["cold"]);
  bool has_l1 = false;
  for (const auto& [id, score] : active->memory_items) has_l1 = has_l1 || (id == "lesson:L1" && score == 2.0);
  EXPECT_TRUE(has_l1);

  auto none = assemble_prompt(f.lib, f.input(), knowledge, budget, context::Mode::none, f.est);
  ASSERT_TRUE(none);
  EXPECT_EQ(none->tier_tokens["warm"], 0);
  EXPECT_EQ(none->tier_tokens["cold"], 0);
  EXPECT_TRUE(none->memory_items.empty());
  EXPECT_EQ(none->messages[1].content.find("## Lessons learned"), std::string::npos);
  EXPECT_EQ(none->messages[1].content.find("## General notes"), std::string::npos);
  EXPECT_EQ(none->tier_tokens["hot"], active->tier_tokens["hot"]);  // same hot tier in every mode
  EXPECT_EQ(none->tier_tokens["system"], active->tier_tokens["system"]);

  auto passive = assemble_prompt(f.lib, f.input(), knowledge, budget, context::Mode::passive, f.est);
  ASSERT_TRUE(passive);
  EXPECT_EQ(passive->admitted.size(), knowledge.warm.size() + knowledge.cold.size());  // all fit
}

TEST(Prompt, NeverExceedsTheWindow) {
  Fixture f;
  std::mt19937 rng(7);
  for (int round = 0; round < 40; ++round) {
    std::vector<memory::RetrievedItem> state;
    int n = 5 + static_cast<int>(rng() % 60);
    for (int i = 0; i < n; ++i) {
      std::string text;
      int words = 5 + static_cast<int>(rng() % 400);
      for (int w = 0; w < words; ++w) text += fmt::format("w{} ", rng() % 1000);
      state.push_back(item(fmt::format("lesson:R{}", i), i % 3 ? Kind::lesson : Kind::best_kernel, text, 0.1 + (rng() % 100) / 10.0,
                           i % 5 == 0, "softmax"));
    }
    auto knowledge = classify_knowledge(state, {}, f.op, memory::Stage::draft, f.lib, f.est,
                                        [](std::string_view) { return std::nullopt; });
    context::Budget budget;
    budget.window = 4000 + static_cast<int64_t>(rng() % 12000);
    budget.generation = 1000 + static_cast<int64_t>(rng() % 1000);
    budget.recency_reserve = 500;
    for (auto mode : {context::Mode::active, context::Mode::passive, context::Mode::none}) {
      auto p = assemble_prompt(f.lib, f.input(), knowledge, budget, mode, f.est);
      ASSERT_TRUE(p) << p.error().message;
      int64_t real = f.est.estimate(p->messages[0].content) + f.est.estimate(p->messages[1].content);
      EXPECT_EQ(real, p->total_tokens);
      EXPECT_LE(p->total_tokens, budget.window - budget.generation) << "window " << budget.window << " mode " << context::mode_name(mode);
      if (mode == context::Mode::active) {
        EXPECT_LE(p->tier_tokens["warm"] + p->tier_tokens["cold"], p->knowledge_budget);
      }
    }
  }
}

TEST(Prompt, HotTierIsCutToFitAndFailsOnlyWhenImpossible) {
  Fixture f;
  PromptInput in = f.input();
  in.feedback = std::string(40000, 'x');  // enormous diagnostics
  context::Budget budget;
  budget.window = 8000;
  budget.generation = 2000;
  auto p = assemble_prompt(f.lib, in, {}, budget, context::Mode::active, f.est);
  ASSERT_TRUE(p) << p.error().message;
  EXPECT_TRUE(p->hot_truncated);
  EXPECT_LE(p->total_tokens, p->limit);
  budget.window = 2100;  // 100 tokens of room: even a cut-down hot tier cannot fit
  auto q = assemble_prompt(f.lib, in, {}, budget, context::Mode::active, f.est);
  ASSERT_FALSE(q);
  EXPECT_EQ(q.error().kind, ErrorKind::config);
}

TEST(Prompt, FeedbackShowsTimingDeltasAndMismatch) {
  Attempt inc;
  inc.iteration = 2;
  inc.verdict = "correct";
  inc.improved = true;
  inc.timings = {{9, "N=4096 D=1024", 200, 2, 1000, 800.0, 50, 0.25}};
  Attempt a;
  a.iteration = 3;
  a.stage = memory::Stage::refine;
  a.verdict = "correct";
  a.optimisation = "unroll";
  a.has_code = true;
  a.timings = {{9, "N=4096 D=1024", 250, 2, 1000, 800.0, 50, 0.2}};
  a.speedup_vs_incumbent = 0.8;
  std::string fb = render_feedback(a, &inc);
  EXPECT_NE(fb.find("+25%"), std::string::npos) << fb;
  EXPECT_NE(fb.find("incumbent stays"), std::string::npos);
  Attempt w;
  w.iteration = 4;
  w.verdict = "wrong_result";
  w.has_code = true;
  w.message = "y differs";
  w.first_mismatch = "case N=3 D=17: y[2, 5]: got 0.1, expected 0.2";
  w.cases_passed = 2;
  w.cases_total = 12;
  std::string fb2 = render_feedback(w, &inc);
  EXPECT_NE(fb2.find("First mismatch: case N=3 D=17"), std::string::npos);
  EXPECT_NE(fb2.find("2 of 12"), std::string::npos);
  std::vector<Attempt> many(40, w);
  for (int i = 0; i < 40; ++i) many[static_cast<size_t>(i)].iteration = i + 1;
  std::string tried = render_tried(many, 30);
  EXPECT_NE(tried.find("10 earlier attempts omitted"), std::string::npos);
  EXPECT_EQ(tried.find("| 10 |"), std::string::npos);
  EXPECT_NE(tried.find("| 40 |"), std::string::npos);
}

}  // namespace
}  // namespace kope::agent

namespace kope::agent {
namespace {

// Every suite operator gets a well-formed prompt that fits a modest window.
TEST(Prompt, EverySuiteOpRenders) {
  auto suite = spec::load_suite(std::filesystem::path(KOPE_SOURCE_DIR) / "ops");
  ASSERT_TRUE(suite) << suite.error().message;
  PromptLibrary lib = *PromptLibrary::load(std::filesystem::path(KOPE_SOURCE_DIR) / "prompts", "cpu");
  SharedEstimator est;
  context::Budget budget;
  budget.window = 16000;
  budget.generation = 4000;
  for (const auto& op : suite->ops) {
    SCOPED_TRACE(op.name);
    PromptInput in;
    in.op = &op;
    in.reference_source = *util::read_file(op.reference_path);
    in.hardware = render_hardware(testing::fake_hw(), "g++");
    in.toolchain = "g++";
    auto k = classify_knowledge({}, {}, op, memory::Stage::draft, lib, est, [](std::string_view) { return std::nullopt; });
    auto p = assemble_prompt(lib, in, k, budget, context::Mode::active, est);
    ASSERT_TRUE(p) << p.error().message;
    EXPECT_LE(p->total_tokens, p->limit);
    const std::string& user = p->messages[1].content;
    EXPECT_NE(user.find(spec::render_signature(op)), std::string::npos);
    EXPECT_NE(user.find("operator `" + op.name + "` \u2014 attempt 1 of"), std::string::npos);
    for (const auto& a : op.attrs) EXPECT_NE(user.find("  - " + a.name + " "), std::string::npos);
    EXPECT_EQ(user.find("{{"), std::string::npos);
  }
}

}  // namespace
}  // namespace kope::agent
