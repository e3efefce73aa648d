// agent/retrieval.h — what the loop asks the memory before a prompt (docs/design.md §4, §5).
#pragma once

#include "agent/op_context.h"
#include "agent/plan.h"
#include "agent/prompt.h"
#include "kope/memory.h"

namespace kope::agent {

// The retrieval query for the op's current state: the task, target, toolchain, backend and
// stage; the bottleneck the roofline suggests; for a repair the failed attempt's error (its
// signature as the memory recorded it) and text, otherwise the incumbent's optimisation or the
// op's summary; the incumbent's case for the lineage signals.
memory::RetrievalQuery state_query(const OpContext& ctx, const Plan& plan);

// What one prompt's memory is drawn from, besides the store: the query, the op, the mode, and
// the facts the forms of agent/forms.h need.
struct KnowledgeRequest {
  memory::RetrievalQuery query;
  const spec::OpSpec* op = nullptr;
  context::Mode mode = context::Mode::active;
  std::set<std::string> exclude;        // this task's own cases and kernels (the hot tier shows them)
  std::set<std::string> shown_notes;    // notes this task's earlier prompts showed
  // The op pack fixed by the op's first prompt (OpState::op_pack); nullopt: choose it now.
  std::optional<run::OpPackRecord> op_pack;
  std::string incumbent_code;           // never offered again as experience
  double balance = 0;                   // the machine's peak FLOP/s over its bandwidth
  std::string lang = "cpp";
  uint64_t seed = 0;                    // the random control's order
};

// The knowledge candidates of the next prompt: what the state query and a broad query (the same
// without op and category, half the limit) return, classified into the warm and cold tiers
// (classify_knowledge), then in the mode's forms: passive offers them as retrieved; active in the
// forms of agent/forms.h; random offers them as retrieved and carries active's as the count to
// match. Every mode but none gets the op pack (chosen when `req.op_pack` is nullopt: active and
// passive by choose_op_pack, random at the same token count by random_op_pack). Mode none asks
// the memory nothing; the notes are offered either way.
Result<KnowledgeCandidates> knowledge_for(memory::Store& store, const KnowledgeRequest& req, const PromptLibrary& lib,
                                          const SharedEstimator& estimator,
                                          const std::vector<const spec::OpSpec*>& known_ops);

// The lessons this task taught: written or edited by its applied reflections from its own
// attempts (one of the lesson's source cases is this task's), still active, the latest
// reflection's first, at most `limit`. The hot tier shows them ("Learned in this task"): the op
// pack is fixed by the op's first prompt, before any of them existed, and a refine prompt's
// memory tail is a few hundred tokens, so without it a run's own lessons seldom reached its
// later prompts (0 of 18, 2 of 19 and 1 of 26 in three model runs of 2026-12-07).
inline constexpr size_t k_learned_lessons = 3;
Result<std::vector<memory::Lesson>> lessons_learned_here(const OpContext& ctx, size_t limit = k_learned_lessons);

// knowledge_for with the loop's state: this task's own cases left out, and `learned`, the lessons
// the same prompt's hot tier shows (lessons_learned_here); the op pack of its first prompt, the
// incumbent's code.
Result<KnowledgeCandidates> gather_knowledge(OpContext& ctx, const Plan& plan, const std::vector<memory::Lesson>& learned);

// What `store` holds about refinements of operators of the query's category on its target: the
// native refine-stage cases (not foreign, not quarantined or refuted, not a bad answer, which
// evaluated nothing; the held-out ops' left out as retrieval leaves them out), and how many of
// them won (correct, outcome effective). nullopt where there is none. Read once per op, when its
// op pack is fixed (the evidence stop rule, agent/plan.h).
Result<std::optional<run::RefineEvidence>> refine_evidence(memory::Store& store, const memory::RetrievalQuery& q);

// The op pack's items from its record in the op's state (its admission as logged).
std::vector<context::Item> op_pack_items(const run::OpPackRecord& pack);

// The state query `q` and the broad query (the same without op and category, half the limit)
// asked of `store`, classified by classify_knowledge for `op` (categories of other ops from
// `known_ops`); `retrieved` receives every item either query returned.
Result<KnowledgeCandidates> gather_candidates(memory::Store& store, const memory::RetrievalQuery& q, const spec::OpSpec& op,
                                              const PromptLibrary& lib, const SharedEstimator& estimator,
                                              const std::vector<const spec::OpSpec*>& known_ops,
                                              const std::set<std::string>& exclude = {},
                                              const std::set<std::string>& shown_notes = {},
                                              std::vector<memory::RetrievedItem>* retrieved = nullptr);

}  // namespace kope::agent
