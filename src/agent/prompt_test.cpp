#include "agent/prompt.h"

#include <cstdlib>
#include <optional>
#include <random>

#include <gtest/gtest.h>

#include "agent/test_support.h"
#include "eval/native.h"
#include "kope/hw.h"
#include "hw/isa.h"
#include "util/strings.h"

namespace kope::agent {
namespace {

struct Fixture {
  spec::OpSpec op = testing::load_softmax();
  PromptLibrary lib = *PromptLibrary::load(std::filesystem::path(KOPE_SOURCE_DIR) / "prompts", "cpu");
  SharedEstimator est;
  PromptInput input() { return input_with(*util::read_file(op.reference_path)); }
  PromptInput input_with(std::string reference_source) {
    PromptInput in;
    in.op = &op;
    in.reference_source = std::move(reference_source);
    in.hardware = render_hardware(testing::fake_hw(), "g++ 12 | -O3 -march=native -fopenmp");
    in.toolchain = "g++ 12 | -O3 -march=native -fopenmp";
    in.iteration = 2;
    in.max_iterations = 8;
    return in;
  }
};

// A retrieved item whose facts carry `text`: a lesson's title, or a correct case's description
// (its case id the number in `id`, if any).
memory::RetrievedItem item(std::string id, memory::RetrievedItem::Kind kind, std::string text, double score, bool foreign = false,
                           std::string op = "") {
  memory::RetrievedItem it;
  it.id = std::move(id);
  it.kind = kind;
  std::string key = it.id.substr(it.id.find(':') + 1);
  if (kind == memory::RetrievedItem::Kind::lesson) {
    it.lesson.emplace();
    it.lesson->id = key;
    it.lesson->title = std::move(text);
  } else {
    it.case_id = std::strtoll(key.c_str(), nullptr, 10);
    it.kase.emplace();
    it.kase->verdict = eval::Verdict::correct;
    it.kase->optimisation = std::move(text);
  }
  it.score = score;
  it.foreign = foreign;
  it.target = foreign ? "aarch64-neon" : "x86_64-avx2-fma";
  it.op = std::move(op);
  return it;
}

using Kind = memory::RetrievedItem::Kind;

// A case retrieved both as a best kernel and as a summary is offered once, in the form found
// first; a fix item about it stays (it is about the failed case beside it).
TEST(Prompt, ACaseIsOfferedOnceWhateverItsForm) {
  Fixture f;
  memory::RetrievedItem kernel = item("kernel:7", Kind::best_kernel, "GEMM with an 8x48 register tile", 1.0, false, "softmax");
  memory::RetrievedItem summary = item("case:7", Kind::case_summary, "GEMM with an 8x48 register tile, then softmax", 0.9,
                                       false, "softmax");
  memory::RetrievedItem fix = item("case:7", Kind::case_summary, "fixed the tail", 0.8, false, "softmax");
  fix.id = "fix:6-7";
  fix.failed_case = 6;
  auto knowledge = classify_knowledge({kernel}, {summary, fix}, f.op, memory::Stage::refine, f.lib, f.est,
                                      [](std::string_view) { return std::nullopt; });
  std::set<std::string> ids;
  for (const auto* tier : {&knowledge.warm, &knowledge.cold}) {
    for (const auto& it : *tier) ids.insert(it.id);
  }
  EXPECT_TRUE(ids.contains("kernel:7"));
  EXPECT_FALSE(ids.contains("case:7")) << "the same case twice";
  EXPECT_TRUE(ids.contains("fix:6-7"));
}

// A foreign item's prefix ("recorded on <target>, not timed here") and its bracketed header do
// not make it another item: the same lesson text is one item, whether foreign or not.
TEST(Prompt, AForeignItemsPrefixDoesNotMakeItAnotherItem) {
  std::string text = "[lesson L1 · strategy · reduction] Four row streams: read four rows at once";
  std::string foreign = std::string(k_foreign_prefix) + "x86_64-avx2-fma, not timed here) " + text;
  EXPECT_EQ(knowledge_content_key(foreign), knowledge_content_key(text));
  EXPECT_EQ(knowledge_content_key("- " + foreign), knowledge_content_key(text));
  EXPECT_NE(knowledge_content_key(foreign), knowledge_content_key("[lesson L2] Another lesson"));
}

TEST(PromptLibrary, LoadsEveryTemplateAndSplitsNotes) {
  Fixture f;
  EXPECT_FALSE(f.lib.system.empty());
  EXPECT_NE(f.lib.system.find("# Target hardware"), std::string::npos);  // the hardware guide: the system part
  EXPECT_NE(f.lib.op_part.find("## Operator specification"), std::string::npos);  // op.md: the per-op part
  EXPECT_NE(f.lib.draft.find("## Latest feedback"), std::string::npos);  // hot.md expanded
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
      item("case:20", Kind::case_summary, "Attempt on sgemm: packed panels were 2x faster", 1.0, false, "sgemm"),
      item("case:21", Kind::best_kernel, "Best kernel for sgemm: packed panels", 1.0, false, "sgemm")};
  memory::RetrievedItem close = item("case:22", Kind::best_kernel, "Best kernel for log1p_rows: fused row pass", 0.9, false,
                                     "log1p_rows");
  close.category = "elementwise";
  close.structurally_close = true;  // the same signature shape and arithmetic intensity
  state.push_back(close);
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
  // Another category's kernel source is offered only when its computation is structurally
  // close (RetrievedItem::structurally_close); sgemm's is not softmax's.
  EXPECT_FALSE(cold.contains("case:21") || warm.contains("case:21"));
  EXPECT_TRUE(cold.contains("case:22"));  // structurally close: offered, in the cold tier
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
  // Without stage ceilings (B_k's caps), so every section classify_knowledge fills can be seen.
  budget.memory_draft = budget.memory_repair = budget.memory_refine = 0;
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

// $KOPE_ISA for one scope (what --isa sets), restored after.
class ScopedIsa {
 public:
  explicit ScopedIsa(const char* level) {
    if (const char* old = std::getenv("KOPE_ISA")) m_old = old;
    ::setenv("KOPE_ISA", level, 1);
  }
  ~ScopedIsa() {
    if (m_old) {
      ::setenv("KOPE_ISA", m_old->c_str(), 1);
    } else {
      ::unsetenv("KOPE_ISA");
    }
  }
  ScopedIsa(const ScopedIsa&) = delete;
  ScopedIsa& operator=(const ScopedIsa&) = delete;

