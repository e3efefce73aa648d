// The forms of an active prompt and its layout (docs/design.md §5): end to end through the
// loop with the fake model and evaluator over a real store (SQLite in memory).
#include <gtest/gtest.h>

#include <regex>

#include <fmt/format.h>

#include "agent/forms.h"
#include "agent/memory_items.h"
#include "agent/test_support.h"
#include "util/strings.h"

namespace kope::agent {
namespace {

using nlohmann::json;
using testing::kernel_answer;
using testing::load_suite_op;

// A kernel answer judged `verdict` with the evaluator's `message`; `body` makes its code differ.
std::string answer(const std::string& optimisation, const std::string& verdict, const std::string& message,
                   const std::string& body, double time_us = 1000) {
  return fmt::format(
      "OPTIMISATION: {}\n```cpp\n// fake-verdict: {}\n// fake-message: {}\n// fake-time-us: {}\n#include <cstdint>\n"
      "extern \"C\" void kope_kernel(const float* x, float* y, int64_t N, int64_t D) {{\n{}\n}}\n```\n",
      optimisation, verdict, message, time_us, body);
}

struct StoreHarness {
  testing::Harness h;
  std::unique_ptr<memory::Database> store = std::move(*memory::open_store(":memory:"));

  StoreHarness() { h.config.reflect = false; }
  OpEnvironment env() {
    OpEnvironment e = h.env();
    e.store = store.get();
    return e;
  }
  void run(const spec::OpSpec& op, std::map<int, std::string> answers, const std::string& run_id) {
    h.config.max_iterations = static_cast<int>(answers.size());
    h.run_id = run_id;
    h.answers = std::move(answers);
    OpState st;
    auto end = run_op(env(), op, st);
    ASSERT_TRUE(end) << end.error().message;
  }
  // The kernel calls' messages (reflections left out), in order.
  std::vector<std::vector<llm::Message>> kernel_calls() const {
    std::vector<std::vector<llm::Message>> out;
    for (const auto& c : h.llm->calls()) {
      if (c.params.purpose != "reflect" && c.messages.size() >= 2) out.push_back(c.messages);
    }
    return out;
  }
};

// The code blocks of a prompt (their contents).
std::vector<std::string> code_blocks(const std::string& text) {
  std::vector<std::string> out;
  static const std::regex fence("```[a-z+]*\\n([\\s\\S]*?)```");
  for (auto it = std::sregex_iterator(text.begin(), text.end(), fence); it != std::sregex_iterator(); ++it) {
    out.push_back((*it)[1]);
  }
  return out;
}

bool in_code(const std::string& prompt, const std::string& marker) {
  for (const auto& b : code_blocks(prompt)) {
    if (b.find(marker) != std::string::npos) return true;
  }
  return false;
}

// A speed lesson scoped to `category`, drawn from the case `source`; its id.
std::string add_speed_lesson(memory::Database& store, const std::string& title, const std::string& text,
                             const std::string& category, int64_t source) {
  memory::LessonDelta d;
  d.lesson.kind = memory::LessonKind::strategy;
  d.lesson.title = title;
  d.lesson.text = text;
  d.lesson.scope = {category, "cpu", "", ""};
  d.lesson.source_cases = {source};
  auto id = store.apply(d);
  EXPECT_TRUE(id) << id.error().message;
  return id.value_or("");
}

TEST(Forms, AConvPromptHoldsNoCodeOfAnotherCategory) {
  StoreHarness s;
  spec::OpSpec sgemm = load_suite_op("matmul/sgemm");
  spec::OpSpec conv1x1 = load_suite_op("conv/conv2d_1x1");
  spec::OpSpec conv3x3 = load_suite_op("conv/conv2d_3x3");
  s.h.known_ops = {&sgemm, &conv1x1, &conv3x3};
  s.run(sgemm, {{1, kernel_answer("MATMUL_DRAFT", "correct", 1000)}, {2, kernel_answer("MATMUL_TILED", "correct", 400)}}, "seed");
  s.run(conv1x1, {{1, kernel_answer("CONV_DRAFT", "correct", 1000)}, {2, kernel_answer("CONV_BLOCKED", "correct", 500)}}, "seed");
  size_t before = s.kernel_calls().size();
  s.run(conv3x3, {{1, kernel_answer("THREE_A", "correct", 1000)}, {2, kernel_answer("THREE_B", "correct", 600)},
                  {3, kernel_answer("THREE_C", "correct", 300)}},
        "conv");
  auto calls = s.kernel_calls();
  ASSERT_EQ(calls.size(), before + 3);
  bool exemplar = false;
  for (size_t i = before; i < calls.size(); ++i) {
    const std::string& user = calls[i][1].content;
    EXPECT_FALSE(in_code(user, "MATMUL_")) << user;
    exemplar = exemplar || in_code(user, "CONV_BLOCKED");
  }
  EXPECT_TRUE(exemplar) << "the same category's best kernel is the draft's exemplar";
  // The draft carries at most one exemplar, and every admitted item says why it is there.
  auto prompts = s.h.events_of("prompt");
  int exemplars = 0;
  for (const auto& a : prompts[prompts.size() - 3]["admission"]) {
    exemplars += a["section"] == "exemplar";
    EXPECT_FALSE(a["reason"].get<std::string>().empty()) << a.dump();
  }
  EXPECT_LE(exemplars, 1);
}

TEST(Forms, TheOpPackAndThePerOpPartAreByteIdenticalAcrossAnOpsPrompts) {
  StoreHarness s;
  s.h.config.reflect = true;  // lessons, also while the op runs: the pack must not change
  s.h.reflection = R"({"lessons": [{"action": "add", "kind": "strategy", "title": "Block the output channels",
    "text": "Keep a block of output channels in registers and stream the input once per block."}]})";
  spec::OpSpec conv1x1 = load_suite_op("conv/conv2d_1x1");
  spec::OpSpec conv3x3 = load_suite_op("conv/conv2d_3x3");
  s.h.known_ops = {&conv1x1, &conv3x3};
  s.run(conv1x1, {{1, kernel_answer("CONV_DRAFT", "correct", 1000)}, {2, kernel_answer("CONV_BLOCKED", "correct", 400)}}, "seed");
  size_t before = s.kernel_calls().size();
  s.run(conv3x3, {{1, kernel_answer("A", "correct", 1000)}, {2, kernel_answer("B", "wrong_result", 500)},
                  {3, kernel_answer("C", "correct", 300)}, {4, kernel_answer("D", "correct", 200)}},
        "conv");
  auto calls = s.kernel_calls();
  ASSERT_EQ(calls.size(), before + 4);
  const auto& first = calls[before];
  ASSERT_GT(first[1].cache_prefix, 0u);
  const std::string prefix = first[1].content.substr(0, first[1].cache_prefix);
  EXPECT_NE(prefix.find("What memory knows for conv operators"), std::string::npos) << prefix;
  EXPECT_NE(prefix.find("## Operator specification"), std::string::npos);
  EXPECT_EQ(prefix.find("attempt 1 of"), std::string::npos) << "the per-op part names no attempt";
  for (size_t i = before + 1; i < calls.size(); ++i) {
    EXPECT_EQ(calls[i][0].content, first[0].content) << "the system message";
    ASSERT_EQ(calls[i][1].cache_prefix, first[1].cache_prefix) << "call " << i;
    EXPECT_EQ(calls[i][1].content.substr(0, calls[i][1].cache_prefix), prefix) << "call " << i;
  }
  // The pack was logged once, with the first prompt, and its items are admitted in every prompt.
  auto prompts = s.h.events_of("prompt");
  int packs = 0;
  std::erase_if(prompts, [](const json& p) { return p.value("purpose", "") == "reflect"; });
  ASSERT_GE(prompts.size(), 4u);
  for (size_t i = prompts.size() - 4; i < prompts.size(); ++i) {
    packs += prompts[i].contains("op_pack");
    bool pack_item = false;
    for (const auto& a : prompts[i]["admission"]) pack_item = pack_item || a["section"] == "op_pack";
    EXPECT_TRUE(pack_item) << prompts[i].dump();
  }
  EXPECT_EQ(packs, 1);
  // A resumed run gets the same pack back from the log.
  auto states = run::restore_states(s.h.all_events());
  ASSERT_TRUE(states) << states.error().message;
  const run::OpState& st = (*states)["conv2d_3x3"];
  ASSERT_TRUE(st.op_pack.has_value());
  EXPECT_FALSE(st.op_pack->items.empty());
  EXPECT_NE(prefix.find(st.op_pack->text), std::string::npos) << st.op_pack->text;
}

