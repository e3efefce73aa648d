// The run's record as typed events (run/events.h) and the one function that applies them
// (run/op_state.h): the live state after every event equals the state rebuilt from the log up
// to it; a run recorded before the typed events (tests/runs/before-typed-events) reads back line
// for line, rebuilds, reports and passes the prompt check.
#include <filesystem>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "agent/prompt_check.h"
#include "agent/test_support.h"
#include "report/run_data.h"
#include "run/events.h"
#include "run/op_state.h"
#include "util/fs.h"
#include "util/strings.h"

namespace kope::agent {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using testing::Harness;
using testing::kernel_answer;

const fs::path k_before = fs::path(KOPE_SOURCE_DIR) / "tests/runs/before-typed-events";

// The line as the log wrote it, without what the log adds ("seq", "time") and the op's name.
json body(json line) {
  line.erase("seq");
  line.erase("time");
  line.erase("op");
  return line;
}

// Runs the harness's op, keeping the live state after each of its events; then checks that the
// state rebuilt from every prefix of the log equals the live state after that prefix's last
// event.
void expect_live_equals_rebuilt(Harness& h) {
  std::vector<json> live;
  OpEnvironment env = h.env();
  env.on_event = [&](const std::string& op, const OpState& st) {
    EXPECT_EQ(op, h.op.name);
    live.push_back(run::state_json(st));
  };
  OpState st;
  auto end = run_op(env, h.op, st);
  ASSERT_TRUE(end) << end.error().message;
  std::vector<json> lines = h.all_events();
  ASSERT_EQ(lines.size(), live.size()) << "every event of the op is applied as it is logged";
  ASSERT_FALSE(lines.empty());
  for (size_t n = 1; n <= lines.size(); ++n) {
    SCOPED_TRACE(::testing::Message() << "after event " << n << " (" << lines[n - 1].value("type", "") << ")");
    auto rebuilt = run::restore_states(std::vector<json>(lines.begin(), lines.begin() + static_cast<std::ptrdiff_t>(n)));
    ASSERT_TRUE(rebuilt) << rebuilt.error().message;
    ASSERT_TRUE(rebuilt->contains(h.op.name));
    EXPECT_EQ(run::state_json(rebuilt->at(h.op.name)), live[n - 1]);
  }
  EXPECT_EQ(run::state_json(st), live.back());
}

TEST(TypedEvents, LiveStateEqualsTheStateRebuiltFromEveryPrefixOfTheLog) {
  Harness h;
  h.answers = {{1, kernel_answer("naive", "compile_error")},
               {2, kernel_answer("fixed syntax", "wrong_result")},
               {3, kernel_answer("fixed indexing", "correct", 500)},
               {4, kernel_answer("unrolled", "correct", 600)},
               {5, kernel_answer("omp rows", "correct", 200)}};
  expect_live_equals_rebuilt(h);
  // The run had what the state keeps: attempts, records, reflections, the end.
  std::set<std::string> types;
  for (const auto& e : h.all_events()) types.insert(e.value("type", ""));
  for (const char* t : {"op_started", "prompt", "answer", "attempt", "recorded", "reflection", "reflection_applied", "op_done"}) {
    EXPECT_TRUE(types.contains(t)) << t;
  }
}

TEST(TypedEvents, LiveStateEqualsTheRebuiltOneWhenTheModelStopsTheOp) {
  Harness h;
  h.failure = [](const std::vector<llm::Message>&, const llm::ChatParams& p) -> std::optional<llm::LlmError> {
    if (p.purpose == "reflect") return std::nullopt;
    llm::LlmError e;
    e.cls = llm::FailureClass::server_error;
    e.message = "down";
    e.http_status = 503;
    return e;
  };
  expect_live_equals_rebuilt(h);
  auto stopped = h.events_of("op_stopped");
  ASSERT_EQ(stopped.size(), 1u);
  EXPECT_EQ(stopped[0]["reason"], "llm_unavailable");
  EXPECT_FALSE(stopped[0]["errors"].empty());
}

TEST(TypedEvents, EveryLineOfARunRecordedBeforeThemIsReadAndWrittenBackTheSame) {
  auto lines = run::read_events(k_before / "events.jsonl");
  ASSERT_TRUE(lines) << lines.error().message;
  ASSERT_GT(lines->size(), 40u);
  std::set<std::string> seen;
  for (const auto& line : *lines) {
    SCOPED_TRACE(line.dump());
    auto e = run::parse_event(line);
    ASSERT_TRUE(e) << e.error().message;
    EXPECT_FALSE(std::holds_alternative<run::UnknownEvent>(e->event));
    EXPECT_EQ(e->op, line.value("op", ""));
    EXPECT_EQ(e->seq, line.at("seq").get<int64_t>());
    EXPECT_EQ(e->time, line.at("time").get<std::string>());
    EXPECT_EQ(run::to_json(e->event), body(line));
    seen.insert(line.at("type").get<std::string>());
  }
  EXPECT_GE(seen.size(), 10u);
}

TEST(TypedEvents, AnUnknownTypeIsKeptWholeAndLeavesTheStateAsItIs) {
  json line{{"type", "from_a_later_kope"}, {"op", "x"}, {"seq", 3}, {"time", "t"}, {"detail", {{"a", 1}}}};
  auto e = run::parse_event(line);
  ASSERT_TRUE(e) << e.error().message;
  ASSERT_TRUE(std::holds_alternative<run::UnknownEvent>(e->event));
  EXPECT_EQ(run::to_json(e->event), line);
  auto states = run::restore_states(std::vector<json>{line, {{"type", "op_started"}, {"op", "x"}, {"experience", "seen"}}});
  ASSERT_TRUE(states) << states.error().message;
  EXPECT_TRUE(states->at("x").started);
  EXPECT_EQ(states->at("x").experience, "seen");
}

TEST(TypedEvents, AMalformedKnownEventFailsNamingItsTypeAndSeq) {
  auto e = run::parse_event(json{{"type", "recorded"}, {"op", "x"}, {"seq", 7}, {"iteration", "two"}, {"case_id", 1}});
  ASSERT_FALSE(e);
  EXPECT_EQ(e.error().kind, ErrorKind::corrupt);
  EXPECT_NE(e.error().message.find("'recorded' event (seq 7)"), std::string::npos) << e.error().message;
}

TEST(TypedEvents, EachTypeIsWrittenAndReadBackTheSame) {
  run::RunStartedEvent started{true, "r1", 3, std::nullopt, "slurm", 2};
  run::RunEndedEvent ended{false, true, std::nullopt, std::vector<std::string>{"x: down"}};
  run::PromptEvent reflect_prompt;
  reflect_prompt.purpose = "reflect";
  reflect_prompt.key = "end";
  reflect_prompt.total_tokens = 90;
  reflect_prompt.token_scale = 1.25;
  reflect_prompt.tier_tokens = {{"system", 40}, {"hot", 50}, {"warm", 0}, {"cold", 0}};
  run::PromptEvent kernel_prompt;
  kernel_prompt.purpose = "refine";
  kernel_prompt.iteration = 2;
  kernel_prompt.mode = "active";
  kernel_prompt.total_tokens = 900;
  kernel_prompt.evidence = run::RefineEvidence{"conv", 7, 2};
  run::ReflectionEvent reflection;
  reflection.key = "k3";
  reflection.trigger = "notable";
  reflection.attempt = 3;
  reflection.problems = {"one"};
  reflection.parsed = true;
  reflection.tokens_prompt = 5;
  reflection.cost_usd = 0.5;
  std::vector<run::Event> events = {started,
                                    ended,
                                    run::OpErrorEvent{"boom"},
                                    run::SlurmSubmittedEvent{"42", {1, 2}},
                                    run::SlurmTaskEndedEvent{2, "42", "FAILED", "NonZeroExitCode"},
                                    run::OpStartedEvent{"llm", "active", "unseen"},
                                    reflect_prompt,
                                    kernel_prompt,
                                    run::LlmErrorEvent{2, "rate_limited", "slow down", 429, "model unavailable (rate_limited): slow down"},
                                    run::RetimeEvent{4, 0.25, run::Decision::recorded_timings, "disturbed"},
                                    run::RecordedEvent{4, 17},
                                    run::RecordedEvent{5, 18, "compile_error: expected N before N"},
                                    reflection,
                                    run::ReflectionFailedEvent{"end", "timeout", "late"},
                                    run::ReflectionAppliedEvent{"k3", {"l1"}, {}},
                                    run::OpStoppedEvent{"cancelled", {}},
                                    run::OpDoneEvent{"max_iterations", "fixed", "", 5, true, 3}};
  for (const auto& e : events) {
    json j = run::to_json(e);
    SCOPED_TRACE(j.dump());
    auto back = run::parse_event(j);
    ASSERT_TRUE(back) << back.error().message;
    EXPECT_EQ(back->event.index(), e.index());
    EXPECT_EQ(run::to_json(back->event), j);
    EXPECT_NE(std::find(run::event_types().begin(), run::event_types().end(), j.at("type").get<std::string>()),
              run::event_types().end());
  }
}

TEST(TypedEvents, TheRecordedErrorSignatureIsPartOfTheStateAndSurvivesAResume) {
  run::OpState st;
  ASSERT_TRUE(run::apply(st, run::RecordedEvent{1, 7, "wrong_result: case N=N"}));
  ASSERT_TRUE(run::apply(st, run::RecordedEvent{2, 8, ""}));  // a correct case
  EXPECT_EQ(st.case_ids.at(2), 8);
  EXPECT_EQ(st.error_signatures.at(1), "wrong_result: case N=N");
  EXPECT_FALSE(st.error_signatures.contains(2));
  // The log line carries it only when there is one, so a correct case's line reads as before.
  json with = run::to_json(run::Event(run::RecordedEvent{1, 7, "wrong_result: case N=N"}));
  EXPECT_EQ(with.at("error_signature"), "wrong_result: case N=N");
  EXPECT_FALSE(run::to_json(run::Event(run::RecordedEvent{2, 8, ""})).contains("error_signature"));
}

TEST(RecordedBeforeTypedEvents, RebuildsAsItsResultsSay) {
  auto log = run::read_log(k_before / "events.jsonl");
  ASSERT_TRUE(log) << log.error().message;
  auto states = run::restore_states(*log);
  ASSERT_TRUE(states) << states.error().message;
  auto results = util::read_file(k_before / "results.json");
  ASSERT_TRUE(results);
  json r = json::parse(*results);
  ASSERT_EQ(r["ops"].size(), 2u);
  for (const auto& op : r["ops"]) {
    SCOPED_TRACE(op["name"].get<std::string>());
    const run::OpState& st = states->at(op["name"].get<std::string>());
    EXPECT_TRUE(st.done);
    EXPECT_FALSE(st.pending);
    EXPECT_EQ(static_cast<int>(st.attempts.size()), op["attempts"].get<int>());
    EXPECT_EQ(st.case_ids.size(), st.attempts.size());
    ASSERT_TRUE(st.incumbent());
    EXPECT_EQ(st.incumbent()->iteration, op["attempts_to_best"].get<int>());
    EXPECT_FALSE(st.reflections.empty());
    for (const auto& [key, rec] : st.reflections) EXPECT_TRUE(rec.applied) << key;
  }
}

TEST(RecordedBeforeTypedEvents, ReportsAndPassesThePromptCheck) {
  auto run = report::load_run(k_before);
  ASSERT_TRUE(run) << run.error().message;
  EXPECT_TRUE(run->complete());
  EXPECT_EQ(run->started_seq.at("e2e_scale"), 2);
  EXPECT_EQ(run->started_seq.at("e2e_softmax"), 26);
  EXPECT_EQ(run->states.at("e2e_scale").attempts.size(), 4u);
  auto check = check_run_prompts(k_before);
  ASSERT_TRUE(check) << check.error().message;
  EXPECT_GT(check->prompts, 0);
  EXPECT_TRUE(check->ok()) << check->to_text();
}

}  // namespace
}  // namespace kope::agent
