#include "agent/reflector.h"

#include <algorithm>
#include <set>
#include <vector>

#include <fmt/format.h>

#include "agent/model_turn.h"
#include "agent/plan.h"
#include "agent/prompt.h"
#include "agent/recorder.h"
#include "agent/retrieval.h"

namespace kope::agent {

using nlohmann::json;

std::string Reflector::shown_code(const Attempt& a) {
  auto src = m_ctx.code_of(a);
  return src ? cut_at_lines(*src, k_max_code_shown) : "";
}

Status Reflector::after(const Attempt& a) {
  if (!a.notable) return {};
  Subject s;
  s.trigger = a.notable_reason;
  s.summary = a.journal;
  if (a.iteration >= 2) {
    const Attempt& prev = m_ctx.attempt(a.iteration - 1);
    if (!prev.correct()) {
      s.summary = fmt::format("Attempt {} failed:\n{}\nThen attempt {}:\n{}", prev.iteration, prev.journal, a.iteration, a.journal);
      std::string before = shown_code(prev);
      if (!before.empty()) s.code += fmt::format("Attempt {} (failed):\n{}", prev.iteration, fence_code(before, m_ctx.lang()));
    } else if (a.parent_iteration) {
      const Attempt& parent = m_ctx.attempt(*a.parent_iteration);
      std::string before = shown_code(parent);
      if (!before.empty()) s.code += fmt::format("Attempt {} (the parent):\n{}", parent.iteration, fence_code(before, m_ctx.lang()));
    }
  }
  s.code += fmt::format("Attempt {}:\n{}", a.iteration, fence_code(shown_code(a), m_ctx.lang()));
  s.outcome = render_feedback(a, m_ctx.state.incumbent(), m_ctx.lang());
  s.source_case = m_ctx.case_id(a.iteration);
  return reflect(fmt::format("k{}", a.iteration), s);
}

Status Reflector::at_end(const std::string& stop_reason) {
  const OpState& st = m_ctx.state;
  if (st.attempts.empty()) return {};
  const Attempt* inc = st.incumbent();
  Subject s;
  s.trigger = "the task ended";
  s.summary = fmt::format("The task on {} ended after {} attempts (stop: {}). ", m_ctx.op.name, st.attempts.size(), stop_reason);
  if (inc) {
    s.summary += fmt::format("Best kernel: attempt {} — {} — {} vs reference{}.", inc->iteration, inc->optimisation,
                             format_ratio(inc->speedup_vs_reference),
                             inc->fraction_of_roofline
                                 ? fmt::format(", {:.0f}% of the roofline", 100 * *inc->fraction_of_roofline)
                                 : std::string());
    auto src = m_ctx.code_of(*inc);
    if (src) s.code = "The best kernel:\n" + fence_code(cut_at_lines(*src, k_max_code_shown), m_ctx.lang());
    s.source_case = m_ctx.case_id(inc->iteration);
  } else {
    s.summary += "No attempt produced a correct kernel.";
    s.source_case = m_ctx.case_id(st.attempts.back().iteration);
  }
  // The numbers the lessons rest on: the last attempt's outcome with its per-case timings (the
  // task ended before a next prompt would have shown them) and the best kernel's.
  const Attempt& last = st.attempts.back();
  s.outcome = render_feedback(last, inc, m_ctx.lang());
  if (inc && inc->iteration != last.iteration && !inc->timings.empty()) {
    s.outcome += fmt::format("\nThe best kernel (attempt {}) per timed case:\n{}", inc->iteration, render_timings(*inc));
  }
  return reflect("end", s);
}

Status Reflector::resume() {
  if (!m_ctx.cfg.reflect || !m_ctx.env.llm) return {};
  for (auto& [key, rec] : m_ctx.state.reflections) {
    if (!rec.applied) KOPE_TRY(apply(rec));
  }
  return {};
}

Status Reflector::reflect(const std::string& key, const Subject& subject) {
  if (!m_ctx.cfg.reflect || !m_ctx.env.llm) return {};
  auto found = m_ctx.state.reflections.find(key);
  if (found == m_ctx.state.reflections.end()) {
    if (m_ctx.cancelled()) return {};
    KOPE_ASSIGN(bool answered, ask(key, subject));
    if (!answered) return {};
    found = m_ctx.state.reflections.find(key);
  } else if (found->second.applied) {
    return {};
  }
  return apply(found->second);
}

Result<std::string> Reflector::lessons_in_scope(LessonContext& lessons) {
  // Every active lesson in the op's scope is listed by id; the ones retrieval ranks first
  // (then the most helpful) are shown whole, so that they can be voted on and edited.
  KOPE_ASSIGN(auto in_scope, m_ctx.env.store->lessons({lessons.category, lessons.backend, lessons.target, lessons.toolchain}));
  memory::RetrievalQuery q = state_query(m_ctx, plan_next(m_ctx.state, m_ctx.cfg));
  q.limit = 30;
  KOPE_ASSIGN(auto items, m_ctx.env.store->retrieve(q));
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
  std::string shown = render_lessons_in_scope(ordered, k_lessons_shown_whole, &lessons.known_ids, &editable);
  lessons.editable_ids = std::move(editable);
  return shown;
}

Result<bool> Reflector::ask(const std::string& key, const Subject& subject) {
  const OpEnvironment& env = m_ctx.env;
  ReflectionInput in;
  in.op = &m_ctx.op;
  in.backend = env.evaluator->backend();
  in.target = env.evaluator->target().str();
  in.trigger = subject.trigger;
  in.summary = subject.summary;
  in.tried = render_tried(m_ctx.state.attempts);
  in.code = subject.code;
  in.outcome = subject.outcome;
  LessonContext lessons;
  lessons.category = m_ctx.op.category;
  lessons.backend = in.backend;
  lessons.target = in.target;
  lessons.toolchain = env.evaluator->toolchain_id();
  lessons.source_case = subject.source_case;
  lessons.reason = fmt::format("reflection on {} ({}) in run {}", m_ctx.op.name, subject.trigger, env.run_id);
  in.memory = m_ctx.cfg.mode != context::Mode::none;
  if (in.memory) {
    KOPE_ASSIGN(in.existing, lessons_in_scope(lessons));
  }
  KOPE_ASSIGN(auto messages, build_reflection_prompt(*env.prompts, in));
  const context::TokenEstimator est = env.estimator->snapshot();
  int64_t estimated = 0;
  for (const auto& m : messages) estimated += est.estimate(m.content);
  int64_t system_tokens = est.estimate(messages[0].content);
  KOPE_TRY(m_ctx.event({{"type", "prompt"}, {"purpose", "reflect"}, {"key", key}, {"total_tokens", estimated},
                        {"token_scale", est.scale()},
                        {"tier_tokens", {{"system", system_tokens}, {"hot", estimated - system_tokens}, {"warm", 0}, {"cold", 0}}}}));
  int k = static_cast<int>(m_ctx.state.attempts.size());
  llm::ChatParams params;
  params.max_output_tokens = static_cast<int>(std::min<int64_t>(1500, m_ctx.cfg.budget.generation));
  if (m_ctx.cfg.seed) params.seed = m_ctx.derived_seed(k, "reflect-" + key);
  params.purpose = "reflect";
  m_ctx.phase(k, memory::Stage::refine, "reflecting");
  auto r = env.llm->chat(messages, params);
  if (!r) {
    // A reflection is an extra; its failure never stops the op.
    KOPE_TRY(m_ctx.event({{"type", "reflection_failed"}, {"key", key},
                          {"class", std::string(llm::failure_class_name(r.error().cls))}, {"message", r.error().message}}));
    return false;
  }
  if (!r->usage.estimated && r->usage.prompt_tokens > 0) env.estimator->calibrate(estimated, r->usage.prompt_tokens);
  KOPE_TRY(m_ctx.write_transcript(fmt::format("transcripts/{}/reflect-{}.md", m_ctx.op_dir, key),
                                  render_transcript(messages, r->text)));
  ParsedLessons parsed = parse_lessons(r->text, lessons);
  ReflectionRecord rec;
  rec.key = key;
  rec.deltas = parsed.deltas;
  rec.tokens_prompt = r->usage.prompt_tokens;
  rec.tokens_completion = r->usage.completion_tokens;
  rec.cost_usd = r->cost_usd;
  json deltas = json::array();
  for (const auto& d : parsed.deltas) deltas.push_back(delta_to_json(d));
  KOPE_TRY(m_ctx.event({{"type", "reflection"},
                        {"key", key},
                        {"trigger", subject.trigger},
                        {"deltas", deltas},
                        {"problems", parsed.problems},
                        {"parsed", parsed.parsed},
                        {"tokens_prompt", rec.tokens_prompt},
                        {"tokens_completion", rec.tokens_completion},
                        {"cost_usd", rec.cost_usd}}));
  m_ctx.state.reflections.emplace(key, std::move(rec));
  return true;
}

// Applies the logged deltas; an add that is already there (a crash between applying and
// logging) is not repeated.
Status Reflector::apply(ReflectionRecord& rec) {
  rec.lesson_ids.clear();
  std::vector<std::string> problems;
  for (const auto& d : rec.deltas) {
    if (d.op == memory::LessonDelta::Op::add) {
      KOPE_ASSIGN(auto existing, m_ctx.env.store->lessons(d.lesson.scope));
      auto same = std::find_if(existing.begin(), existing.end(), [&](const memory::Lesson& l) {
        return l.title == d.lesson.title && l.text == d.lesson.text;
      });
      if (same != existing.end()) {
        rec.lesson_ids.push_back(same->id);
        continue;
      }
    }
    auto id = m_ctx.env.store->apply(d);
    if (id) {
      rec.lesson_ids.push_back(*id);
    } else {
      problems.push_back(id.error().message);
    }
  }
  rec.applied = true;
  return m_ctx.event({{"type", "reflection_applied"}, {"key", rec.key}, {"lesson_ids", rec.lesson_ids}, {"problems", problems}});
}

}  // namespace kope::agent
