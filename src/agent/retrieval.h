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

// The knowledge candidates of the next prompt, classified into the warm and cold tiers: what
// the state query and a broad query (the same without op and category, half the limit) return,
// this task's own cases left out (the hot tier shows them). Mode none asks the memory nothing;
// the notes are offered either way.
Result<KnowledgeCandidates> gather_knowledge(const OpContext& ctx, const Plan& plan);

// What gather_knowledge does for a query: the state query `q` and the broad query (the same
// without op and category, half the limit) asked of `store`, classified by classify_knowledge
// for `op` (categories of other ops from `known_ops`). `kope memory retrieve --admit` uses it
// for a state it is given.
Result<KnowledgeCandidates> gather_candidates(memory::Store& store, const memory::RetrievalQuery& q, const spec::OpSpec& op,
                                              const PromptLibrary& lib, const SharedEstimator& estimator,
                                              const std::vector<const spec::OpSpec*>& known_ops,
                                              const std::set<std::string>& exclude = {},
                                              const std::set<std::string>& shown_notes = {});

}  // namespace kope::agent
