#include "agent/retrieval.h"

#include <algorithm>
#include <cstdlib>
#include <limits>
#include <map>
#include <set>

#include <fmt/format.h>

#include "agent/forms.h"
#include "agent/memory_items.h"
#include "util/strings.h"

namespace kope::agent {

memory::RetrievalQuery state_query(const OpContext& ctx, const Plan& plan) {
  memory::RetrievalQuery q;
  q.task = task_info(ctx.op);
  q.target = ctx.env.evaluator->target().str();
  q.toolchain = ctx.env.evaluator->toolchain_id();
  q.backend = ctx.env.evaluator->backend();
  q.stage = plan.stage;
  q.holdout = ctx.env.holdout;
  q.limit = ctx.cfg.mode == context::Mode::passive ? ctx.cfg.passive_retrieval_limit : ctx.cfg.retrieval_limit;
  double balance = machine_balance(*ctx.env.hw);
  if (balance > 0 && q.task.arithmetic_intensity > 0) q.bottleneck = q.task.arithmetic_intensity < balance ? "memory" : "compute";
  if (plan.stage == memory::Stage::repair && plan.parent_iteration) {
    const Attempt& failed = ctx.state.attempts[static_cast<size_t>(*plan.parent_iteration - 1)];
    auto id = ctx.state.case_ids.find(failed.iteration);
    if (auto sig = ctx.error_signature(failed.iteration)) {
      q.last_error_signature = *sig;  // as the store computed it when recording
    } else if (id != ctx.state.case_ids.end()) {
      auto c = ctx.env.store->get_case(id->second);  // logged by an older kope (no signature in "recorded"): read back once
      if (c && *c) q.last_error_signature = (*c)->error_signature;
    }
    q.text = std::string(eval::verdict_name(failed.verdict)) + " " + failed.message + " " + util::truncate_text(failed.diagnostics, 600, 8);
  } else if (const Attempt* inc = ctx.state.incumbent()) {
    q.text = inc->optimisation + " " + ctx.op.category + " faster";
  } else {
    q.text = ctx.op.summary;
  }
  if (const Attempt* inc = ctx.state.incumbent()) {
    auto id = ctx.state.case_ids.find(inc->iteration);
    if (id != ctx.state.case_ids.end()) q.incumbent_case = id->second;  // lineage signals
  }
  return q;
}

Result<KnowledgeCandidates> gather_candidates(memory::Store& store, const memory::RetrievalQuery& q, const spec::OpSpec& op,
                                              const PromptLibrary& lib, const SharedEstimator& estimator,
                                              const std::vector<const spec::OpSpec*>& known_ops,
                                              const std::set<std::string>& exclude,
                                              const std::set<std::string>& shown_notes,
                                              std::vector<memory::RetrievedItem>* retrieved) {
  KOPE_ASSIGN(auto state_items, store.retrieve(q));
  memory::RetrievalQuery broad = q;
  broad.task.op.clear();
  broad.task.category.clear();
  broad.limit = std::max(1, q.limit / 2);
  KOPE_ASSIGN(auto broad_items, store.retrieve(broad));
  std::map<std::string, std::string> categories;
  for (const auto* o : known_ops) categories[o->name] = o->category;
  KnowledgeCandidates out = classify_knowledge(state_items, broad_items, op, q.stage, lib, estimator,
                                               [&](std::string_view name) -> std::optional<std::string> {
                                                 auto it = categories.find(std::string(name));
                                                 if (it == categories.end()) return std::nullopt;
                                                 return it->second;
                                               },
                                               exclude, shown_notes);
  if (retrieved) {
    *retrieved = std::move(state_items);
    retrieved->insert(retrieved->end(), std::make_move_iterator(broad_items.begin()), std::make_move_iterator(broad_items.end()));
  }
  return out;
}

std::vector<context::Item> op_pack_items(const run::OpPackRecord& pack) {
  std::vector<context::Item> items;
  for (const auto& a : pack.items) {
    context::Item it;
    it.id = a.id;
    it.tier = a.tier == "cold" ? context::Tier::cold : context::Tier::warm;
    it.section = a.section;
    it.tokens = a.tokens;
    it.value = a.value;
    it.parts = a.parts;
    it.reason = a.reason;
    it.category = a.category;
    items.push_back(std::move(it));
  }
  return items;
}

Result<std::optional<run::RefineEvidence>> refine_evidence(memory::Store& store, const memory::RetrievalQuery& q) {
  memory::CaseFilter f;
  f.target = q.target;
  f.stage = memory::Stage::refine;
  f.foreign_origin = false;
  f.quarantined = false;  // neither quarantined nor refuted
  f.limit = 5000;
  KOPE_ASSIGN(auto cases, store.cases(f));
  run::RefineEvidence ev;
  ev.category = q.task.category;
  for (const auto& c : cases) {
    if (c.task.category != q.task.category || c.verdict == eval::Verdict::bad_answer) continue;
    if (q.holdout.excludes(c.task.op, c.task.spec_hash, c.run_id)) continue;
    ++ev.refinements;
    if (c.verdict == eval::Verdict::correct && c.outcome == memory::Outcome::effective) ++ev.wins;
  }
  if (ev.refinements == 0) return std::optional<run::RefineEvidence>();
  return std::optional<run::RefineEvidence>(ev);
}

Result<KnowledgeCandidates> knowledge_for(memory::Store& store, const KnowledgeRequest& req, const PromptLibrary& lib,
                                          const SharedEstimator& estimator,
                                          const std::vector<const spec::OpSpec*>& known_ops) {
  const spec::OpSpec& op = *req.op;
  if (req.mode == context::Mode::none) {
    // `none` admits no memory, so nothing is read from it; the notes are offered and dropped
    // by the same selection as in the other modes.
    return classify_knowledge({}, {}, op, req.query.stage, lib, estimator, [](std::string_view) { return std::nullopt; }, {},
                              req.shown_notes);
  }
  std::vector<memory::RetrievedItem> retrieved;
  KOPE_ASSIGN(KnowledgeCandidates raw, gather_candidates(store, req.query, op, lib, estimator, known_ops, req.exclude,
                                                         req.shown_notes, &retrieved));
  // The op pack: as the first prompt fixed it, or chosen now.
  std::vector<context::Item> pack;
  std::string pack_text;
  // Memory's refinement evidence as it stands now (the stop rule weighs the latest; the op pack
  // keeps the first prompt's).
  KOPE_ASSIGN(std::optional<run::RefineEvidence> evidence, refine_evidence(store, req.query));
  if (req.op_pack) {
    pack = op_pack_items(*req.op_pack);
    pack_text = req.op_pack->text;
  } else {
    OpPackChoice chosen = choose_op_pack(raw, retrieved, op, estimator, req.query.task.arithmetic_intensity, req.balance);
    if (req.mode == context::Mode::random) {
      int64_t tokens = 0;
      for (const auto& it : chosen.items) tokens += it.tokens;
      chosen = random_op_pack(raw, tokens, req.seed ^ 0x6f70u, estimator);
    }
    pack = std::move(chosen.items);
    pack_text = std::move(chosen.text);
  }
  std::set<std::string> exclude = req.exclude;
  for (const auto& it : pack) exclude.insert(it.id);
  auto without = [&](std::vector<context::Item>& items) {
    std::erase_if(items, [&](const context::Item& it) { return exclude.contains(it.id); });
  };
  KnowledgeCandidates out;
  if (req.mode == context::Mode::passive) {
    out = std::move(raw);
  } else {
    FormContext fc;
    fc.op = &op;
    fc.stage = req.query.stage;
    fc.lang = req.lang;
    fc.bottleneck = req.query.bottleneck;
    fc.balance = req.balance;
    fc.intensity = req.query.task.arithmetic_intensity;
    fc.error_signature = req.query.last_error_signature;
    fc.incumbent_code = req.incumbent_code;
    KOPE_ASSIGN(KnowledgeCandidates forms, active_forms(store, raw, retrieved, fc, estimator, exclude));
    if (req.mode == context::Mode::active) {
      out = std::move(forms);
    } else {
      out = std::move(raw);
      out.match_warm = std::move(forms.warm);
      out.match_cold = std::move(forms.cold);
    }
  }
  without(out.warm);
  without(out.cold);
  out.op_pack = std::move(pack);
  out.op_pack_text = std::move(pack_text);
  out.evidence = std::move(evidence);
  return out;
}

Result<std::vector<memory::Lesson>> lessons_learned_here(const OpContext& ctx, size_t limit) {
  std::vector<memory::Lesson> out;
  if (limit == 0 || (ctx.cfg.mode != context::Mode::active && ctx.cfg.mode != context::Mode::passive)) return out;
  std::set<int64_t> own;
  for (const auto& [iter, id] : ctx.state.case_ids) own.insert(id);
  // Reflections by recency: "k<iteration>" in iteration order, "end" after them.
  std::vector<std::pair<int, const run::ReflectionRecord*>> recs;
  for (const auto& [key, record] : ctx.state.reflections) {
    if (!record.applied) continue;
    int k = key.size() > 1 && key[0] == 'k' ? std::atoi(key.c_str() + 1) : std::numeric_limits<int>::max();
    recs.emplace_back(k, &record);
  }
  std::stable_sort(recs.begin(), recs.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  if (recs.empty()) return out;
  KOPE_ASSIGN(std::vector<memory::Lesson> active, ctx.env.store->lessons({}));  // every active lesson
  std::map<std::string, memory::Lesson*> by_id;
  for (auto& l : active) by_id[l.id] = &l;
  std::set<std::string> seen;
  for (const auto& [k, record] : recs) {
    for (const auto& id : record->lesson_ids) {
      if (out.size() >= limit) return out;
      if (!seen.insert(id).second) continue;
      auto found = by_id.find(id);
      if (found == by_id.end()) continue;  // deprecated or merged since
      memory::Lesson* l = found->second;
      // Voted on but drawn from other work: retrieval offers it as it offers any lesson.
      if (std::none_of(l->source_cases.begin(), l->source_cases.end(), [&](int64_t c) { return own.contains(c); })) continue;
      // The contamination guard, as for every lesson a prompt shows: an edit can have kept the
      // sources of a lesson drawn from a held-out op's experience.
      bool held_out = false;
      for (size_t i = 0; ctx.env.holdout.active() && !held_out && i < l->source_cases.size(); ++i) {
        if (own.contains(l->source_cases[i])) continue;
        KOPE_ASSIGN(std::optional<memory::CaseRecord> source, ctx.env.store->get_case(l->source_cases[i]));
        held_out = source && ctx.env.holdout.excludes(source->task.op, source->task.spec_hash, source->run_id);
      }
      if (!held_out) out.push_back(std::move(*l));
    }
  }
  return out;
}

Result<KnowledgeCandidates> gather_knowledge(OpContext& ctx, const Plan& plan, const std::vector<memory::Lesson>& learned) {
  KnowledgeRequest req;
  req.query = state_query(ctx, plan);
  req.op = &ctx.op;
  req.mode = ctx.cfg.mode;
  // This task's own attempts are in the hot tier already (incumbent, tried-table), as cases and
  // as kernels.
  for (const auto& [iter, id] : ctx.state.case_ids) {
    req.exclude.insert(fmt::format("case:{}", id));
    req.exclude.insert(fmt::format("kernel:{}", id));
  }
  for (const auto& l : learned) req.exclude.insert("lesson:" + l.id);
  req.shown_notes = ctx.state.notes_shown;
  req.op_pack = ctx.state.op_pack;
  if (const Attempt* inc = ctx.state.incumbent()) {
    auto code = ctx.code_of(*inc);
    if (code) req.incumbent_code = *code;
  }
  const HardwareProfile& hw = *ctx.env.hw;
  req.balance = machine_balance(hw);
  req.lang = ctx.lang();
  req.seed = ctx.derived_seed(static_cast<int>(ctx.state.attempts.size()) + 1, "random-context");
  return knowledge_for(*ctx.env.store, req, *ctx.env.prompts, *ctx.env.estimator, ctx.env.known_ops);
}

}  // namespace kope::agent
