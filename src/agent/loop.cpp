#include "agent/loop.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <set>
#include <thread>

#include <fmt/format.h>

#include "agent/answer.h"
#include "agent/judge.h"
#include "agent/reflect.h"
#include "util/fs.h"
#include "util/hash.h"
#include "util/strings.h"

namespace kope::agent {

using nlohmann::json;
namespace fs = std::filesystem;

bool reached_roofline(const Attempt& inc, double target) {
  if (inc.timings.empty()) return inc.fraction_of_roofline && *inc.fraction_of_roofline >= target;
  for (const auto& t : inc.timings) {
    if (!(t.fraction_of_roofline >= target)) return false;
  }
  return true;
}

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

std::string safe_name(std::string_view s) { return op_dir_name(s); }

std::string role_label(llm::Message::Role r) {
  switch (r) {
    case llm::Message::Role::system: return "system";
    case llm::Message::Role::user: return "user";
    case llm::Message::Role::assistant: return "assistant";
  }
  return "?";
}

std::string fmt_x(std::optional<double> v) { return v ? fmt::format("{:.2f}x", *v) : std::string("-"); }

struct Plan {
  memory::Stage stage = memory::Stage::draft;
  std::optional<int> parent_iteration;
};

struct ReplayCandidate {
  memory::CaseRecord source;
  bool native = false;
};

class Loop {
 public:
  Loop(const OpEnvironment& env, const spec::OpSpec& op, OpState& state)
      : m_env(env), m_cfg(*env.config), m_op(op), m_state(state), m_op_dir(safe_name(op.name)) {}

  Result<OpEnd> run();

 private:
  bool cancelled() const { return (m_env.cancel && m_env.cancel->load()) || (m_env.abort && m_env.abort->load()); }
  std::string key(int k) const { return fmt::format("{}/{}/{}", m_env.run_id, m_op.name, k); }
  uint64_t derived_seed(int k, std::string_view salt) const {
    return util::fnv1a64(fmt::format("{}/{}/{}/{}", *m_cfg.seed, m_op.name, k, salt));
  }
  void phase(int k, memory::Stage s, std::string_view what) {
    if (m_env.progress) m_env.progress->phase(m_op.name, k, s, what);
  }
  Status event(json e) {
    e["op"] = m_op.name;
    return m_env.events->append(std::move(e));
  }
  // Files resume depends on (answers, candidate sources) are written atomically and fsynced.
  Result<std::string> write_run_file(const std::string& rel, std::string_view content) {
    fs::path p = m_env.run_dir / rel;
    KOPE_TRY(util::make_dirs(p.parent_path()));
    KOPE_TRY(util::write_file_atomic(p, content));
    return rel;
  }
  // Transcripts are for people: a crash may lose the last one, so they skip the fsyncs.
  Status write_transcript(const std::string& rel, std::string_view content) {
    fs::path p = m_env.run_dir / rel;
    KOPE_TRY(util::make_dirs(p.parent_path()));
    std::FILE* f = std::fopen(p.c_str(), "wb");
    if (!f) return fail(ErrorKind::io, "cannot write {}: {}", p.string(), std::strerror(errno));
    bool ok = std::fwrite(content.data(), 1, content.size(), f) == content.size();
    ok = std::fclose(f) == 0 && ok;
    if (!ok) return fail(ErrorKind::io, "cannot write {} (disk full?)", p.string());
    return {};
  }

  std::optional<std::string> stop_reason() const;
  Plan plan_next() const;
  Result<std::string> reference_source();
  PromptInput prompt_input(const Plan& plan, int k);
  memory::RetrievalQuery query(const Plan& plan) const;

  // Model path: returns the logged "answer" event, or nullopt with m_end set.
  Result<std::optional<json>> call_model(int k, const Plan& plan);
  Result<Attempt> attempt_from_answer(const json& answer);
  Result<std::optional<Attempt>> replay_attempt(int k, const Plan& plan);
  Result<std::vector<ReplayCandidate>> replay_candidates();
  Status evaluate(Attempt& a, const std::string& code, int k);
  // Whether an evaluation would replace the incumbent `inc` (disturbance aside).
  bool would_replace(const eval::EvalResult& r, const Attempt& inc) const;
  void finalize(Attempt& a, const std::optional<memory::CaseRecord>& source);
  std::string journal(const Attempt& a) const;
  Status record(const Attempt& a);
  std::string lang() const { return code_language(m_env.evaluator->backend()); }
  Status reflect(const std::string& rkey, const std::string& trigger, const std::string& summary, const std::string& code,
                 const std::string& outcome,
                 std::optional<int64_t> source_case);
  Status reflect_after(const Attempt& a);
  Status reflect_end();
  Status wait_backoff(double seconds);

