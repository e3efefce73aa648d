#include "agent/reflector.h"

#include <algorithm>
#include <map>
#include <set>
#include <vector>

#include <fmt/format.h>

#include "agent/memory_items.h"
#include "agent/model_turn.h"
#include "agent/plan.h"
#include "agent/prompt.h"
#include "agent/recorder.h"
#include "agent/retrieval.h"
#include "util/strings.h"

namespace kope::agent {

using nlohmann::json;

std::string fence_code_whole(std::string_view code, std::string_view lang, size_t max_lines, size_t max_bytes) {
  LinePrefix p = whole_lines_within(code, max_bytes, max_lines);
  if (p.lines_left == 0) return fence_code(code, lang);
  size_t lines = static_cast<size_t>(std::count(code.begin(), code.end(), '\n')) + (code.ends_with('\n') ? 0 : 1);
  return fmt::format("(not shown: {} lines, {}, longer than a reflection shows whole ({} lines, {}); its optimisation line "
                     "and outcome above describe it)\n",
                     lines, util::human_bytes(static_cast<double>(code.size())), max_lines,
                     util::human_bytes(static_cast<double>(max_bytes)));
}

std::string Reflector::code_block(const Attempt& a, const std::string& title) {
  auto src = m_ctx.code_of(a);
  if (!src || src->empty()) return "";
  return title + "\n" + fence_code_whole(*src, m_ctx.lang(), k_reflection_code_lines, k_max_code_shown);
}

void Reflector::describe_failure(const Attempt& a, Subject& s) {
  // The attempt's feedback as the next kernel prompt showed it, without that prompt's request
  // for code (a reflection answers with lessons).
  std::string failure;
  for (const auto& line : util::split(render_feedback(a, nullptr, m_ctx.lang()), '\n')) {
    if (line.starts_with("The answer held no usable code")) {
      failure += "The answer held no usable code.\n";
    } else if (!line.empty()) {
      failure += line + "\n";
    }
  }
  std::string signature = m_ctx.error_signature(a.iteration).value_or("");
  if (signature.empty()) {
    if (auto id = m_ctx.case_id(a.iteration)) {  // logged by an older kope (no signature in "recorded"): read back
      auto c = m_ctx.env.store->get_case(*id);
      if (c && *c) signature = (*c)->error_signature;
    }
  }
  if (!signature.empty()) failure += fmt::format("Error signature: `{}`\n", util::replace_all(signature, "`", "'"));
  s.failure = std::move(failure);
  s.failure_signature = std::move(signature);
}

Status Reflector::after(const Attempt& a) {
  if (!a.notable) return {};
  Subject s;
  s.trigger = a.notable_reason;
  s.attempt = a.iteration;
  s.summary = a.journal;
  if (a.iteration >= 2) {
    const Attempt& prev = m_ctx.attempt(a.iteration - 1);
    if (!prev.correct()) {
      s.summary = fmt::format("Attempt {} failed:\n{}\nThen attempt {}:\n{}", prev.iteration, prev.journal, a.iteration, a.journal);
      s.code += code_block(prev, fmt::format("Attempt {} (failed):", prev.iteration));
      describe_failure(prev, s);
    } else if (a.parent_iteration) {
      const Attempt& parent = m_ctx.attempt(*a.parent_iteration);
      s.code += code_block(parent, fmt::format("Attempt {} (the parent):", parent.iteration));
    }
  }
  s.code += code_block(a, fmt::format("Attempt {}:", a.iteration));
  s.outcome = render_feedback(a, m_ctx.state.incumbent(), m_ctx.lang());
  s.source_case = m_ctx.case_id(a.iteration);
  return reflect(fmt::format("k{}", a.iteration), std::move(s));
}

Status Reflector::at_end(const std::string& stop_reason, const std::string& stop_detail) {
  const OpState& st = m_ctx.state;
  if (st.attempts.empty()) return {};
  const Attempt* inc = st.incumbent();
  const Attempt& last = st.attempts.back();
  Subject s;
  s.trigger = "the task ended";
  s.attempt = inc ? inc->iteration : last.iteration;
  s.summary = fmt::format("The task on {} ended after {} attempts ({}). ", m_ctx.op.name, st.attempts.size(),
                          stop_sentence(stop_reason, stop_detail));
  if (inc) {
    s.summary += fmt::format("Best kernel: attempt {} — {} — {} vs reference{}.", inc->iteration, inc->optimisation,
                             format_ratio(inc->speedup_vs_reference),
                             inc->fraction_of_roofline
                                 ? fmt::format(", {:.0f}% of the roofline", 100 * *inc->fraction_of_roofline)
                                 : std::string());
    s.code = code_block(*inc, fmt::format("The best kernel (attempt {}):", inc->iteration));
    s.source_case = m_ctx.case_id(inc->iteration);
  } else {
    s.summary += "No attempt produced a correct kernel.";
    s.source_case = m_ctx.case_id(last.iteration);
  }
  // The numbers the lessons rest on (the task ended before a next prompt would have shown
  // them): a failed last attempt's code and report, else its outcome with per-case timings;
  // and the best kernel's timings.
  const bool other_best = inc && inc->iteration != last.iteration && !inc->timings.empty();
  if (!last.correct()) {
    s.code += code_block(last, fmt::format("The last attempt ({}, failed):", last.iteration));
    describe_failure(last, s);
    if (other_best) s.outcome = fmt::format("The best kernel (attempt {}) per timed case:\n{}", inc->iteration, render_timings(*inc));
  } else {
    s.outcome = render_feedback(last, inc, m_ctx.lang());
    if (other_best) s.outcome += fmt::format("\nThe best kernel (attempt {}) per timed case:\n{}", inc->iteration, render_timings(*inc));
  }
  return reflect("end", std::move(s));
}

Status Reflector::resume() {
  if (!m_ctx.cfg.reflect || !m_ctx.env.llm) return {};
  for (const auto& [key, rec] : m_ctx.state.reflections) {
    if (!rec.applied) KOPE_TRY(apply(rec));
  }
  return {};
}

Status Reflector::reflect(const std::string& key, Subject subject) {
  if (!m_ctx.cfg.reflect || !m_ctx.env.llm) return {};
  auto found = m_ctx.state.reflections.find(key);
  if (found == m_ctx.state.reflections.end()) {
    if (m_ctx.cancelled()) return {};
    // The other trigger reflected on this attempt already: say so (its lessons come first).
    std::string earlier_key = fmt::format("k{}", subject.attempt);
    auto earlier = m_ctx.state.reflections.find(earlier_key);
    if (earlier_key != key && earlier != m_ctx.state.reflections.end() && subject.attempt >= 1 &&
        static_cast<size_t>(subject.attempt) <= m_ctx.state.attempts.size()) {
      subject.summary += fmt::format(
          "\n\nAttempt {} was reflected on already, after it {}{}.", subject.attempt,
          m_ctx.attempt(subject.attempt).notable_reason.empty() ? "became notable" : "(" + m_ctx.attempt(subject.attempt).notable_reason + ")",
          earlier->second.lesson_ids.empty()
              ? ", and that reflection left memory unchanged"
              : ": the lessons that reflection wrote or voted on are listed first under \"Lessons already in memory\"; improve "
                "them there rather than writing them again, and add only what the whole task teaches beyond them");
    }
    KOPE_ASSIGN(bool answered, ask(key, subject));
    if (!answered) return {};
    found = m_ctx.state.reflections.find(key);
  } else if (found->second.applied) {
    return {};
  }
  return apply(found->second);
}

Status Reflector::lessons_for_prompt(const std::string& key, ReflectionInput& in, LessonContext& lessons) {
  // The lessons this task's earlier reflections wrote or voted on, in the order they did.
  std::vector<std::string> own_ids;
  std::set<std::string> own_seen;
  for (const auto& [k, rec] : m_ctx.state.reflections) {
    if (k == key || !rec.applied) continue;
    for (const auto& id : rec.lesson_ids) {
      if (own_seen.insert(id).second) own_ids.push_back(id);
    }
  }
  if (own_ids.empty() && !in.memory) return {};
  KOPE_ASSIGN(auto in_scope, m_ctx.env.store->lessons({lessons.category, lessons.backend, lessons.target, lessons.toolchain}));
  // The contamination guard: a lesson drawn from a held-out op's experience of another run is
  // not shown, as retrieval leaves it out of the kernel prompts.
  if (m_ctx.env.holdout.active()) {
    std::map<int64_t, bool> held_out;  // source case -> excluded
    auto excluded = [&](const memory::Lesson& l) {
      for (int64_t id : l.source_cases) {
        auto [it, fresh] = held_out.emplace(id, false);
        if (fresh) {
          auto c = m_ctx.env.store->get_case(id);
          it->second = c && *c && m_ctx.env.holdout.excludes((*c)->task.op, (*c)->task.spec_hash, (*c)->run_id);
        }
        if (it->second) return true;
      }
      return false;
    };
    std::erase_if(in_scope, excluded);
  }
  auto find = [&](const std::string& id) {
    return std::find_if(in_scope.begin(), in_scope.end(), [&](const memory::Lesson& x) { return x.id == id; });
  };
  std::vector<memory::Lesson> own;
  for (const auto& id : own_ids) {
    if (auto l = find(id); l != in_scope.end()) own.push_back(*l);  // still active
  }
  std::set<std::string> editable;
  in.task_lessons = render_lessons_in_scope(own, SIZE_MAX, &lessons.known_ids, &editable);
  if (in.memory) {
    // The other active lessons in the op's scope that retrieval ranks first (then the most
    // helpful) are listed by id, the first of them whole, so that they can be voted on and edited.
    memory::RetrievalQuery q = state_query(m_ctx, plan_next(m_ctx.state, m_ctx.cfg));
    q.limit = 30;
    KOPE_ASSIGN(auto items, m_ctx.env.store->retrieve(q));
    // Lessons drawn only from another kind of work (agent::lesson_from_other_work) say nothing
    // about this task's outcome: they are not listed, as the kernel prompts leave them out.
    double balance = m_ctx.env.hw ? machine_balance(*m_ctx.env.hw) : 0;
    std::vector<memory::Lesson> ordered;
    std::set<std::string> placed;
    for (const auto& it : items) {
      if (it.kind != memory::RetrievedItem::Kind::lesson || !it.id.starts_with("lesson:")) continue;
      std::string id = it.id.substr(7);
      if (it.lesson && lesson_from_other_work(*it.lesson, q.task.arithmetic_intensity, balance)) {
        placed.insert(id);
        continue;
      }
      auto l = find(id);
      if (l != in_scope.end() && placed.insert(id).second) ordered.push_back(*l);
    }
    for (const auto& l : in_scope) {
      if (placed.insert(l.id).second) ordered.push_back(l);
    }
    if (ordered.size() > k_lessons_listed) ordered.resize(k_lessons_listed);
    in.existing = render_lessons_in_scope(ordered, k_lessons_shown_whole, &lessons.known_ids, &editable);
  }
  lessons.editable_ids = std::move(editable);
  return {};
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
  in.failure = subject.failure;
  in.outcome = subject.outcome;
  LessonContext lessons;
  lessons.category = m_ctx.op.category;
  lessons.backend = in.backend;
  lessons.target = in.target;
  lessons.toolchain = env.evaluator->toolchain_id();
  lessons.source_case = subject.source_case;
  lessons.failure_signature = subject.failure_signature;
  lessons.reason = fmt::format("reflection on {} ({}) in run {}", m_ctx.op.name, subject.trigger, env.run_id);
  in.memory = m_ctx.cfg.mode != context::Mode::none;
  KOPE_TRY(lessons_for_prompt(key, in, lessons));
  KOPE_ASSIGN(auto messages, build_reflection_prompt(*env.prompts, in));
  const context::TokenEstimator est = env.estimator->snapshot();
  int64_t estimated = 0;
  for (const auto& m : messages) estimated += est.estimate(m.content);
  int64_t system_tokens = est.estimate(messages[0].content);
  run::PromptEvent prompt_event;
  prompt_event.purpose = "reflect";
  prompt_event.key = key;
  prompt_event.total_tokens = estimated;
  prompt_event.token_scale = est.scale();
  prompt_event.tier_tokens = {{"system", system_tokens}, {"hot", estimated - system_tokens}, {"warm", 0}, {"cold", 0}};
  KOPE_TRY(m_ctx.emit(std::move(prompt_event)));
  int k = static_cast<int>(m_ctx.state.attempts.size());
  llm::ChatParams params;
  params.max_output_tokens = static_cast<int>(std::min<int64_t>(1500, m_ctx.cfg.budget.generation));
  if (m_ctx.cfg.seed) params.seed = m_ctx.derived_seed(k, "reflect-" + key);
  params.purpose = "reflect";
  m_ctx.phase(k, memory::Stage::refine, "reflecting");
  auto r = env.llm->chat(messages, params);
  if (!r) {
    // A reflection is an extra; its failure never stops the op.
    KOPE_TRY(m_ctx.emit(
        run::ReflectionFailedEvent{key, std::string(llm::failure_class_name(r.error().cls)), r.error().message}));
    return false;
  }
  if (!r->usage.estimated && r->usage.prompt_tokens > 0) env.estimator->calibrate(estimated, r->usage.prompt_tokens);
  KOPE_TRY(m_ctx.write_transcript(fmt::format("transcripts/{}/reflect-{}.md", m_ctx.op_dir, key),
                                  render_transcript(messages, r->text)));
  ParsedLessons parsed = parse_lessons(r->text, lessons);
  run::ReflectionEvent e;
  e.key = key;
  e.trigger = subject.trigger;
  e.attempt = subject.attempt;
  e.deltas = parsed.deltas;
  e.problems = parsed.problems;
  e.parsed = parsed.parsed;
  e.tokens_prompt = r->usage.prompt_tokens;
  e.tokens_completion = r->usage.completion_tokens;
  e.cost_usd = r->cost_usd;
  KOPE_TRY(m_ctx.emit(std::move(e)));
  return true;
}

// Applies the logged deltas; an add that is already there (a crash between applying and
// logging) is not repeated.
Status Reflector::apply(const ReflectionRecord& rec) {
  std::vector<std::string> lesson_ids;
  std::vector<std::string> problems;
  for (const auto& d : rec.deltas) {
    if (d.op == memory::LessonDelta::Op::add) {
      KOPE_ASSIGN(auto existing, m_ctx.env.store->lessons(d.lesson.scope));
      auto same = std::find_if(existing.begin(), existing.end(), [&](const memory::Lesson& l) {
        return l.title == d.lesson.title && l.text == d.lesson.text;
      });
      if (same != existing.end()) {
        lesson_ids.push_back(same->id);
        continue;
      }
    }
    auto id = m_ctx.env.store->apply(d);
    if (id) {
      lesson_ids.push_back(*id);
    } else {
      problems.push_back(id.error().message);
    }
  }
  return m_ctx.emit(run::ReflectionAppliedEvent{rec.key, std::move(lesson_ids), std::move(problems)});
}

}  // namespace kope::agent
