// agent/forms.h — the forms experience takes in an active prompt (docs/design.md §5, "Forms").
//
// Retrieval returns the facts of its items, rendered ready to read by agent/memory_items.h (whole
// kernels, case summaries with journals, lessons). An active prompt carries the knowledge in
// them, not the bulk, under small stage budgets:
//   - the op pack: a handful of lessons for the op's category and at most three pitfalls, fixed at
//     the op's first prompt and repeated unchanged in its per-op part (so a provider caches it);
//   - draft: at most one exemplar, the best verified kernel of the closest operator of the same
//     category: whole when short, else its recipe (the ordered changes of its lineage with the
//     step ratio each one measured here);
//   - repair: the fail -> fix pair as a diff, only for the same error signature;
//   - refine: at most two before -> after hunks of changes that paid on structurally close ops
//     of the same category, with their measured ratio, preferring the incumbent's bottleneck;
//   - anything else as a one-line digest (change, verdict, ratio; never code).
// Experience from other hardware is offered only where no native item of the same kind exists,
// and a foreign lesson that hurt here (negative learned value) never. Code is never shown from
// another category and never cut inside a hunk or a kernel.
#pragma once

#include <optional>
#include <set>
#include <string>
#include <vector>

#include "agent/prompt.h"
#include "kope/memory.h"

namespace kope::agent {

// A kernel this short (in tokens) is shown whole as an exemplar; a longer one as its recipe.
inline constexpr int64_t k_exemplar_whole_tokens = 1000;
// The op pack's ceiling (its items and its heading: k_op_pack_heading_tokens of it are kept for
// the heading) and its contents.
inline constexpr int64_t k_op_pack_tokens = 500;
inline constexpr int64_t k_op_pack_heading_tokens = 40;
inline constexpr size_t k_op_pack_lessons = 5;
inline constexpr size_t k_op_pack_pitfalls = 3;
// At most this many before -> after hunks in one refinement.
inline constexpr size_t k_refine_hunks = 2;

// What the forms need to know about the prompt being built.
struct FormContext {
  const spec::OpSpec* op = nullptr;
  memory::Stage stage = memory::Stage::draft;
  std::string lang = "cpp";            // code fence of the backend
  std::string bottleneck;              // "memory" / "compute" for this op on this machine ("" unknown)
  double balance = 0;                  // peak FLOP/s over bandwidth: an op's bottleneck from its intensity
  double intensity = 0;                // this op's arithmetic intensity (0 unknown): other_kind_of_work
  std::string error_signature;         // repair: the failure's signature as the store computed it
  std::string incumbent_code;          // never shown again as experience
};

// The op pack for an op's first prompt, chosen from the lesson candidates among `knowledge`
// (native first; foreign lessons only for a kind no native lesson covers): at most
// k_op_pack_lessons lessons for the op's category (or any op, with a positive learned value) and
// k_op_pack_pitfalls pitfalls or fixes, by value, within k_op_pack_tokens, never a lesson that
// hurt here, none learned under load (noisy_evidence) and none drawn only from ops of another
// kind of work than this op, of intensity `intensity` on a machine of `balance`
// (lesson_from_other_work; 0 for either when unknown). Its items carry their admission reasons;
// the text is what the per-op part shows.
struct OpPackChoice {
  std::string text;
  std::vector<context::Item> items;
};
OpPackChoice choose_op_pack(const KnowledgeCandidates& knowledge, const std::vector<memory::RetrievedItem>& retrieved,
                            const spec::OpSpec& op, const SharedEstimator& estimator, double intensity = 0,
                            double balance = 0);

// The random control's op pack: lessons in a seeded random order up to `tokens` (what the active
// op pack holds for the same op).
OpPackChoice random_op_pack(const KnowledgeCandidates& knowledge, int64_t tokens, uint64_t seed,
                            const SharedEstimator& estimator);

// The op pack's text from its items (one line each).
std::string render_op_pack(const std::vector<context::Item>& items);

// Turns the candidates retrieval offered (`knowledge`, from classify_knowledge, with the
// retrieved items they came from) into an active prompt's candidates in the forms above. Reads
// the cases it needs (codes, parents) from `store`; a case that cannot be read is left out.
// Items in `exclude` (the op pack, this task's own cases) are left out.
Result<KnowledgeCandidates> active_forms(memory::Store& store, const KnowledgeCandidates& knowledge,
                                         const std::vector<memory::RetrievedItem>& retrieved, const FormContext& fc,
                                         const SharedEstimator& estimator, const std::set<std::string>& exclude);

// The recipe of the kernel of case `id`: its lineage's correct steps from the root, each with its
// change and the ratio it measured over the step before ("" when the case cannot be read). A
// figure from a step timed mostly under outside load (its timings marked disturbed) says so.
Result<std::string> kernel_recipe(memory::Store& store, int64_t id, size_t max_steps = 8);

// `diff_text` of before -> after as whole unified hunks within `max_bytes`, with a line saying
// how many hunks were left out; "" when not even the first hunk fits or nothing changed.
std::string diff_within(std::string_view before, std::string_view after, size_t max_bytes, int context_lines = 2);

// A case summary without its journal and lineage lines: what it changed and how it ended.
std::string digest_text(std::string_view case_text);

}  // namespace kope::agent
