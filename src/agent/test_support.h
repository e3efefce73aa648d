// agent/test_support.h — shared fixtures for the agent's unit tests (not part of kope_lib).
#pragma once

#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <memory>
#include <regex>
#include <string>

#include <fmt/format.h>

#include "run/events.h"
#include "fakes/fakes.h"
#include "agent/loop.h"
#include "agent/prompt.h"
#include "util/fs.h"

namespace kope::agent::testing {

using fakes::FakeEvaluator;
using fakes::InMemoryStore;
using fakes::ScriptedLlm;
using fakes::fake_response;

inline spec::OpSpec load_softmax() {
  auto op = spec::load_op(std::filesystem::path(KOPE_SOURCE_DIR) / "ops/normalization/softmax");
  if (!op) ADD_FAILURE() << op.error().message;
  return op ? *op : spec::OpSpec{};
}

// The suite's op at `rel` ("conv/conv2d_3x3").
inline spec::OpSpec load_suite_op(const std::string& rel) {
  auto op = spec::load_op(std::filesystem::path(KOPE_SOURCE_DIR) / "ops" / rel);
  if (!op) ADD_FAILURE() << op.error().message;
  return op ? *op : spec::OpSpec{};
}

// A copy of softmax under another name (same kernel signature), in `dir`.
inline spec::OpSpec make_twin(const std::filesystem::path& dir, const std::string& name, const std::string& category) {
  auto src = std::filesystem::path(KOPE_SOURCE_DIR) / "ops/normalization/softmax";
  auto toml = util::read_file(src / "op.toml");
  std::string t = *toml;
  t.replace(t.find("name = \"softmax\""), 16, "name = \"" + name + "\"");
  t.replace(t.find("category = \"normalization\""), 26, "category = \"" + category + "\"");
  auto d = dir / name;
  (void)util::make_dirs(d);
  (void)util::write_file_atomic(d / "op.toml", t);
  (void)util::write_file_atomic(d / "reference.cpp", *util::read_file(src / "reference.cpp"));
  auto op = spec::load_op(d);
  if (!op) ADD_FAILURE() << op.error().message;
  return *op;
}

inline HardwareProfile fake_hw() {
  HardwareProfile hw;
  hw.target = *Target::parse("x86_64-avx2-fma");
  hw.cpu_model = "Test CPU";
  hw.cores = 2;
  hw.l1d_bytes = 32 << 10;
  hw.l2_bytes = 1 << 20;
  hw.l3_bytes = 32 << 20;
  hw.peak_gflops = 200;
  hw.peak_gflops_core = 100;
  hw.peak_gbps = 20;
  return hw;
}

// A model answer whose kernel the FakeEvaluator judges as `verdict` taking `time_us`.
inline std::string kernel_answer(const std::string& optimisation, const std::string& verdict, double time_us = 1000) {
  return fmt::format(
      "OPTIMISATION: {}\n```cpp\n// fake-verdict: {}\n// fake-time-us: {}\n#include <cstdint>\n"
      "extern \"C\" void kope_kernel(const float* x, float* y, int64_t N, int64_t D) {{\n"
      "  for (int64_t i = 0; i < N * D; ++i) y[i] = x[i];  // {}\n}}\n```\n",
      optimisation, verdict, time_us, optimisation);
}

inline int attempt_number(const std::vector<llm::Message>& messages) {
  std::smatch m;
  static const std::regex re("attempt (\\d+) of");
  if (messages.size() >= 2 && std::regex_search(messages[1].content, m, re)) return std::stoi(m[1]);
  return 0;
}

// Everything one op's loop needs, with fakes.
struct Harness {
  spec::OpSpec op = load_softmax();
  HardwareProfile hw = fake_hw();
  PromptLibrary prompts;
  FakeEvaluator evaluator;
  InMemoryStore store;
  LoopConfig config;
  SharedEstimator estimator;
  std::atomic<bool> cancel{false};
  std::map<int, std::string> answers;  // attempt number -> answer text
  std::string reflection = R"({"lessons": [{"action": "add", "kind": "strategy", "title": "Use row-parallel loops",
    "text": "Parallelise over rows with OpenMP; rows are independent."}]})";
  std::function<std::optional<llm::LlmError>(const std::vector<llm::Message>&, const llm::ChatParams&)> failure;
  std::unique_ptr<ScriptedLlm> llm;
  std::optional<util::TempDir> dir;
  std::unique_ptr<EventLog> events;
  std::string run_id = "run-test";
  std::vector<const spec::OpSpec*> known_ops;

  Harness() : Harness(FakeEvaluator::Config{.hardware = fake_hw()}) {}
  explicit Harness(FakeEvaluator::Config evaluator_config) : evaluator(std::move(evaluator_config)) {
    auto lib = PromptLibrary::load(std::filesystem::path(KOPE_SOURCE_DIR) / "prompts", "cpu");
    if (!lib) ADD_FAILURE() << lib.error().message;
    prompts = *lib;
    llm::Profile profile;
    profile.model = "fake";
    profile.context_window = 32000;
    profile.max_output_tokens = 2000;
    llm = std::make_unique<ScriptedLlm>(profile, [this](const auto& messages, const auto& params) -> llm::LlmResult<llm::ChatResponse> {
      if (failure) {
        if (auto f = failure(messages, params)) return std::unexpected(*f);
      }
      if (params.purpose == "reflect") return fake_response(messages, reflection);
      int k = attempt_number(messages);
      auto it = answers.find(k);
      return fake_response(messages, it == answers.end() ? kernel_answer("default", "correct", 1000) : it->second);
    });
    config.max_iterations = 5;
    config.patience = 0;
    config.roofline_target = 0;
    config.budget.window = 32000;
    config.budget.generation = 2000;
    config.budget.recency_reserve = 1000;
    config.backoff_seconds = {0.01, 0.01};
    dir.emplace(*util::TempDir::create("kope-agent-test"));
    events = std::move(*EventLog::open(dir->path() / "events.jsonl"));
  }

  OpEnvironment env() {
    OpEnvironment e;
    e.evaluator = &evaluator;
    e.store = &store;
    e.llm = llm.get();
    e.hw = &hw;
    e.prompts = &prompts;
    e.estimator = &estimator;
    e.events = events.get();
    e.run_dir = dir->path();
    e.run_id = run_id;
    e.config = &config;
    e.cancel = &cancel;
    e.known_ops = known_ops;
    return e;
  }

  Result<OpEnd> run(OpState& st) { return run_op(env(), op, st); }

  std::vector<nlohmann::json> all_events() const { return *read_events(dir->path() / "events.jsonl"); }
  std::vector<nlohmann::json> events_of(const std::string& type) const {
    std::vector<nlohmann::json> out;
    for (auto& e : all_events()) {
      if (e.value("type", "") == type) out.push_back(e);
    }
    return out;
  }
  int kernel_calls() const {
    int n = 0;
    for (const auto& c : llm->calls()) n += c.params.purpose != "reflect";
    return n;
  }
  int reflect_calls() const {
    int n = 0;
    for (const auto& c : llm->calls()) n += c.params.purpose == "reflect";
    return n;
  }
};

}  // namespace kope::agent::testing
