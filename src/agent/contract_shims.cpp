// TEMPORARY: the small free functions of the eval and memory contracts, so the agent builds and
// is tested before those modules land on main. Delete this file (and its CMake line) when
// merging main brings the real implementations.
#include "kope/eval.h"
#include "kope/memory.h"

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

namespace kope::memory {

std::string_view stage_name(Stage s) {
  switch (s) {
    case Stage::draft: return "draft";
    case Stage::repair: return "repair";
    case Stage::refine: return "refine";
  }
  return "?";
}

std::optional<Stage> parse_stage(std::string_view s) {
  if (s == "draft") return Stage::draft;
  if (s == "repair") return Stage::repair;
  if (s == "refine") return Stage::refine;
  return std::nullopt;
}

std::string_view outcome_name(Outcome o) {
  switch (o) {
    case Outcome::effective: return "effective";
    case Outcome::partial: return "partial";
    case Outcome::ineffective: return "ineffective";
    case Outcome::negative: return "negative";
  }
  return "?";
}

Outcome outcome_for_ratio(double r) {
  if (r >= 1.05) return Outcome::effective;
  if (r >= 1.0) return Outcome::partial;
  if (r >= 0.85) return Outcome::ineffective;
  return Outcome::negative;
}

}  // namespace kope::memory
