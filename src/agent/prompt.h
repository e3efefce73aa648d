// agent/prompt.h — building each iteration's prompt from the prompt files and the memory.
//
// PromptLibrary holds one backend's templates (prompts/<backend>/*.md, `{{> file}}` partials
// expanded at load). assemble_prompt() renders the hot tier (target, spec with its reference,
// incumbent, latest feedback, the tried-table), lets Active Context Management choose the warm
// and cold items under the knowledge budget, renders them into their sections, and checks the
// final estimate: system + user never exceed W − G (window minus generation allowance). The
// render_* helpers produce the hot tier's text blocks. All functions are thread-safe.
#pragma once

#include <filesystem>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "context/context.h"
#include "eval/registry.h"
#include "kope/error.h"
#include "kope/hw.h"
#include "kope/llm.h"
#include "kope/memory.h"
#include "kope/spec.h"
#include "run/attempt.h"

namespace kope::agent {

using run::Attempt;
using run::TimingSummary;

namespace fs = std::filesystem;

// A general note of notes.md (one "## " section). A line "applies: category=a, b; stage=c"
// right under the heading limits it to those op categories and stages (an empty list: any);
// the line is not part of the note's text.
struct PromptNote {
  std::string title;
  std::string body;
  std::set<std::string> categories;
  std::set<std::string> stages;

  bool applies_to(std::string_view category, memory::Stage stage) const;
};

struct PromptLibrary {
  std::string backend;
  fs::path dir;
  std::string system;          // system message of kernel-writing calls (rules, toolchain, hardware)
  std::string op_part;         // op.md: the per-op part that starts every user message of an op
  std::string draft, repair, refine;  // the changing tail of each stage
  std::string reflect_system, reflect;
  // notes.md split at "## " headings: general notes offered to the cold tier.
  std::vector<PromptNote> notes;

  // Loads root/<backend>/ (system, op, draft, repair, refine, reflect_system, reflect, notes .md).
  // Fails with not_found naming the missing file, or config naming a template's bad line (an
  // "applies:" line with an unknown key included).
  static Result<PromptLibrary> load(const fs::path& root, std::string_view backend);
  const std::string& stage_template(memory::Stage s) const;
};

// share_dir()/prompts
fs::path default_prompts_dir();

// A TokenEstimator shared by the calls of a run, calibrated against reported usage.
class SharedEstimator {
 public:
  int64_t estimate(std::string_view text) const;
  void calibrate(int64_t estimated, int64_t reported);
  double scale() const;
  // A copy of the estimator as it is now (for estimates that must share one scale).
  context::TokenEstimator snapshot() const;