// A lesson whose source cases were timed under load (±180% here) is not evidence of speed: the
// active selection leaves it out of the op pack and the forms, while a lesson of the same
// category timed quietly goes in. Shown anyway (passive, random), it says how it was timed.
TEST(Forms, ALessonLearnedUnderLoadStaysOutOfTheActiveSelection) {
  StoreHarness s;
  spec::OpSpec conv1x1 = load_suite_op("conv/conv2d_1x1");
  spec::OpSpec conv3x3 = load_suite_op("conv/conv2d_3x3");
  s.h.known_ops = {&conv1x1, &conv3x3};
  s.run(conv1x1, {{1, kernel_answer("CONV_DRAFT", "correct", 1000)}}, "seed");
  auto seeded = s.store->cases({});
  ASSERT_TRUE(seeded && !seeded->empty());
  auto record = [&](const std::string& key, double ci_us) {
    memory::CaseRecord c = seeded->front();
    c.id = 0;
    c.natural_key = key;
    c.timings = {{9, 100.0, ci_us, 400.0, std::nullopt, false, 0.0, std::nullopt},
                 {10, 200.0, 2 * ci_us, 800.0, std::nullopt, false, 0.0, std::nullopt}};
    auto id = s.store->record_case(c);
    EXPECT_TRUE(id) << id.error().message;
    return id.value_or(0);
  };
  int64_t loud = record("load/loud", 180.0), quiet = record("load/quiet", 2.0);
  auto add = [&](const std::string& title, int64_t source) {
    return add_speed_lesson(*s.store, title, "measured on conv2d_1x1", "conv", source);
  };
  std::string loud_id = add("LOUD_LESSON: drop OpenMP, one thread", loud);
  std::string quiet_id = add("QUIET_LESSON: two threads over output channel blocks", quiet);

  size_t before = s.kernel_calls().size();
  s.run(conv3x3, {{1, kernel_answer("A", "correct", 1000)}}, "conv");
  auto calls = s.kernel_calls();
  ASSERT_EQ(calls.size(), before + 1);
  const std::string& user = calls.back()[1].content;
  EXPECT_NE(user.find("QUIET_LESSON"), std::string::npos) << user;
  EXPECT_EQ(user.find("LOUD_LESSON"), std::string::npos) << user;
  for (const auto& a : s.h.events_of("prompt").back()["admission"]) EXPECT_NE(a["id"], "lesson:" + loud_id) << a.dump();

  // What a prompt that shows it says, from the store's own figures.
  memory::RetrievalQuery q;
  q.task.op = conv3x3.name;
  q.task.category = conv3x3.category;
  q.backend = "cpu";
  q.stage = memory::Stage::draft;
  auto items = s.store->retrieve(q);
  ASSERT_TRUE(items) << items.error().message;
  int seen = 0;
  for (const auto& it : *items) {
    if (it.id != "lesson:" + loud_id && it.id != "lesson:" + quiet_id) continue;
    ++seen;
    ASSERT_TRUE(it.lesson && it.lesson->evidence_spread);
    bool is_loud = it.id == "lesson:" + loud_id;
    EXPECT_NEAR(*it.lesson->evidence_spread, is_loud ? 1.8 : 0.02, 1e-9);
    EXPECT_EQ(noisy_evidence(*it.lesson).has_value(), is_loud);
    EXPECT_EQ(render_item(it).find("learned from timings to ±180% (under load)") != std::string::npos, is_loud) << render_item(it);
  }
  EXPECT_EQ(seen, 2);
}

