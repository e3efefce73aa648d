// kope/verdict.h — what the evaluator concluded about a candidate (docs/design.md §3).
//
// The verdict travels through kope as this enum: the evaluator's result, the loop's attempts,
// the memory's cases, the reports. Its names ("wrong_result") are the form JSON, SQL and the CLI
// use; verdict_name and parse_verdict are the one pair that converts, at those edges only.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kope::eval {

enum class Verdict {
  correct,         // compiled, matched the reference on every case, timed (when asked)
  wrong_result,    // ran, but an output differs (first mismatch reported)
  compile_error,   // the compiler rejected it (or ran out of its limits)
  runtime_error,   // crashed (signal named), exited, or wrote outside its buffers
  timeout,         // exceeded the wall-clock or CPU-time limit
  resource_limit,  // exceeded memory, file-size, process or output limits
  rejected,        // broke a rule: forbidden symbol/syscall, constructor, input mutation,
                   // time below the roofline floor, results that depend on call history
  bad_answer,      // never evaluated: the model's answer could not be turned into a candidate
                   // (edits that do not apply to the incumbent, edits without an incumbent,
                   // both a whole kernel and edits); set by the loop, not the evaluator
};

std::string_view verdict_name(Verdict v);  // "wrong_result"
// The verdict named `s`; nullopt for any other string.
std::optional<Verdict> parse_verdict(std::string_view s);
// Every verdict's name in declaration order (for a CLI option's allowed values).
std::vector<std::string> verdict_name_list();
// The same names joined by ", " (for messages naming the choices).
std::string_view verdict_names();

}  // namespace kope::eval
