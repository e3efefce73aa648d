// agent/reflect.h — distilling lessons from what just happened.
//
// After each operator and after notable steps (a fix after a failure, a large speedup) the agent
// asks the model for at most three lesson operations (add/edit/upvote/downvote/deprecate) as a
// JSON object. parse_lessons() reads the answer leniently (code fences, prose around the JSON,
// a bare array, `//` comments, trailing commas, "op" for "action", "lesson:" prefixes on ids)
// and turns it into memory::LessonDelta values; votes and edits are accepted only for lesson ids
// that were shown to the model, so invented ids cannot touch memory. A lesson that is not a fix
// keeps no error signature; a fix without one gets the signature of the failure shown.
// Pure, thread-safe.
#pragma once

#include <optional>
#include <set>
#include <string>
#include <vector>

#include "agent/prompt.h"
#include "kope/llm.h"
#include "kope/memory.h"
#include "kope/spec.h"

namespace kope::agent {

inline constexpr size_t k_max_lessons_per_reflection = 3;
// The longest lesson title and text a reflection may write (an add or an edit); the reflection
// prompt states both, and a longer one is cut at a clause boundary (util::shorten_at_clause).
inline constexpr size_t k_max_lesson_title_chars = 120;
inline constexpr size_t k_max_lesson_text_chars = 1200;

struct ReflectionInput {
  const spec::OpSpec* op = nullptr;
  std::string backend;
  std::string target;
  std::string trigger;   // "attempt 4 fixed the failure of attempt 3", "the task ended"
  std::string summary;   // what happened, with numbers
  std::string tried;     // the tried-table
  std::string code;      // the code in question (fenced), may be empty
  // What a failed attempt the reflection is about reported (its outcome, evaluator message,
  // first mismatch, diagnostics) and its error signature; empty when none failed.
  std::string failure;
  std::string outcome;   // outcomes with per-case timings, may be empty
  // Lessons this task's earlier reflections wrote or voted on (render_lessons_in_scope, whole);
  // shown in every context mode, so a later reflection edits them instead of repeating them.
  std::string task_lessons;
  std::string existing;  // the other lessons already in memory (render_lessons_in_scope), may be empty
  bool memory = true;    // false in mode none: no lessons from memory but the task's own
};

// The "lessons already in memory" block of a reflection prompt: every lesson in `in_scope`
// (the store's active lessons for the op's scope) by id; the first `whole` of them, in the
// given order, shown whole (title, text, error signature) — those may be edited — and the rest
// by id and title, for votes. `editable` receives the ids shown whole, `listed` every id.
std::string render_lessons_in_scope(const std::vector<memory::Lesson>& in_scope, size_t whole,
                                    std::set<std::string>* listed, std::set<std::string>* editable);
// A reflection shows the other lessons in scope that retrieval ranks first: this many whole, and
// up to k_lessons_listed in all (whole or by title). Twelve whole lessons made up a third of a
// reflection prompt (about 2,000 tokens) in the real-model ablation of issue 28; few of them were
// voted on or edited. With four whole, over the two active runs of 2026-12-06 (28 reflections):
// 9 of the 10 edits went to the first two, and votes went to every position, the title-only ones
// included. So two are shown whole; the third and fourth (about 650 tokens) are listed by title.
inline constexpr size_t k_lessons_shown_whole = 2;
inline constexpr size_t k_lessons_listed = 16;

Result<std::vector<llm::Message>> build_reflection_prompt(const PromptLibrary& lib, const ReflectionInput& in);

// Where parsed lessons belong and what they came from.
struct LessonContext {
  std::string category;
  std::string backend;
  std::string target;
  std::string toolchain;
  std::set<std::string> known_ids;     // lesson ids shown to the model (without "lesson:")
  // Ids whose whole text was shown: only these may be edited (nullopt: every known id).
  std::optional<std::set<std::string>> editable_ids;
  std::optional<int64_t> source_case;
  std::string reason;                  // recorded with every delta
  // The error signature of the failure the prompt showed (ReflectionInput::failure), if any: a
  // fix lesson that names no signature gets this one.
  std::string failure_signature;
};

struct ParsedLessons {
  bool parsed = false;                 // a JSON object or array was found
  std::vector<memory::LessonDelta> deltas;  // at most k_max_lessons_per_reflection
  std::vector<std::string> problems;   // entries skipped, and why
};

ParsedLessons parse_lessons(std::string_view answer, const LessonContext& ctx);

}  // namespace kope::agent