  const OpEnvironment& m_env;
  const LoopConfig& m_cfg;
  const spec::OpSpec& m_op;
  OpState& m_state;
  std::string m_op_dir;
  std::optional<std::string> m_reference;
  std::optional<std::string> m_signature_types;
  OpEnd m_end = OpEnd::finished;
  std::string m_end_reason;
};

// --- decisions -------------------------------------------------------------------------------

std::optional<std::string> Loop::stop_reason() const {
  const auto& attempts = m_state.attempts;
  int limit = m_cfg.policy == Policy::replay ? m_cfg.replay_limit : m_cfg.max_iterations;
  if (static_cast<int>(attempts.size()) >= limit) return "iterations";
  if (m_cfg.token_budget > 0 && m_state.tokens_prompt() + m_state.tokens_completion() >= m_cfg.token_budget) {
    return "token_budget";
  }
  if (m_cfg.time_limit_seconds > 0 && m_state.wall_seconds() >= m_cfg.time_limit_seconds) return "time_limit";
  const Attempt* inc = m_state.incumbent();
  if (inc && m_cfg.roofline_target > 0 && reached_roofline(*inc, m_cfg.roofline_target)) return "roofline";
  if (inc && m_cfg.patience > 0 && m_cfg.policy != Policy::replay) {
    int since = static_cast<int>(attempts.size()) - inc->iteration;
    if (since >= m_cfg.patience) return "no_improvement";
  }
  return std::nullopt;
}

Plan Loop::plan_next() const {
  Plan p;
  const auto& attempts = m_state.attempts;
  const Attempt* inc = m_state.incumbent();
  if (!attempts.empty() && !attempts.back().correct()) {
    int repairs = 0;
    for (auto it = attempts.rbegin(); it != attempts.rend() && !it->correct() && it->stage == memory::Stage::repair; ++it) {
      ++repairs;
    }
    if (repairs < m_cfg.max_consecutive_repairs) {
      p.stage = memory::Stage::repair;
      p.parent_iteration = attempts.back().iteration;
      return p;
    }
  }
  if (inc) {
    p.stage = memory::Stage::refine;
    p.parent_iteration = inc->iteration;
  }
  return p;
}

double attempt_reward(const Attempt& a) { return reward_for(a); }

// --- prompt inputs ---------------------------------------------------------------------------

Result<std::string> Loop::reference_source() {
  if (!m_reference) {
    KOPE_ASSIGN(std::string src, util::read_file(m_op.reference_path));
    m_reference = std::move(src);
  }
  return *m_reference;
}

PromptInput Loop::prompt_input(const Plan& plan, int k) {
  PromptInput in;
  in.op = &m_op;
  in.reference_source = m_reference.value_or("");
  HardwareGuide fallback;
  fallback.backend = m_env.evaluator->backend();
  in.hardware = render_hardware(*m_env.hw, m_env.evaluator->toolchain_id(), m_env.guide ? *m_env.guide : fallback);
  in.toolchain = m_env.evaluator->toolchain_id();
  in.stage = plan.stage;
  in.iteration = k;
  in.max_iterations = m_cfg.max_iterations;
  const Attempt* inc = m_state.incumbent();
  if (inc) {
    auto code = util::read_file(m_env.run_dir / inc->code_file);
    in.incumbent = render_incumbent(*inc, code ? *code : std::string("(source unavailable)"), lang());
  }
  if (!m_state.attempts.empty()) {
    const Attempt& last = m_state.attempts.back();
    in.feedback = render_feedback(last, inc, lang());
    if (!last.correct() && last.has_code && plan.stage == memory::Stage::repair) {
      auto code = util::read_file(m_env.run_dir / last.code_file);
      if (code) in.feedback += "The failed attempt's code:\n" + fence_code(cut_at_lines(*code, k_max_code_shown), lang());
    }
    in.tried = render_tried(m_state.attempts);
  }
  return in;
}

memory::RetrievalQuery Loop::query(const Plan& plan) const {
  memory::RetrievalQuery q;
  q.task = task_info(m_op);
  q.target = m_env.evaluator->target().str();
  q.toolchain = m_env.evaluator->toolchain_id();
  q.backend = m_env.evaluator->backend();
  q.stage = plan.stage;
  q.limit = m_cfg.mode == context::Mode::passive ? m_cfg.passive_retrieval_limit : m_cfg.retrieval_limit;
  double balance = m_env.hw->peak_gbps > 0 ? m_env.hw->peak_gflops / m_env.hw->peak_gbps : 0;
  if (balance > 0 && q.task.arithmetic_intensity > 0) q.bottleneck = q.task.arithmetic_intensity < balance ? "memory" : "compute";
  if (plan.stage == memory::Stage::repair && plan.parent_iteration) {
    const Attempt& failed = m_state.attempts[static_cast<size_t>(*plan.parent_iteration - 1)];
    auto id = m_state.case_ids.find(failed.iteration);
    if (id != m_state.case_ids.end()) {
      auto c = m_env.store->get_case(id->second);
      if (c && *c) q.last_error_signature = (*c)->error_signature;
    }
    q.text = failed.verdict + " " + failed.message + " " + util::truncate_text(failed.diagnostics, 600, 8);
  } else if (const Attempt* inc = m_state.incumbent()) {
    q.text = inc->optimisation + " " + m_op.category + " faster";
  } else {
    q.text = m_op.summary;
  }
  if (const Attempt* inc = m_state.incumbent()) {
    auto id = m_state.case_ids.find(inc->iteration);
    if (id != m_state.case_ids.end()) q.incumbent_case = id->second;  // lineage signals
  }
  return q;
}

// --- the model path --------------------------------------------------------------------------

Status Loop::wait_backoff(double seconds) {
  auto until = Clock::now() + std::chrono::duration<double>(seconds);
  while (Clock::now() < until && !cancelled()) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  return {};
}

Result<std::optional<json>> Loop::call_model(int k, const Plan& plan) {
  KOPE_TRY(reference_source());
  phase(k, plan.stage, "retrieving");
  KnowledgeCandidates knowledge;
  if (m_cfg.mode != context::Mode::none) {
    memory::RetrievalQuery q = query(plan);
    KOPE_ASSIGN(auto state_items, m_env.store->retrieve(q));
    memory::RetrievalQuery broad = q;
    broad.task.op.clear();
    broad.task.category.clear();
    broad.limit = std::max(1, q.limit / 2);
    KOPE_ASSIGN(auto broad_items, m_env.store->retrieve(broad));
    std::map<std::string, std::string> categories;
    for (const auto* o : m_env.known_ops) categories[o->name] = o->category;
    // This task's own attempts are in the hot tier already (incumbent, tried-table).
    std::set<std::string> own;
    for (const auto& [iter, id] : m_state.case_ids) own.insert(fmt::format("case:{}", id));
    knowledge = classify_knowledge(state_items, broad_items, m_op, plan.stage, *m_env.prompts, *m_env.estimator,
                                   [&](std::string_view name) -> std::optional<std::string> {
                                     auto it = categories.find(std::string(name));
                                     if (it == categories.end()) return std::nullopt;
                                     return it->second;
                                   },
                                   own);
  } else {
    // `none` admits no memory, so nothing is read from it; the notes are offered and dropped
    // by the same selection as in the other modes.
    knowledge = classify_knowledge({}, {}, m_op, plan.stage, *m_env.prompts, *m_env.estimator,
                                   [](std::string_view) { return std::nullopt; });
  }

  double shrink = 1.0;
  size_t backoffs = 0;
  int shrinks = 0;
  for (;;) {
    if (cancelled()) {
      m_end = OpEnd::cancelled;
      return std::optional<json>{};
    }
    context::Budget budget = m_cfg.budget;
    budget.warm_cap *= shrink;
    budget.cold_cap *= shrink;
    phase(k, plan.stage, "assembling");
    KOPE_ASSIGN(AssembledPrompt prompt, assemble_prompt(*m_env.prompts, prompt_input(plan, k), knowledge, budget, m_cfg.mode,
                                                        *m_env.estimator));
    json items = json::array();
    for (const auto& [id, score] : prompt.memory_items) items.push_back(json::array({id, score}));
    KOPE_TRY(event({{"type", "prompt"},
                    {"iteration", k},
                    {"purpose", std::string(memory::stage_name(plan.stage))},
                    {"mode", std::string(context::mode_name(m_cfg.mode))},
                    {"tier_tokens", prompt.tier_tokens},
                    {"total_tokens", prompt.total_tokens},
                    {"limit", prompt.limit},
                    {"knowledge_budget", prompt.knowledge_budget},
                    {"admitted", prompt.admitted},
                    {"dropped", prompt.dropped},
                    {"hot_truncated", prompt.hot_truncated},
                    {"tokens_per_byte", prompt.tokens_per_byte},
                    {"shrink", shrink}}));
    llm::ChatParams params;
    params.max_output_tokens = static_cast<int>(m_cfg.budget.generation);
    if (m_cfg.seed) params.seed = derived_seed(k, "llm");
    params.purpose = std::string(memory::stage_name(plan.stage));
    phase(k, plan.stage, "waiting for the model");
    auto t0 = Clock::now();
    auto r = m_env.llm->chat(prompt.messages, params);
    double latency = seconds_since(t0);
    std::string text, finish = "stop", provider_problem;
    llm::Usage usage;
    double cost = 0;
    if (r) {
      text = r->text;
      finish = r->finish_reason;
      usage = r->usage;
      cost = r->cost_usd;
      if (!usage.estimated && usage.prompt_tokens > 0) m_env.estimator->calibrate(prompt.total_tokens, usage.prompt_tokens);
    } else {
      const llm::LlmError& err = r.error();
      json ev{{"type", "llm_error"}, {"iteration", k}, {"class", std::string(llm::failure_class_name(err.cls))},
              {"message", err.message}, {"http_status", err.http_status}};
      KOPE_TRY(event(ev));
      switch (err.cls) {
        case llm::FailureClass::context_length:
          if (shrinks < m_cfg.context_shrink_retries) {
            ++shrinks;
            shrink = shrinks >= m_cfg.context_shrink_retries ? 0.0 : shrink * 0.5;
            // The estimate was too low for this model: learn that before rebuilding.
            m_env.estimator->calibrate(prompt.total_tokens, prompt.total_tokens * 5 / 4 + 1);
            continue;
          }
          m_state.errors.push_back("the prompt does not fit the model's window even without memory: " + err.message);
          m_end = OpEnd::llm_unavailable;
          return std::optional<json>{};
        case llm::FailureClass::content_filtered:
        case llm::FailureClass::malformed:
          provider_problem = fmt::format("the provider returned no usable answer ({}: {})",
                                         llm::failure_class_name(err.cls), err.message);
          break;
        case llm::FailureClass::unauthorized:
        case llm::FailureClass::not_found:
        case llm::FailureClass::bad_request:
          return fail(ErrorKind::remote, "the model call failed ({}): {}", llm::failure_class_name(err.cls), err.message);
        case llm::FailureClass::cancelled:
          m_end = OpEnd::cancelled;
          return std::optional<json>{};
        default:
          if (backoffs < m_cfg.backoff_seconds.size()) {
            if (m_env.progress) {
              m_env.progress->note(m_op.name, fmt::format("model unavailable ({}); waiting {:.0f} s",
                                                          llm::failure_class_name(err.cls), m_cfg.backoff_seconds[backoffs]));
            }
            KOPE_TRY(wait_backoff(m_cfg.backoff_seconds[backoffs++]));
            continue;
          }
          m_state.errors.push_back(fmt::format("model unavailable ({}): {}", llm::failure_class_name(err.cls), err.message));
          m_end = OpEnd::llm_unavailable;
          return std::optional<json>{};
      }
    }
    // Keep the answer and the transcript before anything else happens to them.
    std::string answer_rel = fmt::format("candidates/{}/{}.answer.md", m_op_dir, k);
    KOPE_TRY(write_run_file(answer_rel, text));
    std::string transcript;
    for (const auto& m : prompt.messages) transcript += "## " + role_label(m.role) + "\n\n" + m.content + "\n\n";
    transcript += "## assistant\n\n" + (text.empty() ? "(" + provider_problem + ")" : text) + "\n";
    KOPE_TRY(write_transcript(fmt::format("transcripts/{}/{}-{}.md", m_op_dir, k, memory::stage_name(plan.stage)), transcript));
    json answer{{"type", "answer"},
                {"iteration", k},
                {"stage", std::string(memory::stage_name(plan.stage))},
                {"parent_iteration", plan.parent_iteration ? json(*plan.parent_iteration) : json(nullptr)},
                {"prompt_id", key(k)},
                {"tier_tokens", prompt.tier_tokens},
                {"prompt_tokens_estimated", prompt.total_tokens},
                {"knowledge_budget", prompt.knowledge_budget},
                {"memory_items", items},
                {"tokens_prompt", usage.prompt_tokens},
                {"tokens_completion", usage.completion_tokens},
                {"usage_estimated", usage.estimated},
                {"cost_usd", cost},
                {"llm_seconds", latency},
                {"finish_reason", finish},
                {"provider_problem", provider_problem},
                {"answer_file", answer_rel}};
    KOPE_TRY(event(answer));
    return std::optional<json>{answer};
  }
}

bool compared_with_incumbent(const eval::EvalResult& r) {
  return r.incumbent && r.incumbent->decision != eval::IncumbentDecision::unavailable;
}

bool Loop::would_replace(const eval::EvalResult& r, const Attempt& inc) const {
  if (r.verdict != eval::Verdict::correct) return false;
  if (compared_with_incumbent(r)) return r.incumbent->decision == eval::IncumbentDecision::faster;
  Attempt tmp;
  apply_eval_result(tmp, r);
  auto s = relative_speed(inc.timings, tmp.timings);
  return s && *s > 1 + m_cfg.min_improvement;
}

// The evidence a replacement would rest on: the candidate's timings and the comparison, or, without
// a comparison, also the incumbent's recorded timings.
bool disturbed_evidence(const eval::EvalResult& r, const Attempt& inc) {
  if (eval_disturbed(r)) return true;
  return !compared_with_incumbent(r) && eval::contention_disturbed(inc.contention);
}

Status Loop::evaluate(Attempt& a, const std::string& code, int k) {
  a.has_code = true;
  a.code_hash = util::sha256_hex(code);
  KOPE_ASSIGN(a.code_file, write_run_file(fmt::format("candidates/{}/{}.cpp", m_op_dir, k), code));
  eval::EvalOptions opts = m_cfg.eval_options;
  if (m_cfg.seed) opts.seed = derived_seed(k, "eval");
  const Attempt* inc = m_state.incumbent();
  if (inc && m_cfg.fast_verdict && opts.time && inc->has_code) {
    // Fast verdict: the evaluator times the candidate against the incumbent itself.
    if (auto src = util::read_file(m_env.run_dir / inc->code_file)) {
      opts.incumbent_source = std::move(*src);
      opts.incumbent_margin = m_cfg.min_improvement;
    }
  }
  phase(k, a.stage, "evaluating");
  KOPE_ASSIGN(eval::EvalResult r, m_env.evaluator->evaluate(m_op, code, opts));
  if (inc && would_replace(r, *inc) && disturbed_evidence(r, *inc)) {
    // Disturbed evidence alone never replaces the incumbent: time it once more.
    double c = std::max(r.incumbent ? r.incumbent->contention : 0.0, [&] {
      double m = 0;
      for (const auto& t : r.timing) m = std::max(m, t.contention);
      return m;
    }());
    KOPE_TRY(event({{"type", "retime"},
                    {"iteration", k},
                    {"contention", c},
                    {"decision", compared_with_incumbent(r) ? std::string(eval::incumbent_decision_name(r.incumbent->decision))
                                                            : std::string("recorded_timings")},
                    {"reason", fmt::format("the timing that would replace the incumbent was disturbed by other load (waited for a CPU "
                                           "{:.0f}% of the time); evaluating once more",
                                           100 * c)}}));
    if (m_cfg.seed) opts.seed = derived_seed(k, "eval-retime");
    phase(k, a.stage, "re-timing (disturbed)");
    KOPE_ASSIGN(eval::EvalResult again, m_env.evaluator->evaluate(m_op, code, opts));
    r = std::move(again);
    a.retimed = true;
  }
  apply_eval_result(a, r);
  a.evidence_disturbed = inc && r.verdict == eval::Verdict::correct && disturbed_evidence(r, *inc);
  return {};
}

Result<Attempt> Loop::attempt_from_answer(const json& ans) {
  Attempt a;
  a.iteration = ans.at("iteration").get<int>();
  a.stage = memory::parse_stage(ans.value("stage", "draft")).value_or(memory::Stage::draft);
  if (!ans.at("parent_iteration").is_null()) a.parent_iteration = ans.at("parent_iteration").get<int>();
  a.prompt_id = ans.value("prompt_id", "");
  a.tier_tokens = ans.value("tier_tokens", std::map<std::string, int64_t>{});
  a.prompt_tokens_estimated = ans.value("prompt_tokens_estimated", int64_t{0});
  a.knowledge_budget = ans.value("knowledge_budget", int64_t{0});
  for (const auto& it : ans.value("memory_items", json::array())) {
    a.memory_items.emplace_back(it.at(0).get<std::string>(), it.at(1).get<double>());
  }
  a.tokens_prompt = ans.value("tokens_prompt", int64_t{0});
  a.tokens_completion = ans.value("tokens_completion", int64_t{0});
  a.cost_usd = ans.value("cost_usd", 0.0);
  a.llm_seconds = ans.value("llm_seconds", 0.0);
  KOPE_ASSIGN(std::string text, util::read_file(m_env.run_dir / ans.at("answer_file").get<std::string>()));
  ParsedAnswer parsed = parse_answer(text);
  a.optimisation = parsed.optimisation;
  a.header_found = parsed.header_found;
  if (parsed.has_code) {
    KOPE_TRY(evaluate(a, parsed.code, a.iteration));
  } else {
    std::string why = ans.value("provider_problem", "");
    if (why.empty()) why = parsed.problem;
    if (ans.value("finish_reason", "") == "length") why += " (the answer hit the output-token limit)";
    a.verdict = std::string(eval::verdict_name(eval::Verdict::compile_error));
    a.message = why == k_no_code_message ? why : std::string(k_no_code_message) + ": " + why;
    a.diagnostics = text.empty() ? "" : "The answer began:\n" + cut_at_lines(text, 600, 12);
  }
  return a;
}

// --- replay ----------------------------------------------------------------------------------

Result<std::vector<ReplayCandidate>> Loop::replay_candidates() {
  std::string types = signature_types(spec::render_signature(m_op));
  std::string here = m_env.evaluator->target().str();
  std::string toolchain = m_env.evaluator->toolchain_id();
  std::set<std::string> tried, failed_here;
  for (const auto& a : m_state.attempts) tried.insert(a.code_hash);
  std::map<std::string, ReplayCandidate> by_code;
  auto consider = [&](const memory::CaseRecord& c) {
    if (c.verdict != "correct" || c.quarantined || c.code.empty() || c.run_id == m_env.run_id) return;
    // A kernel in another backend's language (C++ on OpenCL) cannot be replayed here.
    if (!c.toolchain.backend.empty() && c.toolchain.backend != m_env.evaluator->backend()) return;
    if (signature_types(c.task.signature) != types) return;
    std::string h = util::sha256_hex(c.code);
    if (tried.contains(h) || failed_here.contains(h)) return;
    ReplayCandidate cand{c, c.hardware.target == here && c.toolchain.id == toolchain};
    auto it = by_code.find(h);
    // Prefer the native record of a kernel, then the faster one.
    if (it == by_code.end() || (cand.native && !it->second.native) ||
        (cand.native == it->second.native &&
         cand.source.speedup_vs_reference.value_or(0) > it->second.source.speedup_vs_reference.value_or(0))) {
      by_code[h] = cand;
    }
  };
  int per_op = std::max(3, m_cfg.replay_limit * 2);
  // Code that already failed for this op here, on this target and toolchain, is not tried again
  // (a timeout may be the machine's load and is retried).
  memory::CaseFilter mine;
  mine.op = m_op.name;
  mine.target = here;
  mine.toolchain = toolchain;
  mine.foreign_origin = false;
  mine.limit = 1000;
  auto native = m_env.store->cases(mine);
  if (!native && native.error().kind != ErrorKind::unavailable) return std::unexpected(std::move(native).error());
  if (native) {
    for (const auto& c : *native) {
      if (c.verdict != "correct" && c.verdict != "timeout" && !c.code_hash.empty()) failed_here.insert(c.code_hash);
    }
  }
  KOPE_ASSIGN(auto own, m_env.store->best_cases(m_op.name, "", per_op));
  for (const auto& c : own) consider(c);
  // Kernels of this op imported as foreign (the starter experience, another machine's export)
  // are never best cases, but they may be replayed: the replay re-verifies and re-times them
  // here, and only that native record is evidence. (A foreign kernel of another op is not
  // tried: it is neither evidence nor likely to compute this op.)
  memory::CaseFilter f;
  f.op = m_op.name;
  f.verdict = "correct";
  f.foreign_origin = true;
  f.quarantined = false;
  f.with_code = true;
  f.limit = per_op * 4;
  auto foreign = m_env.store->cases(f);
  if (!foreign && foreign.error().kind != ErrorKind::unavailable) return std::unexpected(std::move(foreign).error());
  if (foreign) {
    for (const auto& c : *foreign) consider(c);
  }
  std::set<std::string> related;
  for (const auto* o : m_env.known_ops) {
    if (o->name != m_op.name && signature_types(spec::render_signature(*o)) == types) related.insert(o->name);
  }
  // Best kernels the memory associates with this op (other ops with the same ABI, other machines).
  memory::RetrievalQuery q;
  q.task = task_info(m_op);
  q.target = here;
  q.toolchain = toolchain;
  q.backend = m_env.evaluator->backend();
  q.limit = 40;
  KOPE_ASSIGN(auto items, m_env.store->retrieve(q));
  for (const auto& it : items) {
    if (it.kind != memory::RetrievedItem::Kind::best_kernel || !it.id.starts_with("case:")) continue;
    if (!it.op.empty() && it.op != m_op.name) related.insert(it.op);
  }
  for (const auto& name : related) {
    KOPE_ASSIGN(auto cases, m_env.store->best_cases(name, "", per_op));
    for (const auto& c : cases) consider(c);
  }
  std::vector<ReplayCandidate> out;
  for (auto& [h, c] : by_code) out.push_back(std::move(c));
  std::stable_sort(out.begin(), out.end(), [&](const ReplayCandidate& a, const ReplayCandidate& b) {
    bool a_same = a.source.task.op == m_op.name, b_same = b.source.task.op == m_op.name;
    if (a.native != b.native) return a.native;
    if (a_same != b_same) return a_same;
    double sa = a.source.speedup_vs_reference.value_or(0), sb = b.source.speedup_vs_reference.value_or(0);
    if (sa != sb) return sa > sb;
    return a.source.id < b.source.id;
  });
  return out;
}

Result<std::optional<Attempt>> Loop::replay_attempt(int k, const Plan& plan) {
  KOPE_ASSIGN(auto candidates, replay_candidates());
  if (candidates.empty()) return std::optional<Attempt>{};
  const memory::CaseRecord& src = candidates.front().source;
  Attempt a;
  a.iteration = k;
  a.policy = Policy::replay;
  a.stage = plan.stage;
  a.parent_case_id = src.id;
  a.source_case_id = src.id;
  a.header_found = true;
  a.optimisation = fmt::format("replay of case {} ({} on {}): {}", src.id, src.task.op, src.hardware.target, src.optimisation);
  if (a.optimisation.size() > 200) a.optimisation = a.optimisation.substr(0, 197) + "...";
  KOPE_TRY(evaluate(a, src.code, k));
  finalize(a, src);
  return std::optional<Attempt>{std::move(a)};
}

// --- bookkeeping -----------------------------------------------------------------------------

void Loop::finalize(Attempt& a, const std::optional<memory::CaseRecord>& source) {
  const Attempt* inc = m_state.incumbent();
  const Attempt* parent = a.parent_iteration ? &m_state.attempts[static_cast<size_t>(*a.parent_iteration - 1)] : nullptr;
  if (parent && !a.parent_case_id) {
    auto id = m_state.case_ids.find(parent->iteration);
    if (id != m_state.case_ids.end()) a.parent_case_id = id->second;
  }
  std::optional<double> r;
  bool compared = !a.decision.empty() && a.decision != "recorded_timings";
  if (a.correct()) {
    if (inc) {
      bool faster = false;
      if (compared) {
        // The evaluator's interleaved comparison decided (speedup_vs_incumbent is its ratio).
        faster = a.decision == eval::incumbent_decision_name(eval::IncumbentDecision::faster);
      } else {
        a.decision = "recorded_timings";
        a.speedup_vs_incumbent = relative_speed(inc->timings, a.timings);
        faster = a.speedup_vs_incumbent && *a.speedup_vs_incumbent > 1 + m_cfg.min_improvement;
      }
      // With a decision already made at the stated error rate, the disturbance's threat is a
      // bias of the estimate: the estimate itself must clear the margin.
      std::optional<double> lower = a.speedup_vs_incumbent;
      if (faster && a.evidence_disturbed) {
        // Still disturbed after re-timing: only a margin beyond the disturbance of the evidence
        // the decision rests on (the comparison's pairs; without one, both recorded timings).
        double c = std::clamp(compared ? a.decision_contention : std::max(a.contention, inc->contention), 0.0, 0.9);
        a.margin_demanded = (1 + m_cfg.min_improvement) / (1 - c);
        faster = lower && *lower > *a.margin_demanded;
      }
      a.improved = faster;
    } else {
      a.improved = true;
    }
    if (parent && parent == inc && compared && a.speedup_vs_incumbent) {
      r = a.speedup_vs_incumbent;  // measured side by side with the parent
    } else if (parent && parent->correct() && !parent->timings.empty()) {
      r = relative_speed(parent->timings, a.timings);
    } else if (source && source->speedup_vs_reference && *source->speedup_vs_reference > 0 && a.speedup_vs_reference) {
      r = *a.speedup_vs_reference / *source->speedup_vs_reference;
    } else {
      r = a.speedup_vs_reference;  // a root, or a parent that was not correct: the reference
    }
    if (!r) r = 1.0;  // correct but untimed: as good as its baseline
    a.speedup_vs_parent = r;
    a.label = std::string(memory::outcome_name(memory::outcome_for_ratio(*r)));
  } else {
    a.label = std::string(memory::outcome_name(memory::Outcome::negative));
  }
  if (!m_state.attempts.empty() && a.correct() && !m_state.attempts.back().correct()) {
    const Attempt& prev = m_state.attempts.back();
    a.notable = true;
    a.notable_reason = fmt::format("attempt {} is correct after attempt {} failed ({}: {})", a.iteration, prev.iteration,
                                   prev.verdict, util::truncate_text(prev.message, 160, 1));
  } else if (a.improved && inc && r && *r >= m_cfg.notable_speedup) {
    a.notable = true;
    a.notable_reason = fmt::format("attempt {} is {:.2f}x faster than the kernel it began from", a.iteration, *r);
  }
  a.journal = journal(a);
}

// How the incumbent decision was reached, for the journal.
std::string decision_note(const Attempt& a) {
  std::string out;
  if (a.decision == "recorded_timings") {
    out = fmt::format("compared with the incumbent's recorded timings ({}).", fmt_x(a.speedup_vs_incumbent));
  } else {
    out = fmt::format("timed against the incumbent in alternating batches: {}, {} (interval [{}, {}], {} pairs of batches){}.",
                      a.decision, fmt_x(a.speedup_vs_incumbent), a.decision_lower ? fmt::format("{:.3f}", *a.decision_lower) : "0",
                      a.decision_upper ? fmt::format("{:.3f}", *a.decision_upper) : "inf", a.decision_pairs,
                      a.early_figures ? "; the timings above are the comparison's early figures, not timed to the full CI" : "");
  }
  if (a.retimed) out += " The first timing was disturbed by other load, so it was timed once more.";
  if (a.evidence_disturbed) {
    out += fmt::format(" The evidence was disturbed (waited for a CPU {:.0f}% of the time)", 100 * a.contention);
    if (a.margin_demanded) {
      out += fmt::format(": replacing the incumbent needed a speedup above {:.3f}x, {}", *a.margin_demanded,
                         a.improved ? "which it had" : "which it did not have, so the incumbent stays");
    }
    out += ".";
  }
  return out;
}

std::string Loop::journal(const Attempt& a) const {
  std::string from;
  if (a.policy == Policy::replay) {
    from = fmt::format("a replay of memory case {} (re-verified and re-timed here)", a.source_case_id.value_or(0));
  } else if (!a.parent_iteration) {
    from = "a fresh draft";
  } else {
    const Attempt& p = m_state.attempts[static_cast<size_t>(*a.parent_iteration - 1)];
    from = a.stage == memory::Stage::repair
               ? fmt::format("a repair of attempt {} ({})", p.iteration, p.verdict)
               : fmt::format("a refinement of the incumbent, attempt {} ({})", p.iteration, fmt_x(p.speedup_vs_reference));
  }
  std::string out = fmt::format("Strategy: {} attempt {} on {} ({}), {}.\n", memory::stage_name(a.stage), a.iteration,
                                m_op.name, m_op.category, from);
  out += fmt::format("Change: {}\n", a.optimisation);
  out += fmt::format("Status: {}{}{}\n", a.verdict, a.message.empty() ? "" : " — ", util::truncate_text(a.message, 300, 2));
  if (!a.first_mismatch.empty()) out += "First mismatch: " + a.first_mismatch + "\n";
  if (a.correct()) {
    out += fmt::format("Numbers: {} vs reference, {} vs library{}, {} vs parent", fmt_x(a.speedup_vs_reference),
                       fmt_x(a.speedup_vs_library),
                       a.library_config && a.speedup_vs_library ? a.library_config->forced_note() : std::string(),
                       fmt_x(a.speedup_vs_parent));
    if (a.fraction_of_roofline) out += fmt::format(", {:.0f}% of the roofline", 100 * *a.fraction_of_roofline);
    out += fmt::format("; label {}.", a.label);
    for (const auto& t : a.timings) {
      if (t.disturbed) {
        out += fmt::format(" {}: {:.2f} us (reference {:.2f} us; timed under outside load, the kernel waited for a CPU {:.0f}% of "
                           "the time).", t.label, t.median_us, t.reference_us, 100 * t.contention);
      } else {
        out += fmt::format(" {}: {:.2f} us (reference {:.2f} us).", t.label, t.median_us, t.reference_us);
      }
    }
    out += "\n";
  } else if (a.cases_total > 0) {
    out += fmt::format("Numbers: {} of {} cases passed; label {}.\n", a.cases_passed, a.cases_total, a.label);
  }
  if (a.correct() && !a.decision.empty()) out += "Decision: " + decision_note(a) + "\n";
  std::string reading;
  if (a.correct()) {
    reading = a.improved ? (a.speedup_vs_incumbent ? fmt::format("new incumbent, {} faster than the previous one",
                                                                 fmt_x(a.speedup_vs_incumbent))
                                                   : "first correct kernel: the incumbent")
                         : fmt::format("correct but not faster than the incumbent ({}); the incumbent stays",
                                       fmt_x(a.speedup_vs_incumbent));
  } else if (!a.has_code) {
    reading = "the answer held no usable code";
  } else if (a.verdict == "compile_error") {
    reading = "the compiler rejected it";
  } else if (a.verdict == "wrong_result") {
    reading = "it computes something else than the reference";
  } else if (a.verdict == "rejected") {
    reading = "it broke a kernel rule";
  } else {
    reading = "it failed at run time";
  }
  out += "Reading: " + reading + ".\n";
  return out;
}

Status Loop::record(const Attempt& a) {
  memory::CaseRecord c;
  c.natural_key = key(a.iteration);
  c.run_id = m_env.run_id;
  c.task = task_info(m_op);
  c.hardware = {m_env.evaluator->target().str(), m_env.hw->cpu_model, m_env.hw->cores, m_env.hw->peak_gflops,
                m_env.hw->peak_gbps};
  c.toolchain = {m_env.evaluator->toolchain_id(), m_env.evaluator->backend()};
  c.parent_id = a.parent_case_id;
  c.stage = a.stage;
  c.optimisation = a.optimisation;
  if (a.has_code) {
    KOPE_ASSIGN(c.code, util::read_file(m_env.run_dir / a.code_file));
  }
  c.verdict = a.verdict;
  c.message = a.message;
  c.diagnostics = a.diagnostics;
  for (const auto& t : a.timings) {
    c.timings.push_back({t.case_index, t.median_us, t.ci95_us, t.reference_us, t.library_us, t.disturbed, t.contention,
                         t.floor_us > 0 ? std::optional<double>(t.floor_us) : std::nullopt});
  }
  c.speedup_vs_parent = a.speedup_vs_parent;
  c.speedup_vs_reference = a.speedup_vs_reference;
  c.speedup_vs_library = a.speedup_vs_library;
  c.fraction_of_roofline = a.fraction_of_roofline;
  c.outcome = a.correct() ? memory::outcome_for_ratio(a.speedup_vs_parent.value_or(1.0)) : memory::Outcome::negative;
  c.tokens_prompt = a.tokens_prompt;
  c.tokens_completion = a.tokens_completion;
  c.wall_seconds = a.wall_seconds;
  c.journal = a.journal;
  KOPE_ASSIGN(int64_t id, m_env.store->record_case(c));
  m_state.case_ids[a.iteration] = id;
  if (a.policy == Policy::llm && !a.prompt_id.empty()) {
    memory::RetrievalLogEntry entry;
    entry.prompt_id = a.prompt_id;
    entry.case_id = id;
    entry.stage = a.stage;
    entry.items = a.memory_items;
    entry.tier_tokens = a.tier_tokens;
    KOPE_TRY(m_env.store->log_retrieval(entry));
    KOPE_TRY(m_env.store->credit(a.prompt_id, attempt_reward(a)));
  }
  return event({{"type", "recorded"}, {"iteration", a.iteration}, {"case_id", id}});
}

// --- reflection ------------------------------------------------------------------------------

Status Loop::reflect(const std::string& rkey, const std::string& trigger, const std::string& summary, const std::string& code,
                     const std::string& outcome, std::optional<int64_t> source_case) {
  if (!m_cfg.reflect || !m_env.llm) return {};
  auto found = m_state.reflections.find(rkey);
  if (found != m_state.reflections.end() && found->second.applied) return {};
  if (found == m_state.reflections.end()) {
    if (cancelled()) return {};
    ReflectionInput in;
    in.op = &m_op;
    in.backend = m_env.evaluator->backend();
    in.target = m_env.evaluator->target().str();
    in.trigger = trigger;
    in.summary = summary;
    in.tried = render_tried(m_state.attempts);
    in.code = code;
    in.outcome = outcome;
    LessonContext ctx;
    ctx.category = m_op.category;
    ctx.backend = in.backend;
    ctx.target = in.target;
    ctx.toolchain = m_env.evaluator->toolchain_id();
    ctx.source_case = source_case;
    ctx.reason = fmt::format("reflection on {} ({}) in run {}", m_op.name, trigger, m_env.run_id);
    in.memory = m_cfg.mode != context::Mode::none;
    if (in.memory) {
      // Every active lesson in the op's scope is listed by id; the ones retrieval ranks first
      // (then the most helpful) are shown whole, so that they can be voted on and edited.
      KOPE_ASSIGN(auto in_scope, m_env.store->lessons({ctx.category, ctx.backend, ctx.target, ctx.toolchain}));
      memory::RetrievalQuery q = query(plan_next());
      q.limit = 30;
      KOPE_ASSIGN(auto items, m_env.store->retrieve(q));
      std::vector<memory::Lesson> ordered;
      std::set<std::string> placed;
      for (const auto& it : items) {
        if (it.kind != memory::RetrievedItem::Kind::lesson || !it.id.starts_with("lesson:")) continue;
        std::string id = it.id.substr(7);
        auto l = std::find_if(in_scope.begin(), in_scope.end(), [&](const memory::Lesson& x) { return x.id == id; });
        if (l != in_scope.end() && placed.insert(id).second) ordered.push_back(*l);
      }
      for (const auto& l : in_scope) {
        if (placed.insert(l.id).second) ordered.push_back(l);
      }
      std::set<std::string> editable;
      in.existing = render_lessons_in_scope(ordered, k_lessons_shown_whole, &ctx.known_ids, &editable);
      ctx.editable_ids = std::move(editable);
    }
    KOPE_ASSIGN(auto messages, build_reflection_prompt(*m_env.prompts, in));
    const context::TokenEstimator est = m_env.estimator->snapshot();
    int64_t estimated = 0;
    for (const auto& m : messages) estimated += est.estimate(m.content);
    int64_t system_tokens = est.estimate(messages[0].content);
    KOPE_TRY(event({{"type", "prompt"}, {"purpose", "reflect"}, {"key", rkey}, {"total_tokens", estimated},
                    {"tokens_per_byte", est.ratio()},
                    {"tier_tokens", {{"system", system_tokens}, {"hot", estimated - system_tokens}, {"warm", 0}, {"cold", 0}}}}));
    llm::ChatParams params;
    params.max_output_tokens = static_cast<int>(std::min<int64_t>(1500, m_cfg.budget.generation));
    if (m_cfg.seed) params.seed = derived_seed(static_cast<int>(m_state.attempts.size()), "reflect-" + rkey);
    params.purpose = "reflect";
    if (m_env.progress) m_env.progress->phase(m_op.name, static_cast<int>(m_state.attempts.size()), memory::Stage::refine, "reflecting");
    auto r = m_env.llm->chat(messages, params);
    if (!r) {
      // A reflection is an extra; its failure never stops the op.
      return event({{"type", "reflection_failed"}, {"key", rkey},
                    {"class", std::string(llm::failure_class_name(r.error().cls))}, {"message", r.error().message}});
    }
    if (!r->usage.estimated && r->usage.prompt_tokens > 0) m_env.estimator->calibrate(estimated, r->usage.prompt_tokens);
    std::string transcript;
    for (const auto& m : messages) transcript += "## " + role_label(m.role) + "\n\n" + m.content + "\n\n";
    transcript += "## assistant\n\n" + r->text + "\n";
    KOPE_TRY(write_transcript(fmt::format("transcripts/{}/reflect-{}.md", m_op_dir, rkey), transcript));
    ParsedLessons parsed = parse_lessons(r->text, ctx);
    ReflectionRecord rec;
    rec.key = rkey;
    rec.deltas = parsed.deltas;
    rec.tokens_prompt = r->usage.prompt_tokens;
    rec.tokens_completion = r->usage.completion_tokens;
    rec.cost_usd = r->cost_usd;
    json deltas = json::array();
    for (const auto& d : parsed.deltas) deltas.push_back(delta_to_json(d));
    KOPE_TRY(event({{"type", "reflection"},
                    {"key", rkey},
                    {"trigger", trigger},
                    {"deltas", deltas},
                    {"problems", parsed.problems},
                    {"parsed", parsed.parsed},
                    {"tokens_prompt", rec.tokens_prompt},
                    {"tokens_completion", rec.tokens_completion},
                    {"cost_usd", rec.cost_usd}}));
    found = m_state.reflections.emplace(rkey, std::move(rec)).first;
  }
  // Apply; an add that is already there (a crash between applying and logging) is not repeated.
  ReflectionRecord& rec = found->second;
  rec.lesson_ids.clear();
  std::vector<std::string> problems;
  for (const auto& d : rec.deltas) {
    if (d.op == memory::LessonDelta::Op::add) {
      KOPE_ASSIGN(auto existing, m_env.store->lessons(d.lesson.scope));
      auto same = std::find_if(existing.begin(), existing.end(), [&](const memory::Lesson& l) {
        return l.title == d.lesson.title && l.text == d.lesson.text;
      });
      if (same != existing.end()) {
        rec.lesson_ids.push_back(same->id);
        continue;
      }
    }
    auto id = m_env.store->apply(d);
    if (id) {
      rec.lesson_ids.push_back(*id);
    } else {
      problems.push_back(id.error().message);
    }
  }
  rec.applied = true;
  return event({{"type", "reflection_applied"}, {"key", rkey}, {"lesson_ids", rec.lesson_ids}, {"problems", problems}});
}

Status Loop::reflect_after(const Attempt& a) {
  if (!a.notable) return {};
  std::string code;
  auto read = [&](const Attempt& x) -> std::string {
    if (!x.has_code) return "";
    auto src = util::read_file(m_env.run_dir / x.code_file);
    return src ? cut_at_lines(*src, k_max_code_shown) : "";
  };
  std::string summary = a.journal;
  if (a.iteration >= 2) {
    const Attempt& prev = m_state.attempts[static_cast<size_t>(a.iteration - 2)];
    if (!prev.correct()) {
      summary = fmt::format("Attempt {} failed:\n{}\nThen attempt {}:\n{}", prev.iteration, prev.journal, a.iteration, a.journal);
      std::string before = read(prev);
      if (!before.empty()) code += fmt::format("Attempt {} (failed):\n{}", prev.iteration, fence_code(before, lang()));
    } else if (a.parent_iteration) {
      const Attempt& parent = m_state.attempts[static_cast<size_t>(*a.parent_iteration - 1)];
      std::string before = read(parent);
      if (!before.empty()) code += fmt::format("Attempt {} (the parent):\n{}", parent.iteration, fence_code(before, lang()));
    }
  }
  code += fmt::format("Attempt {}:\n{}", a.iteration, fence_code(read(a), lang()));
  auto id = m_state.case_ids.find(a.iteration);
  return reflect(fmt::format("k{}", a.iteration), a.notable_reason, summary, code, render_feedback(a, m_state.incumbent(), lang()),
                 id == m_state.case_ids.end() ? std::nullopt : std::optional<int64_t>(id->second));
}

Status Loop::reflect_end() {
  if (m_state.attempts.empty()) return {};
  const Attempt* inc = m_state.incumbent();
  std::string summary = fmt::format("The task on {} ended after {} attempts (stop: {}). ", m_op.name, m_state.attempts.size(),
                                    m_end_reason);
  std::string code;
  std::optional<int64_t> source;
  if (inc) {
    summary += fmt::format("Best kernel: attempt {} — {} — {} vs reference{}.", inc->iteration, inc->optimisation,
                           fmt_x(inc->speedup_vs_reference),
                           inc->fraction_of_roofline ? fmt::format(", {:.0f}% of the roofline", 100 * *inc->fraction_of_roofline)
                                                     : std::string());
    auto src = util::read_file(m_env.run_dir / inc->code_file);
    if (src) code = "The best kernel:\n" + fence_code(cut_at_lines(*src, k_max_code_shown), lang());
    auto id = m_state.case_ids.find(inc->iteration);
    if (id != m_state.case_ids.end()) source = id->second;
  } else {
    summary += "No attempt produced a correct kernel.";
    auto id = m_state.case_ids.find(m_state.attempts.back().iteration);
    if (id != m_state.case_ids.end()) source = id->second;
  }
  // The numbers the lessons rest on: the last attempt's outcome with its per-case timings (the
  // task ended before a next prompt would have shown them) and the best kernel's.
  const Attempt& last = m_state.attempts.back();
  std::string outcome = render_feedback(last, inc, lang());
  if (inc && inc->iteration != last.iteration && !inc->timings.empty()) {
    outcome += fmt::format("\nThe best kernel (attempt {}) per timed case:\n{}", inc->iteration, render_timings(*inc));
  }
  return reflect("end", "the task ended", summary, code, outcome, source);
}

// --- the loop --------------------------------------------------------------------------------

Result<OpEnd> Loop::run() {
  if (!m_state.started) {
    KOPE_TRY(event({{"type", "op_started"}, {"policy", std::string(run::policy_name(m_cfg.policy))}, {"mode", std::string(context::mode_name(m_cfg.mode))}}));
    m_state.started = true;
  }
  if (m_env.progress) m_env.progress->op_started(m_op.name);
  // Finish what a killed run left half done: memory writes, then logged reflections.
  for (const auto& a : m_state.attempts) {
    if (!m_state.case_ids.contains(a.iteration)) KOPE_TRY(record(a));
  }
  for (auto& [rkey, rec] : m_state.reflections) {
    if (!rec.applied) KOPE_TRY(reflect(rkey, "", "", "", "", std::nullopt));
  }
  if (!m_state.attempts.empty() && m_cfg.policy == Policy::llm) KOPE_TRY(reflect_after(m_state.attempts.back()));

  for (;;) {
    if (cancelled()) {
      m_end = OpEnd::cancelled;
      break;
    }
    if (auto reason = stop_reason()) {
      m_end_reason = *reason;
      break;
    }
    int k = static_cast<int>(m_state.attempts.size()) + 1;
    Plan plan = plan_next();
    auto t0 = Clock::now();
    Attempt a;
    if (m_cfg.policy == Policy::replay) {
      KOPE_ASSIGN(auto replayed, replay_attempt(k, plan));
      if (!replayed) {
        m_end_reason = "replay_exhausted";
        break;
      }
      a = std::move(*replayed);
    } else {
      json answer;
      if (m_state.pending && m_state.pending->iteration == k) {
        answer = to_json(*m_state.pending);  // answered before the run died: not asked again
      } else {
        KOPE_ASSIGN(auto got, call_model(k, plan));
        if (!got) break;  // m_end says why
        answer = std::move(*got);
      }
      KOPE_ASSIGN(a, attempt_from_answer(answer));
      a.parent_iteration = plan.parent_iteration;
      a.stage = plan.stage;
      finalize(a, std::nullopt);
    }
    a.wall_seconds = seconds_since(t0) + a.llm_seconds * (m_state.pending ? 1 : 0);
    m_state.pending.reset();
    KOPE_TRY(event({{"type", "attempt"}, {"attempt", to_json(a)}}));
    m_state.attempts.push_back(a);
    KOPE_TRY(record(m_state.attempts.back()));
    if (m_env.progress) {
      const Attempt* inc = m_state.incumbent();
      m_env.progress->attempt_done(m_op.name, a, inc ? inc->speedup_vs_reference.value_or(0) : 0,
                                   m_state.tokens_prompt() + m_state.tokens_completion());
    }
    if (m_cfg.policy == Policy::llm) KOPE_TRY(reflect_after(m_state.attempts.back()));
  }
  if (m_end != OpEnd::finished) {
    KOPE_TRY(event({{"type", "op_stopped"},
                    {"reason", m_end == OpEnd::cancelled ? "cancelled" : "llm_unavailable"},
                    {"errors", m_state.errors}}));
    if (m_env.progress) m_env.progress->op_finished(m_op.name, m_end == OpEnd::cancelled ? "cancelled" : "llm_unavailable");
    return m_end;
  }
  if (m_cfg.policy == Policy::llm) KOPE_TRY(reflect_end());
  const Attempt* inc = m_state.incumbent();
  m_state.done = true;
  m_state.stop_reason = m_end_reason;
  KOPE_TRY(event({{"type", "op_done"},
                  {"stop_reason", m_end_reason},
                  {"attempts", m_state.attempts.size()},
                  {"solved", inc != nullptr},
                  {"best_iteration", inc ? json(inc->iteration) : json(nullptr)}}));
  if (m_env.progress) m_env.progress->op_finished(m_op.name, m_end_reason);
  return OpEnd::finished;
}

}  // namespace

