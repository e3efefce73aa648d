#include "agent/run.h"

#include <unistd.h>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "run/results.h"
#include "agent/test_support.h"

namespace kope::agent {
namespace {

using nlohmann::json;
using testing::kernel_answer;

// Cancels the run after a given number of attempts (a user's Ctrl-C mid-run).
class CancelAfter : public ProgressSink {
 public:
  CancelAfter(std::atomic<bool>& flag, int n) : m_flag(flag), m_n(n) {}
  void attempt_done(const std::string&, const Attempt&, double, int64_t) override {
    if (++m_seen >= m_n) m_flag = true;
  }

 private:
  std::atomic<bool>& m_flag;
  int m_n;
  std::atomic<int> m_seen{0};
};

struct RunFixture {
  std::optional<util::TempDir> tmp = *util::TempDir::create("kope-run-test");
  std::vector<spec::OpSpec> ops;
  testing::Harness h;  // fakes, prompts, hardware
  RunFixture() {
    ops.push_back(testing::load_softmax());
    ops.push_back(testing::make_twin(tmp->path() / "ops", "softmax_twin", "normalization"));
    h.answers = {{1, kernel_answer("naive", "compile_error")}, {2, kernel_answer("fixed", "correct", 500)},
                 {3, kernel_answer("faster", "correct", 250)}};
  }
  RunConfig config() {
    RunConfig c;
    c.run_id = "r1";
    c.loop = h.config;
    c.loop.max_iterations = 3;
    c.jobs = 2;
    c.seed = 11;
    c.target = "x86_64-avx2-fma";
    return c;
  }
  RunServices services(std::atomic<bool>* cancel = nullptr, ProgressSink* progress = nullptr) {
    RunServices s;
    s.evaluator = &h.evaluator;
    s.store = &h.store;
    s.llm = h.llm.get();
    s.prompts = &h.prompts;
    s.cancel = cancel;
    s.progress = progress;
    return s;
  }
};

TEST(Run, TwoOpsInParallelWriteResultsAndConfig) {
  RunFixture f;
  auto run = Run::create(f.config(), f.ops, f.tmp->path() / "run");
  ASSERT_TRUE(run) << run.error().message;
  auto services = f.services();
  auto report = (*run)->execute(services);
  ASSERT_TRUE(report) << report.error().message;
  EXPECT_TRUE(report->complete);
  EXPECT_TRUE(report->errors.empty());
  auto text = util::read_file(f.tmp->path() / "run/results.json");
  ASSERT_TRUE(text);
  json r = json::parse(*text);
  EXPECT_TRUE(r["complete"].get<bool>());
  ASSERT_EQ(r["ops"].size(), 2u);
  for (const auto& op : r["ops"]) {
    EXPECT_TRUE(op["solved"].get<bool>());
    EXPECT_EQ(op["attempts"].get<int>(), 3);
    EXPECT_NEAR(op["best_speedup_vs_reference"].get<double>(), 4.0, 1e-9);
    EXPECT_NEAR(op["best_speedup_vs_library"].get<double>(), 3.2, 1e-9);
    EXPECT_GT(op["tokens_prompt"].get<int64_t>(), 0);
    EXPECT_GT(op["tokens_completion"].get<int64_t>(), 0);
    EXPECT_EQ(op["attempts_to_first_correct"].get<int>(), 2);
    EXPECT_EQ(op["attempts_to_best"].get<int>(), 3);
    EXPECT_NEAR(op["fraction_of_roofline"].get<double>(), 0.4, 1e-9);
    EXPECT_EQ(op["cases_passed"], op["cases_total"]);
    EXPECT_GT(op["tier_tokens"]["hot"].get<int64_t>(), 0);
  }
  const json& fig = r["figures"];
  EXPECT_DOUBLE_EQ(fig["pass_rate"].get<double>(), 1.0);
  EXPECT_DOUBLE_EQ(fig["fast_p"]["2"].get<double>(), 1.0);
  EXPECT_NEAR(fig["geomean_speedup_vs_reference"].get<double>(), 4.0, 1e-9);
  EXPECT_EQ(fig["solved"].get<int>(), 2);
  EXPECT_FALSE(fig["pass_rate_over"].get<std::string>().empty());
  auto cfg = json::parse(*util::read_file(f.tmp->path() / "run/config.json"));
  EXPECT_EQ(cfg["run_id"], "r1");
  EXPECT_EQ(cfg["ops"].size(), 2u);
  EXPECT_EQ(cfg["loop"]["max_iterations"], 3);
  EXPECT_EQ(f.h.store.all_cases().size(), 6u);
  // A second create in the same directory is refused.
  auto again = Run::create(f.config(), f.ops, f.tmp->path() / "run");
  ASSERT_FALSE(again);
  EXPECT_EQ(again.error().kind, ErrorKind::usage);
  EXPECT_NE(results_summary(r).find("solved 2/2"), std::string::npos);
}

// A device backend's run sees one hardware, the evaluator's: the prompts describe the GPU (its
// peaks and bandwidth) and nothing of the host CPU that launches it, and the memory records the
// GPU beside its target.
TEST(Run, ADeviceBackendsAgentPromptsAndMemorySeeTheDeviceNotTheHost) {
  std::optional<util::TempDir> tmp = *util::TempDir::create("kope-run-device");
  HardwareProfile gpu;
  gpu.target = *Target::parse("cuda-sm90");
  gpu.cpu_model = "NVIDIA H200";
  gpu.cores = 132;
  gpu.l2_bytes = uint64_t{50} << 20;
  gpu.peak_gflops = 67000;
  gpu.peak_gbps = 4800;
  fakes::FakeEvaluator::Config cfg;
  cfg.target = "cuda-sm90";
  cfg.backend = "cuda";
  cfg.toolchain = "nvcc 13.0 | -O3 -arch=sm_90";
  cfg.hardware = gpu;
  fakes::FakeEvaluator evaluator(cfg);
  testing::Harness h;  // the host CPU's profile is h.hw ("Test CPU"): it must reach nothing
  auto prompts = PromptLibrary::load(std::filesystem::path(KOPE_SOURCE_DIR) / "prompts", "cuda");
  ASSERT_TRUE(prompts) << prompts.error().message;
  HardwareGuide guide;  // what describe_hardware_guide("cuda") says on a machine without a GPU
  guide.backend = "cuda";
  guide.arch = "sm_90";
  std::vector<spec::OpSpec> ops = {testing::load_softmax()};
  RunConfig c;
  c.run_id = "dev";
  c.loop = h.config;
  c.loop.max_iterations = 2;
  c.backend = "cuda";
  c.target = "cuda-sm90";
  auto run = Run::create(c, ops, tmp->path() / "run");
  ASSERT_TRUE(run) << run.error().message;
  RunServices s;
  s.evaluator = &evaluator;
  s.store = &h.store;
  s.llm = h.llm.get();
  s.guide = &guide;
  s.prompts = &*prompts;
  auto report = (*run)->execute(s);
  ASSERT_TRUE(report) << report.error().message;
  ASSERT_TRUE(report->complete) << fmt::format("{}", fmt::join(report->errors, "; "));

  int kernel_prompts = 0;
  for (const auto& call : h.llm->calls()) {
    if (call.params.purpose == "reflect") continue;
    ++kernel_prompts;
    std::string text;
    for (const auto& m : call.messages) text += m.content + "\n";
    EXPECT_NE(text.find("- GPU: NVIDIA H200"), std::string::npos) << text;
    EXPECT_NE(text.find("FP32 FMA 67.0 TFLOP/s"), std::string::npos) << text;
    EXPECT_NE(text.find("4800 GB/s"), std::string::npos) << text;
    for (const char* host : {"Test CPU", "- CPU:", "- caches:", "DRAM bandwidth", "GFLOP/s per core", "triad bandwidth by working set",
                             "OpenMP", "host CPU"}) {
      EXPECT_EQ(text.find(host), std::string::npos) << "a host line (" << host << ") in a CUDA prompt:\n" << text;
    }
  }
  EXPECT_GE(kernel_prompts, 1);
  ASSERT_FALSE(h.store.all_cases().empty());
  for (const auto& rec : h.store.all_cases()) {
    EXPECT_EQ(rec.hardware.target, "cuda-sm90");
    EXPECT_EQ(rec.hardware.cpu_model, "NVIDIA H200");
    EXPECT_DOUBLE_EQ(rec.hardware.peak_gflops, 67000);
    EXPECT_DOUBLE_EQ(rec.hardware.peak_gbps, 4800);
  }
}

TEST(Run, CancelThenResumeGivesTheSameFigures) {
  RunFixture straight;
  auto run = Run::create(straight.config(), straight.ops, straight.tmp->path() / "run");
  ASSERT_TRUE(run);
  auto s1 = straight.services();
  auto full = (*run)->execute(s1);
  ASSERT_TRUE(full);

  RunFixture f;
  std::atomic<bool> cancel{false};
  CancelAfter sink(cancel, 2);
  RunConfig cfg = f.config();
  cfg.jobs = 1;
  {
    auto r1 = Run::create(cfg, f.ops, f.tmp->path() / "run");
    ASSERT_TRUE(r1);
    auto s = f.services(&cancel, &sink);
    auto partial = (*r1)->execute(s);
    ASSERT_TRUE(partial);
    EXPECT_FALSE(partial->complete);
    EXPECT_TRUE(partial->cancelled);
  }
  int calls_before = f.h.kernel_calls();
  auto r2 = Run::open(f.tmp->path() / "run");
  ASSERT_TRUE(r2) << r2.error().message;
  EXPECT_TRUE((*r2)->resumed());
  // The lock keeps a second process out while this one drives the run.
  auto r3 = Run::open(f.tmp->path() / "run");
  ASSERT_FALSE(r3);
  EXPECT_EQ(r3.error().kind, ErrorKind::usage);
  // ... at once, naming the directory and the holder.
  std::string in_use = fmt::format("the run directory {} is in use by another kope process (pid {})",
                                   (f.tmp->path() / "run").string(), ::getpid());
  EXPECT_NE(r3.error().message.find(in_use), std::string::npos) << r3.error().message;
  // A new run there is refused the same way (not "already holds a run": it is in use).
  auto r4 = Run::create(cfg, f.ops, f.tmp->path() / "run");
  ASSERT_FALSE(r4);
  EXPECT_NE(r4.error().message.find(in_use), std::string::npos) << r4.error().message;
  auto s = f.services();
  auto rest = (*r2)->execute(s);
  ASSERT_TRUE(rest) << rest.error().message;
  EXPECT_TRUE(rest->complete);
  EXPECT_GT(f.h.kernel_calls(), calls_before);
  EXPECT_EQ(f.h.kernel_calls(), straight.h.kernel_calls());  // nothing asked twice
  EXPECT_EQ(f.h.store.all_cases().size(), straight.h.store.all_cases().size());
  const json& a = full->results;
  const json& b = rest->results;
  for (size_t i = 0; i < 2; ++i) {
    for (const char* key : {"name", "solved", "attempts", "best_speedup_vs_reference", "best_speedup_vs_library",
                            "tokens_completion", "attempts_to_first_correct", "attempts_to_best", "cases_passed", "verdicts",
                            "labels"}) {
      EXPECT_EQ(a["ops"][i][key], b["ops"][i][key]) << key;
    }
  }
  EXPECT_EQ(a["figures"]["pass_rate"], b["figures"]["pass_rate"]);
  EXPECT_EQ(a["figures"]["fast_p"], b["figures"]["fast_p"]);
}

TEST(Run, ResumeRefusesAChangedSpec) {
  RunFixture f;
  {
    auto run = Run::create(f.config(), f.ops, f.tmp->path() / "run");
    ASSERT_TRUE(run);
  }
  auto toml = f.tmp->path() / "ops/softmax_twin/op.toml";
  ASSERT_TRUE(util::write_file_atomic(toml, *util::read_file(toml) + "\n# changed\n"));
  auto run = Run::open(f.tmp->path() / "run");
  ASSERT_FALSE(run);
  EXPECT_EQ(run.error().kind, ErrorKind::config);
  EXPECT_NE(run.error().message.find("softmax_twin"), std::string::npos);
  auto none = Run::open(f.tmp->path() / "nothing-here");
  ASSERT_FALSE(none);
  EXPECT_EQ(none.error().kind, ErrorKind::not_found);
}

TEST(Run, DuplicateOpNamesAreRefused) {
  RunFixture f;
  auto ops = f.ops;
  ops.push_back(ops[0]);
  ops.back().dir = f.tmp->path() / "elsewhere";
  auto run = Run::create(f.config(), ops, f.tmp->path() / "run");
  ASSERT_FALSE(run);
  EXPECT_EQ(run.error().kind, ErrorKind::usage);
}

TEST(Results, FiguresOverStatedSets) {
  spec::OpSpec a = testing::load_softmax();
  spec::OpSpec b = a;
  b.name = "unsolved";
  b.library_path.reset();
  spec::OpSpec c = a;
  c.name = "never_run";
  OpState sa;
  Attempt bad;
  bad.iteration = 1;
  bad.verdict = eval::Verdict::wrong_result;
  bad.cases_passed = 5;
  bad.cases_total = 12;
  bad.outcome = memory::Outcome::negative;
  Attempt good;
  good.iteration = 2;
  good.verdict = eval::Verdict::correct;
  good.improved = true;
  good.speedup_vs_reference = 1.2;
  good.speedup_vs_library = 0.5;
  good.fraction_of_roofline = 0.3;
  good.cases_passed = 12;
  good.cases_total = 12;
  good.tokens_prompt = 100;
  good.tokens_completion = 50;
  good.outcome = memory::Outcome::effective;
  TimingSummary ts;
  ts.case_index = 3;
  ts.median_us = 10;
  ts.disturbed = true;
  ts.contention = 0.5;
  good.timings = {ts};
  sa.attempts = {bad, good};
  sa.done = true;
  OpState sb;
  sb.attempts = {bad};
  sb.done = true;
  json r = compute_results(json{{"run_id", "x"}}, {a, b, c}, {{"softmax", sa}, {"unsolved", sb}});
  const json& f = r["figures"];
  EXPECT_EQ(f["cases_total"], 36);
  EXPECT_EQ(f["cases_passed"], 12 + 5 + 0);
  EXPECT_NEAR(f["pass_rate"].get<double>(), 17.0 / 36, 1e-12);
  EXPECT_NEAR(f["fast_p"]["0"].get<double>(), 1.0 / 3, 1e-12);
  EXPECT_NEAR(f["fast_p"]["1"].get<double>(), 1.0 / 3, 1e-12);
  EXPECT_NEAR(f["fast_p"]["1.5"].get<double>(), 0.0, 1e-12);
  EXPECT_NEAR(f["fast_p_vs_library"]["0"].get<double>(), 1.0 / 2, 1e-12);  // softmax and never_run have a library
  EXPECT_NEAR(f["geomean_speedup_vs_reference"].get<double>(), 1.2, 1e-12);
  EXPECT_EQ(f["tokens_per_solved_op"].get<double>(), 150);
  EXPECT_EQ(f["attempts_to_first_correct_mean"].get<double>(), 2);
  EXPECT_EQ(r["ops"][2]["attempts"], 0);
  EXPECT_FALSE(r["ops"][2]["solved"].get<bool>());
  EXPECT_EQ(r["ops"][1]["best_speedup_vs_reference"], nullptr);
  EXPECT_EQ(r["ops"][0]["verdicts"]["wrong_result"], 1);
  // Timings taken under outside load are owned as such.
  EXPECT_TRUE(r["ops"][0]["best_timing_disturbed"].get<bool>());
  EXPECT_EQ(r["ops"][0]["disturbed_attempts"], 1);
  EXPECT_EQ(r["ops"][1]["best_timing_disturbed"], nullptr);
  EXPECT_EQ(f["disturbed_best"], 1);
  EXPECT_NE(results_summary(r).find("disturbed by outside load: the best kernel of 1 of 1"), std::string::npos) << results_summary(r);
  auto back = attempt_from_json(to_json(good));
  ASSERT_TRUE(back);
  ASSERT_EQ(back->timings.size(), 1u);
  EXPECT_TRUE(back->timings[0].disturbed);
  EXPECT_DOUBLE_EQ(back->timings[0].contention, 0.5);
}

TEST(Attempt, DecisionKeepsItsJsonSpellingBothWays) {
  const std::pair<run::Decision, const char*> spellings[] = {
      {run::Decision::faster, "faster_than_incumbent"},
      {run::Decision::slower, "slower_than_incumbent"},
      {run::Decision::not_faster, "not_faster_than_incumbent"},
      {run::Decision::undecided, "undecided"},
      {run::Decision::recorded_timings, "recorded_timings"},
  };
  Attempt a;
  a.iteration = 2;
  EXPECT_EQ(to_json(a)["incumbent_decision"], nullptr);
  for (const auto& [decision, name] : spellings) {
    a.decision = decision;
    json j = to_json(a);
    EXPECT_EQ(j["incumbent_decision"]["decision"], name);
    auto back = attempt_from_json(j);
    ASSERT_TRUE(back) << back.error().message;
    EXPECT_EQ(back->decision, decision) << name;
  }
  EXPECT_EQ(run::decision_of(eval::IncumbentDecision::unavailable), run::Decision::none);
  EXPECT_EQ(run::incumbent_decision(run::Decision::recorded_timings), std::nullopt);
  json unknown = to_json(a);
  unknown["incumbent_decision"]["decision"] = "quicker";
  auto bad = attempt_from_json(unknown);
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().kind, ErrorKind::corrupt);
}

TEST(Attempt, OutcomeKeepsItsLabelSpellingBothWays) {
  const std::pair<memory::Outcome, const char*> spellings[] = {
      {memory::Outcome::effective, "effective"},
      {memory::Outcome::partial, "partial"},
      {memory::Outcome::ineffective, "ineffective"},
      {memory::Outcome::negative, "negative"},
  };
  Attempt a;
  a.iteration = 3;
  EXPECT_EQ(to_json(a)["label"], "");  // not decided yet
  auto none = attempt_from_json(to_json(a));
  ASSERT_TRUE(none) << none.error().message;
  EXPECT_EQ(none->outcome, std::nullopt);
  for (const auto& [outcome, name] : spellings) {
    a.outcome = outcome;
    json j = to_json(a);
    EXPECT_EQ(j["label"], name);
    auto back = attempt_from_json(j);
    ASSERT_TRUE(back) << back.error().message;
    EXPECT_EQ(back->outcome, outcome) << name;
    EXPECT_EQ(run::label_name(outcome), name);
  }
  json unknown = to_json(a);
  unknown["label"] = "great";
  auto bad = attempt_from_json(unknown);
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().kind, ErrorKind::corrupt);
  EXPECT_NE(bad.error().message.find("attempt 3: unknown outcome label 'great' (expected one of effective, partial, "
                                     "ineffective, negative, or none)"),
            std::string::npos)
      << bad.error().message;
}