TEST(Forms, ExperienceOfAnotherKindOfWorkStaysOutOfTheActiveSelection) {
  // The harness's machine has a balance of 10 flops per byte: layernorm_gelu (2.3) and
  // groupnorm_silu (1.6) are memory-bound, matmul_bias_gelu (56) is compute-bound. All three are
  // in the fused category.
  StoreHarness s;
  spec::OpSpec near_op = load_suite_op("fused/layernorm_gelu");
  spec::OpSpec far_op = load_suite_op("fused/matmul_bias_gelu");
  spec::OpSpec target = load_suite_op("fused/groupnorm_silu");
  ASSERT_EQ(near_op.category, target.category);
  ASSERT_EQ(far_op.category, target.category);
  s.h.known_ops = {&near_op, &far_op, &target};
  s.run(near_op, {{1, kernel_answer("NEAR_DRAFT", "correct", 1000)}, {2, kernel_answer("NEAR_FUSED", "correct", 500)}}, "seed");
  s.run(far_op, {{1, kernel_answer("FAR_DRAFT", "correct", 1000)}, {2, kernel_answer("FAR_TILED", "correct", 400)}}, "seed");
  auto seeded = s.store->cases({});
  ASSERT_TRUE(seeded);
  auto source_of = [&](const std::string& op) {
    for (const auto& c : *seeded) {
      if (c.task.op == op) return c.id;
    }
    ADD_FAILURE() << "no case of " << op;
    return int64_t{0};
  };
  auto add = [&](const std::string& title, int64_t source) {
    return add_speed_lesson(*s.store, title, "measured on a fused operator", "fused", source);
  };
  std::string near_lesson = add("NEAR_LESSON: one pass for the statistics", source_of(near_op.name));
  std::string far_lesson = add("FAR_LESSON: pack B into panels", source_of(far_op.name));

  size_t before = s.kernel_calls().size();
  size_t calls_before = s.h.llm->calls().size();
  s.h.config.reflect = true;  // the reflection's lesson list leaves them out too
  s.run(target, {{1, kernel_answer("G_A", "correct", 1000)}, {2, kernel_answer("G_B", "correct", 800)}}, "gn");
  int reflections = 0;
  for (size_t i = calls_before; i < s.h.llm->calls().size(); ++i) {
    const auto& c = s.h.llm->calls()[i];
    if (c.params.purpose != "reflect") continue;
    ++reflections;
    EXPECT_EQ(c.messages.back().content.find("FAR_LESSON"), std::string::npos) << c.messages.back().content;
  }
  EXPECT_GT(reflections, 0);
  auto calls = s.kernel_calls();
  ASSERT_EQ(calls.size(), before + 2);
  bool near_seen = false;
  for (size_t i = before; i < calls.size(); ++i) {
    const std::string& user = calls[i][1].content;
    EXPECT_EQ(user.find("FAR_"), std::string::npos) << user;
    near_seen = near_seen || user.find("NEAR_") != std::string::npos;
  }
  EXPECT_TRUE(near_seen) << "experience of the same kind of work stays";
  for (const auto& p : s.h.events_of("prompt")) {
    if (!p.contains("admission")) continue;
    for (const auto& a : p.at("admission")) EXPECT_NE(a["id"], "lesson:" + far_lesson) << a.dump();
  }

  // The store gives each lesson the intensities of the ops it was drawn from.
  memory::RetrievalQuery q;
  q.task.op = target.name;
  q.task.category = target.category;
  q.backend = "cpu";
  q.stage = memory::Stage::draft;
  auto items = s.store->retrieve(q);
  ASSERT_TRUE(items) << items.error().message;
  int seen = 0;
  for (const auto& it : *items) {
    if (it.id != "lesson:" + near_lesson && it.id != "lesson:" + far_lesson) continue;
    ++seen;
    ASSERT_TRUE(it.lesson);
    ASSERT_EQ(it.lesson->source_intensity.size(), 1u);
    bool is_far = it.id == "lesson:" + far_lesson;
    EXPECT_GT(it.lesson->source_intensity[0], is_far ? 10.0 : 1.0);
    EXPECT_EQ(lesson_from_other_work(*it.lesson, 1.6, 10.0), is_far);
  }
  EXPECT_EQ(seen, 2);
}