 private:
  mutable std::mutex m_mutex;
  context::TokenEstimator m_estimator;
};

// What the hot tier shows. Text blocks come from the render_* helpers below.
struct PromptInput {
  const spec::OpSpec* op = nullptr;
  std::string reference_source;
  std::string hardware;
  std::string toolchain;
  memory::Stage stage = memory::Stage::draft;
  int iteration = 1;
  int max_iterations = 1;
  std::string incumbent;  // empty when there is none
  std::string feedback;   // empty on the first attempt
  std::string tried;      // empty on the first attempt
  // The lessons this task's own attempts taught (reflections on them), in the hot tier: the op
  // pack is fixed by the op's first prompt and a refine tail carries a few hundred tokens of
  // memory, so without it a run's own lessons seldom reached its later prompts.
  std::string learned;
};

// The hot tier's "Learned in this task" lines: each lesson's id, kind and title, and its text up
// to k_learned_text_bytes (at a clause); "" for none.
inline constexpr size_t k_learned_text_bytes = 480;
std::string render_learned(const std::vector<memory::Lesson>& lessons);

// Candidates for the warm and cold tiers, with the memory item each came from.
struct KnowledgeCandidates {
  std::vector<context::Item> warm;
  std::vector<context::Item> cold;
  std::map<std::string, double> scores;  // memory item id -> retrieval score (for the retrieval log)
  // The op pack (agent/forms.h): fixed at the op's first prompt, shown in its per-op part, its
  // items admitted (and credited) in every prompt of the op.
  std::vector<context::Item> op_pack;
  std::string op_pack_text;
  // What memory says of refinements of the op's category here, fixed with the op pack
  // (refine_evidence; the evidence stop rule's input).
  std::optional<run::RefineEvidence> evidence;
  // random mode: the active candidates whose admitted token count the random control matches.
  std::vector<context::Item> match_warm, match_cold;
};

// Sorts retrieved memory into tiers and sections, each item as its text (render_item, agent/
// memory_items.h), keeping only what is likely to change this attempt's outcome (docs/design.md
// §5, relevance):
//   warm — items of the state query about this op or its category, and lessons of any op;
//   cold — other-category items of the state query, items only the broad query found, and the
//          library's notes that apply to this op's category and stage;
//   left out — another op's kernel source unless its computation is structurally close
//          (RetrievedItem::structurally_close), lessons scoped to another category without a
//          positive learned value, notes that do not apply, and notes in `shown_notes` (shown
//          in this task's earlier prompts).
// Section: native best kernels "kernels", native case summaries "cases", native lessons
// "lessons", anything foreign "feasibility", cold "notes". Values are scores scaled to [0, 1];
// a lesson's is weighted by its learned value for the stage. Notes are valued by how many words
// of the task they mention, at least 0.2 for a note that names this op's category. Every
// candidate carries its score parts and the reason it is offered (context::Item::parts,
// reason). `category_of` maps an op name to its category when known; items whose id is in
// `exclude` (this task's own attempts, already in the hot tier) are left out.
KnowledgeCandidates classify_knowledge(const std::vector<memory::RetrievedItem>& state_items,
                                       const std::vector<memory::RetrievedItem>& broad_items, const spec::OpSpec& op,
                                       memory::Stage stage, const PromptLibrary& lib, const SharedEstimator& estimator,
                                       const std::function<std::optional<std::string>(std::string_view)>& category_of,
                                       const std::set<std::string>& exclude = {},
                                       const std::set<std::string>& shown_notes = {});

// How a foreign item's text begins: "(recorded on <target>, not timed here) ".
inline constexpr std::string_view k_foreign_prefix = "(recorded on ";

// What makes two knowledge items the same for a reader (an item is never shown twice in one
// prompt): the code they show when they show code, else their text without the list marker,
// the foreign item's prefix (k_foreign_prefix) and the bracketed header (ids, scores).
std::string knowledge_content_key(std::string_view item_text);

struct AssembledPrompt {
  std::vector<llm::Message> messages;  // system, user
  std::map<std::string, int64_t> tier_tokens;  // "system", "hot", "warm", "cold"
  int64_t total_tokens = 0;       // estimated system + user
  int64_t limit = 0;              // W − G
  int64_t knowledge_budget = 0;   // B_k
  std::vector<std::pair<std::string, double>> memory_items;  // admitted memory items (id, score)
  std::vector<std::string> admitted;  // every admitted knowledge item id (notes included)
  std::vector<run::Admission> admission;  // why each admitted item is there (same order as `admitted`)
  int dropped = 0;                // candidates left out
  bool hot_truncated = false;     // a hot block had to be cut to fit the window
  double token_scale = 0;         // the estimator's scale every estimate of this prompt used
  // The cacheable prefix: the system message and the per-op part of the user message, identical
  // in every call of this op (a provider caches it). Its estimated tokens and a hash of its text.
  int64_t prefix_tokens = 0;
  std::string prefix_hash;
};

// Renders the prompt for `input` with the items `mode` admits under `budget` (window and
// generation from the model profile). Every prompt has three parts, in every mode: the system
// message (rules, toolchain, hardware guide), the per-op part that starts the user message
// (spec, signature, reference, op pack: byte-identical in every call of the op while its hot
// tier is not cut; `AssembledPrompt::prefix_*` and the user message's cache_prefix mark it),
// then the changing tail (attempt, stage, incumbent, feedback, tried-table, admitted memory).
// In active and random mode the stage's memory ceiling (Budget::memory_draft, _repair, _refine) applies. Fails with
// config when even a truncated hot tier does not fit W − G.
Result<AssembledPrompt> assemble_prompt(const PromptLibrary& lib, const PromptInput& input,
                                        const KnowledgeCandidates& knowledge, const context::Budget& budget,
                                        context::Mode mode, const SharedEstimator& estimator);

// What the hardware guide shows beyond the profile (the backend's row fills the device facts).
using HardwareGuide = eval::HardwareGuide;

// The guide for `backend` on this machine: CPUID, then the facts its row describes (the CPU
// toolchain's predefined macros, an OpenCL platform's probe). What cannot be found is left empty (never an error).
HardwareGuide describe_hardware_guide(std::string_view backend);

// Hot-tier text blocks.
std::string render_hardware(const HardwareProfile& hw, std::string_view toolchain, const HardwareGuide& guide = {});
std::string render_op_spec(const spec::OpSpec& op);
// `lang` is the code fence's language (code_language of the backend).
std::string render_incumbent(const Attempt& incumbent, std::string_view code, std::string_view lang = "cpp");

// A correct attempt's per-timed-case table: kernel time ± CI, reference, library, roofline,
// fraction of the roofline ("" when it has no timings).
std::string render_timings(const Attempt& a);
// The most source shown in one code block of a prompt (a kernel longer than this is cut at a
// line boundary, with a line saying so).
inline constexpr size_t k_max_code_shown = 24000;
// The largest diff shown in one prompt as a diff (whole hunks; the rest counted). The latest
// attempt's diff against the incumbent is shown whole or not at all (its code instead).
inline constexpr size_t k_max_diff_shown = 6000;

// The fence language of a backend's kernels (its row's; "cpp" for a name kope does not know).
std::string code_language(std::string_view backend);
// `code` in a fenced block of `lang`, ending with a newline.
std::string fence_code(std::string_view code, std::string_view lang);
// `text` cut to whole lines within `max_bytes` and `max_lines`, with a line saying how many
// lines were left out ("[... 12 more lines not shown ...]"); never cut inside a line (a first
// line longer than the limit is left out whole).
std::string cut_at_lines(std::string_view text, size_t max_bytes, size_t max_lines = SIZE_MAX);
// The longest prefix of `text` made of whole lines within `max_bytes` and `max_lines`: its
// length in bytes, and how many lines follow it (0: the whole text).
struct LinePrefix {
  size_t bytes = 0;
  size_t lines_left = 0;
};
LinePrefix whole_lines_within(std::string_view text, size_t max_bytes, size_t max_lines = SIZE_MAX);
// The latest attempt's outcome: verdict and message, trimmed diagnostics, first mismatch, and
// per-case timing deltas against the incumbent and the reference.
std::string render_feedback(const Attempt& latest, const Attempt* incumbent, std::string_view lang = "cpp");
// One row per attempt: iteration, stage, optimisation, how it ended. At most `max_rows` (the
// latest), with a line counting the omitted ones.
std::string render_tried(const std::vector<Attempt>& attempts, size_t max_rows = 30);
// "correct, 2.31x vs reference (new incumbent)", "compile_error: expected ';'".
std::string describe_outcome(const Attempt& a);

}  // namespace kope::agent
