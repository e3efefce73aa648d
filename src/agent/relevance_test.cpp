// Relevance before volume and the contamination guard (docs/design.md §5, §11), end to end
// through the loop: the fake model and evaluator, the real SQLite store.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include "agent/run.h"
#include "agent/test_support.h"
#include "run/results.h"

namespace kope::agent {
namespace {

using nlohmann::json;
using testing::kernel_answer;
using testing::load_suite_op;

// The harness over a real store (SQLite in memory), every answer carrying `marker` in its code.
struct StoreHarness {
  testing::Harness h;
  std::unique_ptr<memory::Database> store = std::move(*memory::open_store(":memory:"));

  OpEnvironment env() {
    OpEnvironment e = h.env();
    e.store = store.get();
    return e;
  }
  // Runs `op` for `iterations` correct attempts whose kernels carry `marker`, as run `run_id`.
  void run(const spec::OpSpec& op, const std::string& marker, int iterations, const std::string& run_id) {
    h.config.max_iterations = iterations;
    h.run_id = run_id;
    h.answers.clear();
    for (int k = 1; k <= iterations; ++k) h.answers[k] = kernel_answer(marker + fmt::format("_{}", k), "correct", 1000.0 / k);
    OpState st;
    auto end = run_op(env(), op, st);
    ASSERT_TRUE(end) << end.error().message;
  }
  // The user messages the model was sent for kernels (reflections left out), in order.
  std::vector<std::string> kernel_prompts() const {
    std::vector<std::string> out;
    for (const auto& c : h.llm->calls()) {
      if (c.params.purpose != "reflect" && c.messages.size() >= 2) out.push_back(c.messages[1].content);
    }
    return out;
  }
};

TEST(Relevance, AConvPromptHoldsNoElementwiseKernel) {
  StoreHarness s;
  s.h.config.reflect = false;
  spec::OpSpec relu = load_suite_op("elementwise/relu");
  spec::OpSpec conv1x1 = load_suite_op("conv/conv2d_1x1");
  spec::OpSpec conv3x3 = load_suite_op("conv/conv2d_3x3");
  s.h.known_ops = {&relu, &conv1x1, &conv3x3};
  s.run(relu, "ELEMENTWISE_RELU", 1, "seed-run");
  s.run(conv1x1, "CONV_ONE_BY_ONE", 1, "seed-run");
  size_t before = s.kernel_prompts().size();
  s.run(conv3x3, "CONV_THREE", 1, "conv-run");
  auto prompts = s.kernel_prompts();
  ASSERT_EQ(prompts.size(), before + 1);
  const std::string& prompt = prompts.back();
  EXPECT_EQ(prompt.find("ELEMENTWISE_RELU"), std::string::npos) << prompt;
  EXPECT_NE(prompt.find("CONV_ONE_BY_ONE"), std::string::npos) << "a kernel of the same category is offered";
  // The prompt event says why each item is there.
  auto events = s.h.events_of("prompt");
  ASSERT_FALSE(events.empty());
  const json& last = events.back();
  bool conv_kernel = false;
  for (const auto& a : last["admission"]) {
    EXPECT_FALSE(a["reason"].get<std::string>().empty()) << a.dump();
    EXPECT_TRUE(a["parts"].contains("relevance") || a["id"].get<std::string>().starts_with("note:")) << a.dump();
    EXPECT_NE(a["category"], "elementwise") << a.dump();
    if (a["section"] == "kernels" || a["section"] == "exemplar") conv_kernel = true;
  }
  EXPECT_TRUE(conv_kernel);
  EXPECT_EQ(last["admission"].size(), last["admitted"].size());
}

TEST(Relevance, AGeneralNoteShownInThisTaskIsNotShownAgain) {
  StoreHarness s;
  s.h.config.reflect = false;
  s.run(s.h.op, "SOFTMAX", 4, "notes-run");
  auto events = s.h.events_of("prompt");
  ASSERT_EQ(events.size(), 4u);
  std::map<std::string, int> shown;
  for (const auto& e : events) {
    for (const auto& id : e["admitted"]) {
      if (id.get<std::string>().starts_with("note:")) ++shown[id.get<std::string>()];
    }
  }
  ASSERT_FALSE(shown.empty()) << "the first prompt shows the notes that apply to softmax";
  for (const auto& [id, n] : shown) EXPECT_EQ(n, 1) << id << " shown in " << n << " prompts of one task";
  // The notes' text follows the ids: after the prompt that showed a note, no prompt shows its text.
  auto prompts = s.kernel_prompts();
  ASSERT_EQ(prompts.size(), events.size());
  for (const auto& [id, n] : shown) {
    std::string text = s.h.prompts.notes[static_cast<size_t>(std::stoi(id.substr(5)) - 1)].title + ": ";
    size_t first = prompts.size();
    for (size_t i = 0; i < prompts.size(); ++i) {
      if (prompts[i].find(text) != std::string::npos) {
        if (first == prompts.size()) first = i;
        else ADD_FAILURE() << id << " shown again in prompt " << i + 1;
      }
    }
    EXPECT_LT(first, prompts.size()) << id;
  }
  // A note for matrix multiplication does not apply to a normalisation op at all.
  for (size_t i = 0; i < s.h.prompts.notes.size(); ++i) {
    if (!s.h.prompts.notes[i].applies_to("normalization", memory::Stage::draft)) {
      EXPECT_FALSE(shown.contains(fmt::format("note:{}", i + 1))) << s.h.prompts.notes[i].title;
    }
  }
}

// Many other-category cases, each with the given learned value, as the broad query finds them.
std::vector<memory::RetrievedItem> other_category_cases(double learned) {
  std::vector<memory::RetrievedItem> out;
  for (int i = 0; i < 60; ++i) {
    memory::RetrievedItem r;
    r.kind = memory::RetrievedItem::Kind::case_summary;
    r.id = fmt::format("case:{}", 100 + i);
    r.op = "relu";
    r.category = "elementwise";
    r.score = 1.0;
    r.learned = learned;
    r.case_id = 100 + i;
    r.target = "x86_64-avx2-fma";
    r.kase.emplace();
    r.kase->verdict = eval::Verdict::correct;
    r.kase->optimisation = fmt::format("variant {} of a vectorised loop with {} accumulators and a blocking of {} elements "
                                       "along the row", i, i % 7 + 2, 64 * (i + 1));
    out.push_back(r);
  }
  return out;
}

TEST(Relevance, TheColdTierStaysWithinItsCapWithoutLearnedValue) {
  testing::Harness h;
  PromptInput in;
  in.op = &h.op;
  in.reference_source = *util::read_file(h.op.reference_path);
  context::Budget budget = h.config.budget;
  auto category_of = [](std::string_view) -> std::optional<std::string> { return std::nullopt; };
  auto cold_items = [](const AssembledPrompt& p) {
    int64_t t = 0;
    for (const auto& a : p.admission) t += a.tier == "cold" && !a.id.starts_with("note:") ? a.tokens : 0;
    return t;
  };
  auto plain = classify_knowledge({}, other_category_cases(0.0), h.op, memory::Stage::draft, h.prompts, h.estimator,
                                  category_of);
  auto p = assemble_prompt(h.prompts, in, plain, budget, context::Mode::active, h.estimator);
  ASSERT_TRUE(p) << p.error().message;
  int64_t base_cap = static_cast<int64_t>(budget.cold_cap * static_cast<double>(p->knowledge_budget));
  int64_t cold_all = 0;
  for (const auto& a : p->admission) cold_all += a.tier == "cold" ? a.tokens : 0;
  EXPECT_LE(cold_all, base_cap);
  EXPECT_GT(cold_items(*p), 0);
  EXPECT_GT(p->dropped, 30) << "most of the 60 cases stay out";
  // The same items with a positive learned value may take the grown cap, and no more.
  auto learned = classify_knowledge({}, other_category_cases(0.5), h.op, memory::Stage::draft, h.prompts, h.estimator,
                                    category_of);
  auto q = assemble_prompt(h.prompts, in, learned, budget, context::Mode::active, h.estimator);
  ASSERT_TRUE(q) << q.error().message;
  EXPECT_GT(cold_items(*q), base_cap);
  EXPECT_LE(cold_items(*q), static_cast<int64_t>(budget.cold_cap_learned * static_cast<double>(q->knowledge_budget)));
}

// A Run over the real store (two ops of one category), as `kope run` drives it.
struct GuardFixture {
  std::optional<util::TempDir> tmp = *util::TempDir::create("kope-holdout-test");
  testing::Harness h;
  std::unique_ptr<memory::Database> store = std::move(*memory::open_store(":memory:"));
  std::vector<spec::OpSpec> ops;
  GuardFixture() {
    h.config.reflect = false;
    ops.push_back(testing::load_softmax());
    ops.push_back(testing::make_twin(tmp->path() / "ops", "softmax_twin", "normalization"));
  }
  // One run of every op: attempt k's kernel carries "<marker>_<op>_<k>".
  json run(const std::string& id, const std::string& marker, bool holdout, run::Policy policy = run::Policy::llm) {
    RunConfig c;
    c.run_id = id;
    c.loop = h.config;
    c.loop.policy = policy;
    c.loop.max_iterations = 2;
    c.holdout = holdout;
    c.jobs = 1;  // softmax first, then its twin
    c.target = "x86_64-avx2-fma";
    h.llm = std::make_unique<fakes::ScriptedLlm>(h.llm->profile(), [marker](const auto& messages, const auto& params) {
      bool twin = messages.size() >= 2 && messages[1].content.find("- name: softmax_twin") != std::string::npos;
      std::string op = twin ? "twin" : "softmax";
      int k = testing::attempt_number(messages);
      if (params.purpose == "reflect") return fakes::fake_response(messages, "{\"lessons\": []}");
      return fakes::fake_response(messages, kernel_answer(fmt::format("{}_{}_{}", marker, op, k), "correct", 1000.0 / k));
    });
    auto r = Run::create(c, ops, tmp->path() / id);
    EXPECT_TRUE(r) << r.error().message;
    RunServices sv;
    sv.evaluator = &h.evaluator;
    sv.store = store.get();
    sv.llm = policy == run::Policy::llm ? h.llm.get() : nullptr;
    sv.prompts = &h.prompts;
    auto report = (*r)->execute(sv);
    EXPECT_TRUE(report) << report.error().message;
    return json::parse(*util::read_file(tmp->path() / id / "results.json"));
  }
  std::string prompts_text() const {
    std::string all;
    for (const auto& c : h.llm->calls()) {
      if (c.params.purpose != "reflect" && c.messages.size() >= 2) all += c.messages[1].content + "\n=====\n";
    }
    return all;
  }
  std::vector<json> events(const std::string& id, const std::string& type) const {
    std::vector<json> out;
    auto all = run::read_events(tmp->path() / id / "events.jsonl");
    EXPECT_TRUE(all) << all.error().message;
    for (auto& e : all ? *all : std::vector<json>{}) {
      if (e.value("type", "") == type) out.push_back(e);
    }
    return out;
  }
};

const json& op_entry(const json& results, const std::string& name) {
  for (const auto& o : results["ops"]) {
    if (o["name"] == name) return o;
  }
  static const json none;
  ADD_FAILURE() << "no op " << name;
  return none;
}

TEST(Holdout, KeepsEarlierExperienceOutOfPromptsAndReplayButUsesTheRunsOwn) {
  GuardFixture f;
  json first = f.run("run-1", "EARLIER", false);
  EXPECT_EQ(op_entry(first, "softmax")["experience"], "unseen");

  json guarded = f.run("run-2", "GUARDED", true);
  std::string prompts = f.prompts_text();
  EXPECT_EQ(prompts.find("EARLIER_"), std::string::npos) << "run 1's kernels reached a held-out prompt";
  // The current run's own experience is used: the twin, run after softmax, is offered softmax's
  // kernel of this run.
  EXPECT_NE(prompts.find("GUARDED_softmax_2"), std::string::npos);
  for (const auto& e : f.events("run-2", "prompt")) {
    for (const auto& a : e["admission"]) EXPECT_EQ(a["reason"].get<std::string>().find("EARLIER"), std::string::npos);
  }
  for (const char* op : {"softmax", "softmax_twin"}) EXPECT_EQ(op_entry(guarded, op)["experience"], "held-out") << op;
  ASSERT_TRUE(guarded["figures_by_experience"].contains("held-out"));
  EXPECT_EQ(guarded["figures_by_experience"]["held-out"]["ops"], 2);
  EXPECT_NE(run::results_summary(guarded).find("held-out operators: 2 of 2 solved"), std::string::npos)
      << run::results_summary(guarded);
  bool config_says = json::parse(*util::read_file(f.tmp->path() / "run-2/config.json")).value("holdout", false);
  EXPECT_TRUE(config_says);

  // Replay under the guard finds nothing of the ops' earlier runs to replay.
  json replayed = f.run("run-3", "REPLAY", true, run::Policy::replay);
  for (const char* op : {"softmax", "softmax_twin"}) {
    EXPECT_EQ(op_entry(replayed, op)["attempts"], 0) << op;
    EXPECT_EQ(op_entry(replayed, op)["stop_reason"], "replay_exhausted") << op;
  }
  // Without the guard, the same memory replays them, and the ops are marked seen.
  json open = f.run("run-4", "OPEN", false, run::Policy::replay);
  for (const char* op : {"softmax", "softmax_twin"}) {
    EXPECT_GE(op_entry(open, op)["attempts"].get<int>(), 1) << op;
    EXPECT_EQ(op_entry(open, op)["experience"], "seen") << op;
  }
  EXPECT_TRUE(open["figures_by_experience"].contains("seen"));
  EXPECT_FALSE(open["figures_by_experience"].contains("held-out"));
}

TEST(Holdout, WithoutTheGuardEarlierExperienceReachesThePromptAndIsMarkedSeen) {
  GuardFixture f;
  f.run("run-1", "EARLIER", false);
  json second = f.run("run-2", "LATER", false);
  EXPECT_NE(f.prompts_text().find("EARLIER_"), std::string::npos);
  EXPECT_EQ(op_entry(second, "softmax")["experience"], "seen");
}

}  // namespace
}  // namespace kope::agent