TEST(Forms, OtherKindOfWorkNeedsBothSidesOfTheBalanceAndAFactorApart) {
  EXPECT_TRUE(other_kind_of_work(0.3, 50, 10));
  EXPECT_TRUE(other_kind_of_work(50, 0.3, 10));
  EXPECT_FALSE(other_kind_of_work(0.3, 8, 10));   // both memory-bound
  EXPECT_FALSE(other_kind_of_work(20, 300, 10));  // both compute-bound
  EXPECT_FALSE(other_kind_of_work(8, 12, 10));    // either side, but close
  EXPECT_TRUE(other_kind_of_work(2.5, 10, 10));   // a factor of 4 apart, on either side
  EXPECT_FALSE(other_kind_of_work(0, 50, 10));    // unknown intensity
  EXPECT_FALSE(other_kind_of_work(0.3, 50, 0));   // unknown balance
  memory::RetrievedLesson l;
  EXPECT_FALSE(lesson_from_other_work(l, 0.3, 10)) << "no known source";
  l.source_intensity = {50, 0.5};
  EXPECT_FALSE(lesson_from_other_work(l, 0.3, 10)) << "one source did the same kind of work";
  l.source_intensity = {50, 120};
  EXPECT_TRUE(lesson_from_other_work(l, 0.3, 10));
}