// --- public helpers --------------------------------------------------------------------------

Result<OpEnd> run_op(const OpEnvironment& env, const spec::OpSpec& op, OpState& state) {
  if (!env.evaluator || !env.store || !env.hw || !env.prompts || !env.estimator || !env.events || !env.config) {
    return fail(ErrorKind::internal, "run_op: incomplete environment");
  }
  if (env.config->policy == Policy::llm && !env.llm) return fail(ErrorKind::internal, "run_op: the llm policy needs a model client");
  if (state.done) return OpEnd::finished;
  Loop loop(env, op, state);
  return loop.run();
}

std::string signature_types(std::string_view sig) {
  size_t open = sig.find('('), close = sig.rfind(')');
  if (open == std::string_view::npos || close == std::string_view::npos || close < open) return "";
  std::vector<std::string> types;
  for (auto& p : util::split(sig.substr(open + 1, close - open - 1), ',')) {
    std::string param(util::trim(p));
    // Drop the trailing identifier: the last run of [A-Za-z0-9_] after a space or '*'.
    size_t end = param.size();
    size_t b = end;
    while (b > 0 && (std::isalnum(static_cast<unsigned char>(param[b - 1])) || param[b - 1] == '_')) --b;
    std::string type = b > 0 ? std::string(util::trim(std::string_view(param).substr(0, b))) : param;
    std::string compact;
    for (char c : type) {
      if (c == ' ' && !compact.empty() && (compact.back() == ' ' || compact.back() == '*')) continue;
      compact += c;
    }
    types.push_back(util::replace_all(compact, " *", "*"));
  }
  return util::join(types, ",");
}

