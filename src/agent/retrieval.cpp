#include "agent/retrieval.h"

#include <algorithm>
#include <map>
#include <set>

#include <fmt/format.h>

#include "eval/registry.h"
#include "util/strings.h"

namespace kope::agent {

memory::RetrievalQuery state_query(const OpContext& ctx, const Plan& plan) {
  memory::RetrievalQuery q;
  q.task = task_info(ctx.op);
  q.target = ctx.env.evaluator->target().str();
  q.toolchain = ctx.env.evaluator->toolchain_id();
  q.backend = ctx.env.evaluator->backend();
  q.code_fences = eval::backend_code_fences();
  q.stage = plan.stage;
  q.holdout = ctx.env.holdout;
  q.limit = ctx.cfg.mode == context::Mode::passive ? ctx.cfg.passive_retrieval_limit : ctx.cfg.retrieval_limit;
  double balance = ctx.env.hw->peak_gbps > 0 ? ctx.env.hw->peak_gflops / ctx.env.hw->peak_gbps : 0;
  if (balance > 0 && q.task.arithmetic_intensity > 0) q.bottleneck = q.task.arithmetic_intensity < balance ? "memory" : "compute";
  if (plan.stage == memory::Stage::repair && plan.parent_iteration) {
    const Attempt& failed = ctx.state.attempts[static_cast<size_t>(*plan.parent_iteration - 1)];
    auto id = ctx.state.case_ids.find(failed.iteration);
    if (auto sig = ctx.error_signature(failed.iteration)) {
      q.last_error_signature = *sig;  // as the store computed it when recording
    } else if (id != ctx.state.case_ids.end()) {
      auto c = ctx.env.store->get_case(id->second);  // recorded before a resume: read back once
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
                                              const std::set<std::string>& shown_notes) {
  KOPE_ASSIGN(auto state_items, store.retrieve(q));
  memory::RetrievalQuery broad = q;
  broad.task.op.clear();
  broad.task.category.clear();
  broad.limit = std::max(1, q.limit / 2);
  KOPE_ASSIGN(auto broad_items, store.retrieve(broad));
  std::map<std::string, std::string> categories;
  for (const auto* o : known_ops) categories[o->name] = o->category;
  return classify_knowledge(state_items, broad_items, op, q.stage, lib, estimator,
                            [&](std::string_view name) -> std::optional<std::string> {
                              auto it = categories.find(std::string(name));
                              if (it == categories.end()) return std::nullopt;
                              return it->second;
                            },
                            exclude, shown_notes);
}

Result<KnowledgeCandidates> gather_knowledge(const OpContext& ctx, const Plan& plan) {
  KnowledgeCandidates knowledge;
  if (ctx.cfg.mode != context::Mode::none) {
    // This task's own attempts are in the hot tier already (incumbent, tried-table).
    std::set<std::string> own;
    for (const auto& [iter, id] : ctx.state.case_ids) own.insert(fmt::format("case:{}", id));
    KOPE_ASSIGN(knowledge, gather_candidates(*ctx.env.store, state_query(ctx, plan), ctx.op, *ctx.env.prompts,
                                             *ctx.env.estimator, ctx.env.known_ops, own, ctx.state.notes_shown));
  } else {
    // `none` admits no memory, so nothing is read from it; the notes are offered and dropped
    // by the same selection as in the other modes.
    knowledge = classify_knowledge({}, {}, ctx.op, plan.stage, *ctx.env.prompts, *ctx.env.estimator,
                                   [](std::string_view) { return std::nullopt; }, {}, ctx.state.notes_shown);
  }
  return knowledge;
}

}  // namespace kope::agent
