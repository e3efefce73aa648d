// run/policy.h — how an op's candidates are proposed: by the model or replayed from memory.
//
// The names "llm" and "replay" are the form config.json, the event log, results.json and the
// CLI (--policy) use; inside kope the policy travels as this enum.
#pragma once

#include <optional>
#include <string_view>

namespace kope::run {

enum class Policy {
  llm,     // the model writes each candidate
  replay,  // kernels from memory (this op's, related ops', imported ones) are re-verified here
};

// "llm" or "replay".
std::string_view policy_name(Policy p);
// The policy named `name`; nullopt for any other string.
std::optional<Policy> parse_policy(std::string_view name);

}  // namespace kope::run