TEST(Forms, ARecipeSaysWhichStepsWereTimedUnderLoad) {
  StoreHarness s;
  spec::OpSpec op = load_suite_op("conv/conv2d_1x1");
  s.h.known_ops = {&op};
  s.run(op, {{1, kernel_answer("SEED", "correct", 1000)}}, "seed");
  auto seeded = s.store->cases({});
  ASSERT_TRUE(seeded && !seeded->empty());
  std::optional<int64_t> parent;
  auto step = [&](const std::string& key, const std::string& change, double speedup, bool disturbed) {
    memory::CaseRecord c = seeded->front();
    c.id = 0;
    c.natural_key = key;
    c.optimisation = change;
    c.parent_id = parent;
    c.stage = parent ? memory::Stage::refine : memory::Stage::draft;
    c.speedup_vs_reference = speedup;
    c.timings = {{9, 100.0, 2.0, 400.0, std::nullopt, disturbed, 0.4, std::nullopt},
                 {10, 200.0, 4.0, 800.0, std::nullopt, disturbed, 0.4, std::nullopt}};
    auto id = s.store->record_case(c);
    EXPECT_TRUE(id) << id.error().message;
    parent = id.value_or(0);
    return id.value_or(0);
  };
  step("recipe/1", "LOUD_STEP", 2.0, true);
  step("recipe/2", "SECOND_STEP", 3.0, false);
  int64_t last = step("recipe/3", "THIRD_STEP", 4.5, false);
  auto recipe = kernel_recipe(*s.store, last);
  ASSERT_TRUE(recipe) << recipe.error().message;
  auto lines = util::split(*recipe, '\n');
  ASSERT_GE(lines.size(), 3u) << *recipe;
  const std::string label = "(timed under outside load: uncertain)";
  EXPECT_NE(lines[0].find("LOUD_STEP"), std::string::npos) << *recipe;
  EXPECT_NE(lines[0].find(label), std::string::npos) << *recipe;
  EXPECT_NE(lines[1].find("1.50x over step 1 " + label), std::string::npos) << "a ratio against a loud step: " << *recipe;
  EXPECT_NE(lines[2].find("1.50x over step 2"), std::string::npos) << *recipe;
  EXPECT_EQ(lines[2].find(label), std::string::npos) << *recipe;
}

TEST(Forms, ARepairShowsTheFixDiffOnlyForTheSameErrorSignature) {
  const std::string crash = "crashed with SIGSEGV (invalid memory access at the end of a row)";
  auto seed_memory = [&](StoreHarness& s, const spec::OpSpec& op) {
    s.run(op, {{1, answer("UNROLLED", "runtime_error", crash, "  for (int64_t i = 0; i <= N * D; ++i) y[i] = x[i];")},
               {2, answer("BOUNDS_FIXED", "correct", "correct on every case", "  for (int64_t i = 0; i < N * D; ++i) y[i] = x[i];")}},
          "seed");
  };
  spec::OpSpec conv1x1 = load_suite_op("conv/conv2d_1x1");
  spec::OpSpec conv3x3 = load_suite_op("conv/conv2d_3x3");
  {
    StoreHarness s;
    s.h.known_ops = {&conv1x1, &conv3x3};
    seed_memory(s, conv1x1);
    s.run(conv3x3, {{1, answer("MINE", "runtime_error", crash, "  y[N * D] = 0;")}, {2, kernel_answer("R", "correct")}}, "conv");
    const std::string repair = s.kernel_calls().back()[1].content;
    EXPECT_NE(repair.find("stage: repair"), std::string::npos);
    EXPECT_NE(repair.find("## The same error, fixed before"), std::string::npos) << repair << s.h.events_of("prompt").back().dump(1);
    EXPECT_NE(repair.find("```diff"), std::string::npos) << repair;
    EXPECT_NE(repair.find("+  for (int64_t i = 0; i < N * D; ++i)"), std::string::npos) << repair;
  }
  {
    StoreHarness s;
    s.h.known_ops = {&conv1x1, &conv3x3};
    seed_memory(s, conv1x1);
    s.run(conv3x3, {{1, answer("MINE", "wrong_result", "y[0]: got 1, expected 2", "  y[0] = 1;")}, {2, kernel_answer("R", "correct")}},
          "conv");
    const std::string repair = s.kernel_calls().back()[1].content;
    EXPECT_NE(repair.find("stage: repair"), std::string::npos);
    EXPECT_EQ(repair.find("## The same error, fixed before"), std::string::npos) << repair;
    EXPECT_EQ(repair.find("```diff\n@@"), std::string::npos) << repair;
  }
}