TEST(Attempt, AnswerFormKeepsItsSpellingBothWays) {
  Attempt a;
  a.iteration = 2;
  EXPECT_EQ(to_json(a)["answer_form"], "");  // no model answered, or a run written before the field
  auto none = attempt_from_json(to_json(a));
  ASSERT_TRUE(none) << none.error().message;
  EXPECT_EQ(none->answer_form, std::nullopt);
  for (const auto& [form, name] : {std::pair{run::AnswerForm::whole, "whole"}, std::pair{run::AnswerForm::edits, "edits"}}) {
    a.answer_form = form;
    json j = to_json(a);
    EXPECT_EQ(j["answer_form"], name);
    auto back = attempt_from_json(j);
    ASSERT_TRUE(back) << back.error().message;
    EXPECT_EQ(back->answer_form, form) << name;
  }
  json unknown = to_json(a);
  unknown["answer_form"] = "diff";
  auto bad = attempt_from_json(unknown);
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().kind, ErrorKind::corrupt);
  EXPECT_NE(bad.error().message.find("attempt 2: unknown answer form 'diff' (expected one of whole, edits, or none)"),
            std::string::npos)
      << bad.error().message;
}

TEST(Attempt, DecidedByKeepsTheRuleNameBothWays) {
  const std::pair<eval::ReplacementRule, const char*> spellings[] = {
      {eval::ReplacementRule::side_by_side, "side_by_side"},
      {eval::ReplacementRule::own_waits, "own_waits"},
      {eval::ReplacementRule::retime_when_quiet, "retime_when_quiet"},
      {eval::ReplacementRule::raised_margin, "raised_margin"},
      {eval::ReplacementRule::recorded_timings, "recorded_timings"},
  };
  Attempt a;
  a.iteration = 4;
  a.decision = run::Decision::faster;  // decided_by is written inside incumbent_decision
  EXPECT_EQ(to_json(a)["incumbent_decision"]["decided_by"], "");  // a run written before the rule had a name
  auto none = attempt_from_json(to_json(a));
  ASSERT_TRUE(none) << none.error().message;
  EXPECT_EQ(none->decided_by, std::nullopt);
  for (const auto& [rule, name] : spellings) {
    a.decided_by = rule;
    a.decided_by_reason = std::string("because ") + name;
    json j = to_json(a);
    EXPECT_EQ(j["incumbent_decision"]["decided_by"], name);
    auto back = attempt_from_json(j);
    ASSERT_TRUE(back) << back.error().message;
    EXPECT_EQ(back->decided_by, rule) << name;
    EXPECT_EQ(back->decided_by_reason, a.decided_by_reason);
    EXPECT_EQ(eval::parse_replacement_rule(name), rule);
  }
  json unknown = to_json(a);
  unknown["incumbent_decision"]["decided_by"] = "coin_toss";
  auto bad = attempt_from_json(unknown);
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().kind, ErrorKind::corrupt);
  EXPECT_NE(bad.error().message.find("attempt 4: unknown replacement rule 'coin_toss' (expected one of side_by_side, own_waits, "
                                     "retime_when_quiet, raised_margin, recorded_timings, or none)"),
            std::string::npos)
      << bad.error().message;
}

