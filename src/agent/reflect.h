// agent/reflect.h — distilling lessons from what just happened.
//
// After each operator and after notable steps (a fix after a failure, a large speedup) the agent
// asks the model for at most three lesson operations (add/edit/upvote/downvote/deprecate) as a
// JSON object. parse_lessons() reads the answer leniently (code fences, prose around the JSON,
// a bare array, `//` comments, trailing commas, "op" for "action", "lesson:" prefixes on ids)
// and turns it into memory::LessonDelta values; votes and edits are accepted only for lesson ids
// that were shown to the model, so invented ids cannot touch memory. Pure, thread-safe.
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

struct ReflectionInput {
  const spec::OpSpec* op = nullptr;
  std::string backend;
  std::string target;
  std::string trigger;   // "attempt 4 fixed the failure of attempt 3", "the task ended"
  std::string summary;   // what happened, with numbers
  std::string tried;     // the tried-table
  std::string code;      // the code in question (fenced), may be empty
  std::string existing;  // lessons already in memory, one per line with their ids
};

Result<std::vector<llm::Message>> build_reflection_prompt(const PromptLibrary& lib, const ReflectionInput& in);

// Where parsed lessons belong and what they came from.
struct LessonContext {
  std::string category;
  std::string backend;
  std::string target;
  std::string toolchain;
  std::set<std::string> known_ids;     // lesson ids shown to the model (without "lesson:")
  std::optional<int64_t> source_case;
  std::string reason;                  // recorded with every delta
};

struct ParsedLessons {
  bool parsed = false;                 // a JSON object or array was found
  std::vector<memory::LessonDelta> deltas;  // at most k_max_lessons_per_reflection
  std::vector<std::string> problems;   // entries skipped, and why
};

ParsedLessons parse_lessons(std::string_view answer, const LessonContext& ctx);

}  // namespace kope::agent
