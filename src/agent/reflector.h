// agent/reflector.h — the loop's reflections: the model turns what happened into lessons.
//
// Three triggers (docs/design.md §1; the rules in loop.h): after() a notable attempt (a fix
// after a failure, or an improvement of at least notable_speedup over its parent), at_end()
// when the op ends, and resume() for a reflection a killed run logged but did not apply. Each
// reflection is keyed ("k<iteration>" or "end"), asked at most once (its prompt, answer and
// parsed deltas are logged: "prompt", "reflection") and applied at most once
// ("reflection_applied"; an add already in memory is not repeated). A failed reflection call is
// logged ("reflection_failed") and never stops the op. Nothing happens with reflection off or
// without a model.
#pragma once

#include <optional>
#include <string>

#include "agent/op_context.h"
#include "agent/reflect.h"

namespace kope::agent {

class Reflector {
 public:
  explicit Reflector(OpContext& ctx) : m_ctx(ctx) {}

  Status after(const Attempt& a);
  Status at_end(const std::string& stop_reason);
  // Applies every logged, unapplied reflection.
  Status resume();

 private:
  // What a reflection is about.
  struct Subject {
    std::string trigger;
    std::string summary;
    std::string code;     // fenced, may be empty
    std::string outcome;  // the latest attempt's outcome with its timings
    std::optional<int64_t> source_case;
  };

  Status reflect(const std::string& key, const Subject& subject);
  // Asks the model and logs its lessons; false when the call failed (logged).
  Result<bool> ask(const std::string& key, const Subject& subject);
  // The lessons in the op's scope for the prompt, retrieval's first.
  Result<std::string> lessons_in_scope(LessonContext& lessons);
  Status apply(ReflectionRecord& rec);
  std::string shown_code(const Attempt& a);

  OpContext& m_ctx;
};

}  // namespace kope::agent