TEST(Events, TornLastLineIsDroppedAndTheLogContinues) {
  auto dir = util::TempDir::create("kope-events");
  auto path = dir->path() / "events.jsonl";
  {
    auto log = EventLog::open(path);
    ASSERT_TRUE(log);
    ASSERT_TRUE((*log)->append({{"type", "a"}}));
    ASSERT_TRUE((*log)->append({{"type", "b"}}));
  }
  ASSERT_TRUE(util::write_file_atomic(path, *util::read_file(path) + "{\"type\": \"c\", \"se"));
  auto events = read_events(path);
  ASSERT_TRUE(events);
  EXPECT_EQ(events->size(), 2u);
  auto log = EventLog::open(path);
  ASSERT_TRUE(log);
  ASSERT_TRUE((*log)->append({{"type", "d"}}));
  events = read_events(path);
  ASSERT_TRUE(events) << events.error().message;
  ASSERT_EQ(events->size(), 3u);
  EXPECT_EQ((*events)[2]["type"], "d");
  EXPECT_EQ((*events)[2]["seq"], 3);
  ASSERT_TRUE(util::write_file_atomic(path, "{\"type\": \"a\"}\nnot json\n{\"type\": \"b\"}\n"));
  auto bad = read_events(path);
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().kind, ErrorKind::corrupt);
  EXPECT_NE(bad.error().message.find(":2:"), std::string::npos);
}

}  // namespace
}  // namespace kope::agent