 private:
  std::optional<std::string> m_old;
};

// The system prompt under x86-64-v3 on this CPU: what the real toolchain and guide give.
std::string system_prompt_for_host(Fixture& f) {
  auto tc = eval::cpu_toolchain();
  EXPECT_TRUE(tc) << tc.error().message;
  PromptInput in = f.input();
  in.toolchain = tc ? tc->id() : "";
  in.hardware = render_hardware(describe_host(), in.toolchain, describe_hardware_guide("cpu"));
  context::Budget budget;
  budget.window = 32000;
  budget.generation = 4000;
  auto p = assemble_prompt(f.lib, in, {}, budget, context::Mode::active, f.est);
  EXPECT_TRUE(p) << p.error().message;
  return p ? p->messages[0].content + p->messages[1].content : "";
}

// The reference block names the reference's language: C++ for the suite's ops, Python for a
// KernelBench op's PyTorch module.
TEST(Prompt, TheReferenceBlockNamesItsLanguage) {
  Fixture f;
  context::Budget budget;
  budget.window = 32000;
  budget.generation = 4000;
  auto cpp = assemble_prompt(f.lib, f.input(), {}, budget, context::Mode::active, f.est);
  ASSERT_TRUE(cpp) << cpp.error().message;
  EXPECT_NE(cpp->messages[1].content.find("not fast):\n```cpp\n"), std::string::npos) << cpp->messages[1].content;
  f.op.reference_path = f.op.reference_path.parent_path() / "reference.py";
  PromptInput in = f.input_with("class Model(nn.Module):\n    def forward(self, x):\n        return torch.softmax(x, -1)\n");
  auto py = assemble_prompt(f.lib, in, {}, budget, context::Mode::active, f.est);
  ASSERT_TRUE(py) << py.error().message;
  EXPECT_NE(py->messages[1].content.find("not fast):\n```python\nclass Model"), std::string::npos) << py->messages[1].content;
}

// Under --isa x86-64-v3 the prompt describes the level's vector ISA (AVX2, FMA) and target, not
// this CPU's: no AVX-512 is offered even on an AVX-512 CPU.
TEST(Prompt, IsaLevelDescribesTheLevelNotTheHost) {
  if (!target_at_level(host_cpu_target(), IsaLevel::x86_64_v3)) GTEST_SKIP() << "this CPU is not x86-64-v3 (AVX2 + FMA)";
  Fixture f;
  std::string v3;
  {
    ScopedIsa isa("x86-64-v3");
    v3 = system_prompt_for_host(f);
  }
  EXPECT_NE(v3.find("- target: x86_64-avx2-fma\n"), std::string::npos) << v3;
  EXPECT_NE(v3.find("- ISA level: x86-64-v3: kernels are compiled for any x86-64-v3 CPU"), std::string::npos) << v3;
  EXPECT_NE(v3.find("-march=x86-64-v3 -mtune=native"), std::string::npos) << v3;
  EXPECT_NE(v3.find("avx2, fma"), std::string::npos) << v3;
  EXPECT_EQ(util::to_lower(v3).find("avx512"), std::string::npos) << v3;
  EXPECT_EQ(v3.find("-march=native"), std::string::npos) << v3;

  // The same CPU without a level offers its own ISA (so the check above can fail).
  if (!host_cpu_target().has("avx512")) GTEST_SKIP() << "this CPU has no AVX-512: the native prompt has none to compare";
  std::string native = system_prompt_for_host(f);
  EXPECT_NE(native.find("avx512f"), std::string::npos) << native;
  EXPECT_EQ(native.find("ISA level:"), std::string::npos) << native;
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
  inc.verdict = eval::Verdict::correct;
  inc.improved = true;
  inc.timings = {{9, "N=4096 D=1024", 200, 2, 1000, 800.0, 50, 0.25}};
  Attempt a;
  a.iteration = 3;
  a.stage = memory::Stage::refine;
  a.verdict = eval::Verdict::correct;
  a.optimisation = "unroll";
  a.has_code = true;
  a.timings = {{9, "N=4096 D=1024", 250, 2, 1000, 800.0, 50, 0.2}};
  a.speedup_vs_incumbent = 0.8;
  std::string fb = render_feedback(a, &inc);
  EXPECT_NE(fb.find("+25%"), std::string::npos) << fb;
  EXPECT_NE(fb.find("incumbent stays"), std::string::npos);
  EXPECT_NE(fb.find("Compared with the incumbent's recorded timings: 0.80x"), std::string::npos) << fb;
  // Timed beside the incumbent under load: its ratio can say 1.08x while the recorded columns
  // say +200%. The feedback names the figure that decided, its interval and why it stays.
  Attempt side = a;
  side.timings = {{9, "N=4096 D=1024", 600, 2, 1000, 800.0, 50, 0.2}};
  side.decision = run::Decision::undecided;
  side.speedup_vs_incumbent = 1.08;
  side.decision_lower = 0.95;
  side.decision_upper = 1.2;
  side.decision_pairs = 12;
  std::string fb3 = render_feedback(side, &inc);
  EXPECT_NE(fb3.find("1.08x vs incumbent timed beside it"), std::string::npos) << fb3;
  EXPECT_NE(fb3.find("The recorded column is the incumbent's own timing from attempt 2, taken at another time and load"),
            std::string::npos) << fb3;
  EXPECT_NE(fb3.find("| incumbent as recorded (attempt 2) |"), std::string::npos) << fb3;
  EXPECT_NE(fb3.find("beside the incumbent (the same load for both): 1.08x the incumbent's speed (95% interval 0.95x to 1.20x)"),
            std::string::npos) << fb3;
  EXPECT_NE(fb3.find("12 pairs: undecided"), std::string::npos) << fb3;
  // An undecided comparison says what gain its noise could have decided.
  EXPECT_NE(fb3.find("its interval reaches 0.13 below its ratio), only a kernel about 1.13x the incumbent's speed or more"),
            std::string::npos) << fb3;
  // The tried-table says why a faster-looking attempt did not become the incumbent.
  std::string side_row = render_tried({side});
  EXPECT_NE(side_row.find("1.08x vs incumbent timed beside it (undecided; the incumbent stays)"), std::string::npos) << side_row;
  side.decision = run::Decision::faster;
  side.margin_demanded = 1.9;
  side.evidence_disturbed = true;
  std::string fb4 = render_feedback(side, &inc);
  EXPECT_NE(fb4.find("pairs: faster."), std::string::npos) << fb4;
  EXPECT_NE(fb4.find("disturbed by other load, so it had to exceed 1.90x to replace the incumbent, and did not"), std::string::npos) << fb4;
  Attempt w;
  w.iteration = 4;
  w.verdict = eval::Verdict::wrong_result;
  w.has_code = true;
  w.message = "y differs";
  w.first_mismatch = "case N=3 D=17: y[2, 5]: got 0.1, expected 0.2";
  w.cases_passed = 2;
  w.cases_total = 12;
  std::string fb2 = render_feedback(w, &inc);
  EXPECT_NE(fb2.find("First mismatch: case N=3 D=17"), std::string::npos);
  EXPECT_NE(fb2.find("2 of 12"), std::string::npos);
  // Several wrong cases: each with its first mismatching element, and how many more there were.
  w.wrong_cases = {w.first_mismatch, "case N=1 D=1: y[0, 0]: got nan, expected 0.5", "case N=64 D=1000: y[63, 999]: got 0, expected 1",
                   "case N=7 D=3: y[6, 2]: got 2, expected 1"};
  std::string fb5 = render_feedback(w, &inc);
  EXPECT_NE(fb5.find("Wrong cases (the first mismatching element of each; the first 4 of 10):\n- case N=3 D=17: y[2, 5]"),
            std::string::npos) << fb5;
  EXPECT_NE(fb5.find("- case N=64 D=1000: y[63, 999]: got 0, expected 1\n"), std::string::npos) << fb5;
  EXPECT_EQ(fb5.find("First mismatch:"), std::string::npos) << fb5;
  std::vector<Attempt> many(40, w);
  for (int i = 0; i < 40; ++i) many[static_cast<size_t>(i)].iteration = i + 1;
  std::string tried = render_tried(many, 30);
  EXPECT_NE(tried.find("10 earlier attempts omitted"), std::string::npos);
  EXPECT_EQ(tried.find("| 10 |"), std::string::npos);
  EXPECT_NE(tried.find("| 40 |"), std::string::npos);
}


// Issue 29: the feedback shows, per timed case named by its dims, both kernels' times side by
// side in the same comparison and their ratio; the recorded incumbent time says which attempt
// it is from; the decision names the rule that decided.
TEST(Prompt, FeedbackShowsSideBySideFiguresPerCaseAndTheDecidingRule) {
  Attempt inc;
  inc.iteration = 2;
  inc.verdict = eval::Verdict::correct;
  inc.improved = true;
  inc.timings = {{0, "N=4096 D=1024", 200, 2, 1000, 800.0, 50, 0.25}, {1, "N=64 D=1000", 10, 0.2, 40, std::nullopt, 2, 0.2}};
  Attempt a;
  a.iteration = 5;
  a.stage = memory::Stage::refine;
  a.verdict = eval::Verdict::correct;
  a.optimisation = "blocked";
  a.has_code = true;
  a.timings = {{0, "N=4096 D=1024", 150, 2, 1000, 800.0, 50, 0.33}, {1, "N=64 D=1000", 9, 0.2, 40, std::nullopt, 2, 0.22}};
  a.timings[0].side_candidate_us = 160;
  a.timings[0].side_incumbent_us = 246;
  a.timings[0].side_ratio = 1.54;
  a.timings[1].side_candidate_us = 9.5;
  a.timings[1].side_incumbent_us = 11;
  a.timings[1].side_ratio = 1.16;
  a.decision = run::Decision::faster;
  a.speedup_vs_incumbent = 1.34;
  a.decision_lower = 1.12;
  a.decision_upper = 1.9;
  a.decision_pairs = 16;
  a.improved = true;
  a.decided_by = eval::ReplacementRule::own_waits;
  a.decided_by_reason = "timed side by side with the incumbent: 1.34x, 95% interval [1.12x, 1.90x] wholly above 1 + margin";
  std::string fb = render_feedback(a, &inc);
  EXPECT_NE(fb.find("| timed case | this attempt | side by side: this attempt / incumbent, speed ratio | incumbent as recorded (attempt 2) |"),
            std::string::npos) << fb;
  EXPECT_NE(fb.find("| N=4096 D=1024 | 150 us | 160 us / 246 us, 1.54x | 200 us (-25%) |"), std::string::npos) << fb;
  EXPECT_NE(fb.find("| N=64 D=1000 | 9.00 us | 9.50 us / 11.00 us, 1.16x | 10.00 us (-10%) |"), std::string::npos) << fb;
  EXPECT_NE(fb.find("the decision rests on these"), std::string::npos) << fb;
  EXPECT_NE(fb.find("The recorded column is the incumbent's own timing from attempt 2"), std::string::npos) << fb;
  EXPECT_NE(fb.find("Decided by the rule `own_waits`: timed side by side"), std::string::npos) << fb;
  EXPECT_EQ(fb.find("case 0"), std::string::npos) << fb;  // cases by their dims, never by index
  // Recorded and side-by-side times of one kernel can disagree: the feedback says which to
  // reason from.
  EXPECT_NE(fb.find("When the figures disagree, reason from the side-by-side ones"), std::string::npos) << fb;

  // The attempt that became the incumbent has no other recorded times: no column of "-" beside
  // the side-by-side times, which name the kernel it replaced.
  std::string became = render_feedback(a, &a);
  EXPECT_NE(became.find("| timed case | this attempt | side by side: this attempt / the incumbent it replaced, speed ratio | "
                        "reference | fraction of roofline |\n|---|---|---|---|---|\n"),
            std::string::npos) << became;
  EXPECT_NE(became.find("| N=4096 D=1024 | 150 us | 160 us / 246 us, 1.54x | 1000 us | 33% |"), std::string::npos) << became;
  EXPECT_EQ(became.find("as recorded"), std::string::npos) << became;
  EXPECT_NE(became.find("paired ratios replaced kernel time / this attempt's time"), std::string::npos) << became;
}

// Issue 29: the op spec says randint's bounds are inclusive and that cases are named by their
// dims; the hardware section says how the memory bound is read from the bandwidth table.
TEST(Prompt, OpSpecAndHardwareSayHowTheirFiguresAreRead) {
  auto op = spec::parse_op(R"toml(
name = "pick"
category = "elementwise"
level = 1
summary = "y = x[idx]"
dims = ["N"]
inputs  = [{ name = "x", dtype = "f32", shape = ["N"] }, { name = "idx", dtype = "i32", shape = ["N"], init = "randint(0, N-1)" }]
outputs = [{ name = "y", dtype = "f32", shape = ["N"] }]
flops = "0"
bytes = "12*N"
tolerance = { atol = 0, rtol = 0 }
cases = [{ N = 64 }, { N = 65536, timed = true }]
)toml", "pick/op.toml", false);
  ASSERT_TRUE(op) << op.error().message;
  std::string text = render_op_spec(*op);
  EXPECT_NE(text.find("filled with randint(0, N-1)"), std::string::npos) << text;
  EXPECT_NE(text.find("`randint(lo, hi)`: integers drawn uniformly from lo to hi, both bounds inclusive"), std::string::npos) << text;
  EXPECT_NE(text.find("cases are named by their dims"), std::string::npos) << text;
  EXPECT_NE(text.find("- cases checked and timed: N=65536"), std::string::npos) << text;
  HardwareProfile hw = testing::fake_hw();
  hw.l3_bytes = uint64_t{32} << 20;
  hw.bandwidth = {{uint64_t{1} << 20, 200}, {uint64_t{64} << 20, 80}};
  std::string h = render_hardware(hw, "g++", HardwareGuide{});
  EXPECT_NE(h.find("interpolated linearly in log2(working set) between its two nearest points"), std::string::npos) << h;
  EXPECT_NE(h.find("a working set larger than the L3 (32.0 MiB) streams from DRAM and gets the DRAM figure"), std::string::npos) << h;
}

// The hardware block names every ISA extension the flags enable, the microarchitecture and the
// per-core FMA rate, says how the triad is counted, and has no CPU leftovers for OpenCL.
TEST(Prompt, HardwareGuideIsPreciseEnoughForIntrinsics) {
  HardwareProfile hw = testing::fake_hw();
  HardwareGuide g;
  g.isa_extensions = {"avx2", "fma", "avx512f", "avx512cd", "avx512bw", "avx512dq", "avx512vl", "avx512ifma", "avx512vbmi",
                      "avx512vbmi2", "avx512bitalg", "avx512vpopcntdq", "avx512vp2intersect", "avx512bf16", "avx512vnni"};
  g.microarchitecture = "Zen 5";
  g.cpu_family = 0x1a;
  g.cpu_model = 0x02;
  g.compiler_tune = "znver4";
  std::string cpu = render_hardware(hw, "g++ 12 | -O3 -march=native -fopenmp", g);
  EXPECT_NE(cpu.find("avx512vbmi2, avx512bitalg, avx512vpopcntdq, avx512vp2intersect"), std::string::npos) << cpu;
  EXPECT_NE(cpu.find("Zen 5 microarchitecture"), std::string::npos) << cpu;
  EXPECT_NE(cpu.find("family 0x1a model 0x2"), std::string::npos) << cpu;
  EXPECT_NE(cpu.find("100 GFLOP/s per core (measured on one core)"), std::string::npos) << cpu;
  EXPECT_NE(cpu.find("write-allocate"), std::string::npos) << cpu;
  EXPECT_NE(cpu.find("OpenMP uses all of them"), std::string::npos);
  hw.peak_gflops_core = 0;  // nothing better measured: peak / cores
  EXPECT_NE(render_hardware(hw, "g++", g).find("100 GFLOP/s per core (all-core figure / cores)"), std::string::npos);
  // Below the host's level, -mtune=native still picks the nearest CPU the compiler knows.
  std::string v3;
  {
    ScopedIsa level("x86-64-v3");
    v3 = render_hardware(hw, "g++ 12 | -O3 -march=x86-64-v3 -mtune=native -fopenmp", g);
  }
  EXPECT_NE(v3.find("(-mtune=native schedules for znver4, the nearest CPU this compiler knows to this Zen 5)"), std::string::npos) << v3;
  // A cache level nobody reported is not shown as 0 bytes: an unknown L3 says where to look
  // instead (the bandwidth curve), and without that curve it is left out.
  hw.l3_bytes = 0;
  hw.bandwidth = {{uint64_t{1} << 20, 200}, {uint64_t{64} << 20, 20}};
  std::string no_l3 = render_hardware(hw, "g++", g);
  EXPECT_NE(no_l3.find("- caches: L1d 32.0 KiB per core, L2"), std::string::npos) << no_l3;
  EXPECT_NE(no_l3.find("L3 size not known here (the triad bandwidth by working set below"), std::string::npos) << no_l3;
  EXPECT_EQ(no_l3.find("L3 0"), std::string::npos) << no_l3;
  {
    HardwareProfile flat = hw;
    flat.bandwidth.clear();
    EXPECT_EQ(render_hardware(flat, "g++", g).find("L3"), std::string::npos);
  }

  HardwareGuide ocl = g;
  ocl.backend = "opencl";
  ocl.local_mem_bytes = 4 << 20;
  ocl.max_work_group_size = 4096;
  ocl.max_work_item_sizes = {4096, 4096, 4096};
  ocl.compute_units = 2;
  std::string cl = render_hardware(hw, "PoCL 3.1", ocl);
  EXPECT_EQ(cl.find("OpenMP"), std::string::npos) << cl;
  EXPECT_NE(cl.find("local memory (__local) per work-group: 4.0 MiB"), std::string::npos) << cl;
  EXPECT_NE(cl.find("at most 4096 work-items in total, at most (4096, 4096, 4096) per dimension"), std::string::npos) << cl;
  EXPECT_NE(cl.find("compute units: 2"), std::string::npos) << cl;

  // What this machine's toolchain really enables, asked of the compiler.
  HardwareGuide here = describe_hardware_guide("cpu");
  EXPECT_NE(std::find(here.isa_extensions.begin(), here.isa_extensions.end(), "sse2"), here.isa_extensions.end());
}

// Each backend's hardware section describes the device its kernels run on: the CPU's caches,
// peaks and triad curve for the CPU and for OpenCL (PoCL runs on this CPU); for CUDA the GPU's
// peaks and bandwidth and no line of the host's; and no invented peak for a GPU nobody saw.
TEST(Prompt, EachBackendsHardwareSectionDescribesTheDeviceItRunsOn) {
  HardwareProfile cpu = testing::fake_hw();
  cpu.bandwidth = {{uint64_t{1} << 20, 200}, {uint64_t{64} << 20, 20}};
  const std::vector<std::string> cpu_lines = {"- CPU: Test CPU", "- caches: L1d 32.0 KiB per core", "FP32 FMA throughput: 100 GFLOP/s per core",
                                              "- DRAM bandwidth: 20.0 GB/s", "triad bandwidth by working set"};
  for (const char* backend : {"cpu", "opencl"}) {
    SCOPED_TRACE(backend);
    HardwareGuide g;
    g.backend = backend;
    std::string h = render_hardware(cpu, "the compiler", g);
    for (const auto& line : cpu_lines) EXPECT_NE(h.find(line), std::string::npos) << line << "\n" << h;
    EXPECT_EQ(h.find("int8 multiply-add throughput"), std::string::npos) << "no integer peak measured\n" << h;
  }
  // A measured integer peak is a line of its own (the compute roof of integer work).
  cpu.peak_giops = 400;
  cpu.peak_giops_core = 210;
  std::string with_int = render_hardware(cpu, "the compiler", HardwareGuide{});
  EXPECT_NE(with_int.find("- int8 multiply-add throughput: 400 GOP/s on all cores, 210 per core"), std::string::npos) << with_int;

  HardwareProfile gpu;
  gpu.target = *Target::parse("cuda-sm90");
  gpu.cpu_model = "NVIDIA H200";
  gpu.peak_gflops = 67000;
  gpu.peak_gbps = 4800;
  HardwareGuide g;
  g.backend = "cuda";
  g.arch = "sm_90";
  std::string h = render_hardware(gpu, "nvcc 13.0", g);
  EXPECT_NE(h.find("- target: cuda-sm90"), std::string::npos) << h;
  EXPECT_NE(h.find("- GPU: NVIDIA H200"), std::string::npos) << h;
  EXPECT_NE(h.find("FP32 FMA 67.0 TFLOP/s"), std::string::npos) << h;
  EXPECT_NE(h.find("4800 GB/s"), std::string::npos) << h;
  for (const char* host : {"- CPU:", "- caches:", "DRAM bandwidth", "per core", "triad bandwidth by working set", "host CPU"}) {
    EXPECT_EQ(h.find(host), std::string::npos) << host << "\n" << h;
  }
  // The probe's facts, when it ran, win over the profile's.
  g.device_name = "NVIDIA H200 (probed)";
  g.fp32_gflops = 60000;
  g.bandwidth = {{0, 4100}};
  g.peaks_source = "measured on this GPU by kope's probe";
  h = render_hardware(gpu, "nvcc 13.0", g);
  EXPECT_NE(h.find("FP32 FMA 60.0 TFLOP/s"), std::string::npos) << h;
  EXPECT_NE(h.find("4100 GB/s"), std::string::npos) << h;
  EXPECT_EQ(h.find("67.0 TFLOP/s"), std::string::npos) << h;

  // No GPU seen anywhere: the evaluator's generous placeholder peaks are not stated as facts.
  HardwareProfile unknown = gpu;
  unknown.cpu_model.clear();
  unknown.peak_gflops = 200000;
  unknown.peak_gbps = 10000;
  HardwareGuide none;
  none.backend = "cuda";
  h = render_hardware(unknown, "nvcc 13.0", none);
  EXPECT_NE(h.find("no GPU was found"), std::string::npos) << h;
  EXPECT_EQ(h.find("200.0 TFLOP/s"), std::string::npos) << h;
}

TEST(Prompt, OpenClPromptsUseCFencesAndHaveNoCppLeftovers) {
  spec::OpSpec op = testing::load_softmax();
  PromptLibrary lib = *PromptLibrary::load(std::filesystem::path(KOPE_SOURCE_DIR) / "prompts", "opencl");
  SharedEstimator est;
  PromptInput in;
  in.op = &op;
  in.reference_source = "void ref() {}\n";
  HardwareGuide g;
  g.backend = "opencl";
  in.hardware = render_hardware(testing::fake_hw(), "PoCL", g);
  in.toolchain = "PoCL";
  in.stage = memory::Stage::refine;
  Attempt inc;
  inc.iteration = 1;
  inc.verdict = eval::Verdict::correct;
  in.incumbent = render_incumbent(inc, "// kope: global=(N)\n__kernel void kope_kernel() {}\n", code_language("opencl"));
  context::Budget budget;
  budget.window = 32000;
  budget.generation = 4000;
  auto p = assemble_prompt(lib, in, {}, budget, context::Mode::active, est);
  ASSERT_TRUE(p) << p.error().message;
  const std::string& user = p->messages[1].content;
  EXPECT_NE(user.find("```c\n// kope: global=(N)"), std::string::npos) << user;
  EXPECT_EQ(user.find("OpenMP"), std::string::npos);
  const std::string& sys = p->messages[0].content;
  EXPECT_NE(sys.find("cdiv(a, b)"), std::string::npos);
  EXPECT_NE(sys.find("local="), std::string::npos);
  EXPECT_NE(sys.find("__builtin_nontemporal_store"), std::string::npos);
}

TEST(Prompt, ExperienceShowsNoItemTwiceAndQuarantineOnlyAsFeasibility) {
  Fixture f;
  auto kernel = [](const std::string& id, double score) {
    memory::RetrievedItem k = item(id, Kind::best_kernel, "rows", score, false, "softmax");
    k.kase->code = "int k() { return 4; }\n";
    return k;
  };
  std::vector<memory::RetrievedItem> state = {
      kernel("case:4", 2.0),
      kernel("case:7", 1.9),  // same code
      item("lesson:L1", Kind::lesson, "Rows: parallelise rows.", 1.5),
      item("lesson:L2", Kind::lesson, "Rows: parallelise rows.", 1.4),  // same text
      item("case:9", Kind::case_summary, "rows, once more", 1.2, false, "softmax")};
  state.back().quarantined = true;
  auto k = classify_knowledge(state, {}, f.op, memory::Stage::refine, f.lib, f.est, [](std::string_view) { return std::nullopt; });
  std::set<std::string> ids;
  for (const auto& it : k.warm) ids.insert(it.id);
  EXPECT_EQ(ids, (std::set<std::string>{"case:4", "lesson:L1", "case:9"}));
  context::Budget budget;
  budget.window = 32000;
  budget.generation = 4000;
  budget.memory_draft = budget.memory_repair = budget.memory_refine = 0;  // B_k's caps
  auto p = assemble_prompt(f.lib, f.input(), k, budget, context::Mode::active, f.est);
  ASSERT_TRUE(p) << p.error().message;
  const std::string& user = p->messages[1].content;
  size_t unverified = user.find("## Feasibility only: results from this machine awaiting re-verification");
  ASSERT_NE(unverified, std::string::npos) << user;
  EXPECT_GT(user.find("QUARANTINED: awaiting"), unverified);
  EXPECT_LT(user.find("## Experience from this machine: kernels"), unverified);
}

TEST(Prompt, TriedTableTrimsTheDescriptionNeverTheCause) {
  Attempt a;
  a.iteration = 1;
  a.verdict = eval::Verdict::rejected;
  a.optimisation = "AVX-512 3-pass softmax per row with a range-reduced polynomial exp, streaming stores for rows past 1 MiB, "
                   "16-row register tiles, and OpenMP dynamic scheduling over blocks of rows";
  a.message = "needed 7.37 ms of CPU time on never-seen inputs but 2.25 ms on inputs it had seen before: it keeps state | between calls";
  std::string t = render_tried({a});
  EXPECT_NE(t.find("on inputs it had seen before: it keeps state \\| between calls |"), std::string::npos) << t;
  EXPECT_EQ(t.find("blocks of rows"), std::string::npos) << "the description gives way";
  EXPECT_NE(t.find("AVX-512 3-pass softmax"), std::string::npos);
  // Shortened at a clause boundary, never mid-word with "...".
  EXPECT_NE(t.find("| AVX-512 3-pass softmax per row with a range-reduced polynomial exp, streaming stores for rows past 1 MiB, "
                   "16-row register tiles |"), std::string::npos) << t;
  EXPECT_EQ(t.find("..."), std::string::npos) << t;
}

TEST(Prompt, CodeIsCutOnlyAtLineBoundaries) {
  std::string code;
  for (int i = 0; i < 100; ++i) code += fmt::format("line {} of the kernel;\n", i);
  std::string cut = cut_at_lines(code, 200);
  EXPECT_LE(cut.find("[..."), 200u);
  EXPECT_NE(cut.find("more lines not shown ...]"), std::string::npos);
  EXPECT_EQ(cut.find("more bytes cut"), std::string::npos);
  for (auto& line : util::split(cut, '\n')) {
    if (!line.empty() && !line.starts_with("[...")) {
      EXPECT_TRUE(line.ends_with("of the kernel;")) << line;
    }
  }
  EXPECT_EQ(cut_at_lines(code, code.size()), code);
  EXPECT_EQ(cut_at_lines(code, 10000, 3), "line 0 of the kernel;\nline 1 of the kernel;\nline 2 of the kernel;\n[... 97 more lines not shown ...]\n");
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

// An input filled with `| specials(p)` says which values that means; one without, nothing.
TEST(Prompt, OpSpecExplainsSpecials) {
  auto silu = spec::load_op(std::filesystem::path(KOPE_SOURCE_DIR) / "ops/elementwise/silu");
  ASSERT_TRUE(silu) << silu.error().message;
  std::string text = render_op_spec(*silu);
  EXPECT_NE(text.find("specials(0.01)"), std::string::npos) << text;
  EXPECT_NE(text.find("is NaN, +Inf, -Inf, -0.0 or a subnormal"), std::string::npos) << text;
  auto sgemm = spec::load_op(std::filesystem::path(KOPE_SOURCE_DIR) / "ops/matmul/sgemm");
  ASSERT_TRUE(sgemm) << sgemm.error().message;
  EXPECT_EQ(render_op_spec(*sgemm).find("`specials(p)`"), std::string::npos);
}

}  // namespace
}  // namespace kope::agent
