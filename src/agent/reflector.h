// agent/reflector.h — the loop's reflections: the model turns what happened into lessons.
//
// Three triggers (docs/design.md §1; the rules in loop.h): after() a notable attempt (a fix
// after a failure, an improvement of at least notable_speedup over its parent, or the second
// correct attempt in a row that did not replace the incumbent), at_end()
// when the op ends, and resume() for a reflection a killed run logged but did not apply.
//
// At most one reflection per (trigger, attempt): each is keyed, "k<iteration>" for the notable
// attempt it is about and "end" for the task (its best kernel and its last attempt), and a key
// whose answer is logged ("reflection") is never asked again, by this process or a resumed one;
// a key whose answer never reached the log (the call failed, or the run was killed while it
// ran) is asked again when the trigger recurs on resume, as a kernel prompt is. The two
// triggers can concern the same attempt (the last attempt was notable, and is the best kernel
// the end reflection shows): the later reflection is then told so, and every reflection shows
// the lessons this task's earlier reflections wrote or voted on, whole and first (in every
// context mode), so that it edits them rather than adding them again. Lessons drawn from a
// held-out op's experience of another run (OpEnvironment::holdout) are never shown.
//
// A reflection about a failed attempt (the failure a fix followed; the last attempt at the end
// when it failed) shows that attempt's code (whole lines, capped, with a "(N more lines not
// shown)" note), what the evaluator reported (message, first mismatch, diagnostics) and its
// error signature, which a fix lesson names.
//
// Each reflection's prompt, answer and parsed deltas are logged ("prompt", "reflection" with
// the key, the trigger and the attempt it is about) and applied at most once
// ("reflection_applied"; an add already in memory is not repeated). A failed reflection call is
// logged ("reflection_failed") and never stops the op. Nothing happens with reflection off or
// without a model.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "agent/op_context.h"
#include "agent/reflect.h"

namespace kope::agent {

// The most lines of one attempt's code a reflection shows (and at most k_max_code_shown bytes).
inline constexpr size_t k_reflection_code_lines = 400;

// `code` fenced in `lang` when it has at most `max_lines` lines and `max_bytes` bytes; else no
// code at all, one line saying how long it is (a reflection never shows a kernel cut short: the
// part left out could be where the speed or the fault was). Pure.
std::string fence_code_whole(std::string_view code, std::string_view lang, size_t max_lines, size_t max_bytes);

class Reflector {
 public:
  explicit Reflector(OpContext& ctx) : m_ctx(ctx) {}

  Status after(const Attempt& a);
  Status at_end(const std::string& stop_reason, const std::string& stop_detail);
  // Applies every logged, unapplied reflection.
  Status resume();

 private:
  // What a reflection is about.
  struct Subject {
    std::string trigger;
    int attempt = 0;       // the attempt it is about (the end: the best kernel, else the last)
    std::string summary;
    std::string code;      // fenced, may be empty
    std::string failure;   // what a failed attempt reported, with its signature; may be empty
    std::string failure_signature;
    std::string outcome;   // outcomes with their timings
    std::optional<int64_t> source_case;
  };

  Status reflect(const std::string& key, Subject subject);
  // Asks the model and logs its lessons; false when the call failed (logged).
  Result<bool> ask(const std::string& key, const Subject& subject);
  // The lesson blocks of the prompt: this task's own (from its earlier reflections) and the
  // others in the op's scope (retrieval's first), with the ids `lessons` may vote on and edit.
  Status lessons_for_prompt(const std::string& key, ReflectionInput& in, LessonContext& lessons);
  Status apply(const ReflectionRecord& rec);
  // The code of `a` as a titled, fenced block; "" when it has none.
  std::string code_block(const Attempt& a, const std::string& title);
  // What failed attempt `a` reported, and its error signature (into `subject`).
  void describe_failure(const Attempt& a, Subject& subject);

  OpContext& m_ctx;
};

}  // namespace kope::agent
