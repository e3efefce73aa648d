// TEMPORARY: the small free functions of the eval contract, so the agent builds and is tested
// before the evaluator lands on main. Delete this file (and its CMake line) when
// merging main brings the real implementations.
#include "kope/eval.h"

namespace kope::eval {

std::string_view verdict_name(Verdict v) {
  switch (v) {
    case Verdict::correct: return "correct";
    case Verdict::wrong_result: return "wrong_result";
    case Verdict::compile_error: return "compile_error";
    case Verdict::runtime_error: return "runtime_error";
    case Verdict::timeout: return "timeout";
    case Verdict::resource_limit: return "resource_limit";
    case Verdict::rejected: return "rejected";
  }
  return "?";
}

std::optional<Verdict> parse_verdict(std::string_view s) {
  for (Verdict v : {Verdict::correct, Verdict::wrong_result, Verdict::compile_error, Verdict::runtime_error,
                    Verdict::timeout, Verdict::resource_limit, Verdict::rejected}) {
    if (verdict_name(v) == s) return v;
  }
  return std::nullopt;
}

}  // namespace kope::eval