memory::TaskInfo task_info(const spec::OpSpec& op) {
  memory::TaskInfo t;
  t.op = op.name;
  t.spec_hash = op.spec_hash;
  t.category = op.category;
  t.level = op.level;
  t.signature = spec::render_signature(op);
  json dims = json::array();
  const spec::Case* largest = nullptr;
  for (const auto* c : op.timed_cases()) {
    json d = json::object();
    for (size_t i = 0; i < op.dims.size(); ++i) d[op.dims[i]] = c->dims[i];
    dims.push_back(d);
    if (!largest || op.bytes_for(*c) > op.bytes_for(*largest)) largest = c;
  }
  t.timed_dims = dims.dump();
  if (largest) {
    double f = op.flops_for(*largest), b = op.bytes_for(*largest);
    t.arithmetic_intensity = b > 0 ? f / b : 0;
    t.log2_flops = f > 0 ? std::log2(f) : 0;
    t.log2_bytes = b > 0 ? std::log2(b) : 0;
  }
  return t;
}

double reward_for(const Attempt& a) {
  return memory::stage_reward(a.stage, a.verdict, a.correct() ? a.speedup_vs_parent.value_or(1.0) : 0.0);
}

std::string op_dir_name(std::string_view op) {
  std::string out;
  for (char c : op) out += (std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.') ? c : '_';
  return out.empty() ? "op" : out;
}

}  // namespace kope::agent