TEST(Forms, TheIncumbentIsShownOnceAndTheLatestCorrectAttemptAsADiff) {
  StoreHarness s;
  spec::OpSpec conv3x3 = load_suite_op("conv/conv2d_3x3");
  s.h.known_ops = {&conv3x3};
  s.run(conv3x3, {{1, answer("FIRST", "correct", "ok", "  int first_marker = 1; (void)first_marker;", 1000)},
                  {2, answer("SECOND", "correct", "ok", "  int second_marker = 2; (void)second_marker;", 1000)},
                  {3, kernel_answer("THIRD", "correct", 500)}},
        "conv");
  auto calls = s.kernel_calls();
  ASSERT_EQ(calls.size(), 3u);
  const std::string& third = calls[2][1].content;
  // Attempt 2 was correct and not faster: attempt 1 stays the incumbent, shown once.
  size_t n = 0;
  for (size_t pos = 0; (pos = third.find("\n  int first_marker = 1;", pos)) != std::string::npos; ++pos) ++n;  // not the diff's "-" line
  EXPECT_EQ(n, 1u) << third;
  EXPECT_NE(third.find("Attempt 2's code, as a diff against the incumbent"), std::string::npos) << third;
  EXPECT_NE(third.find("+  int second_marker = 2;"), std::string::npos) << third;
}

// A latest attempt changed in more places than one diff may show comes whole, never as part of
// a diff (a model building on it could not rebuild the hunks left out).
TEST(Forms, ALatestAttemptTooChangedForADiffIsShownWhole) {
  StoreHarness s;
  spec::OpSpec conv3x3 = load_suite_op("conv/conv2d_3x3");
  s.h.known_ops = {&conv3x3};
  std::string first, second;
  for (int i = 0; i < 300; ++i) {
    first += fmt::format("  int first_{0} = {0}; (void)first_{0};\n", i);
    second += fmt::format("  int second_{0} = {0}; (void)second_{0};\n", i);
  }
  s.run(conv3x3, {{1, answer("FIRST", "correct", "ok", first, 1000)},
                  {2, answer("SECOND", "correct", "ok", second, 1000)},
                  {3, kernel_answer("THIRD", "correct", 500)}},
        "conv");
  auto calls = s.kernel_calls();
  ASSERT_EQ(calls.size(), 3u);
  const std::string& third = calls[2][1].content;
  EXPECT_NE(third.find("Attempt 2's code (too changed from the incumbent to show as a diff)"), std::string::npos) << third;
  EXPECT_NE(third.find("  int second_299 = 299;"), std::string::npos) << third;
  EXPECT_EQ(third.find("not shown"), std::string::npos) << third;
}

TEST(Forms, DiffWithinKeepsWholeHunks) {
  std::string before, after;
  for (int i = 0; i < 200; ++i) {
    before += fmt::format("line {}\n", i);
    after += i % 50 == 10 ? fmt::format("changed {}\n", i) : fmt::format("line {}\n", i);
  }
  std::string all = diff_within(before, after, 100000);
  EXPECT_EQ(std::count(all.begin(), all.end(), '@') / 4, 4);  // four hunks, "@@ ... @@" each
  std::string some = diff_within(before, after, 150);
  EXPECT_NE(some.find("more hunks not shown"), std::string::npos) << some;
  EXPECT_EQ(some.find("changed 160"), std::string::npos);
  EXPECT_EQ(diff_within(before, after, 10), "");  // not even one hunk fits
  EXPECT_EQ(diff_within(before, before, 1000), "");
}

TEST(Forms, DigestDropsCodeAndJournal) {
  EXPECT_EQ(digest_text("[best kernel · a]\nchange: x\nlineage: y\n```cpp\ncode\n```\n"), "[best kernel · a]\nchange: x");
  EXPECT_EQ(digest_text("[case 3]\nchange: x\njournal: long story\nmore\n"), "[case 3]\nchange: x");
}

}  // namespace
}  // namespace kope::agent
