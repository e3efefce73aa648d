// TEMPORARY: the small free functions of the eval/memory/llm contracts, so the agent builds and
// is tested before those modules land on main. Delete this file (and its CMake line) when
// merging main brings the real implementations. (The memory part went when the report branch
// merged the memory branch, which defines those functions in src/memory/text.cpp.)
#include "kope/eval.h"
#include "kope/llm.h"

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

namespace kope::llm {

std::string_view failure_class_name(FailureClass c) {
  switch (c) {
    case FailureClass::transport: return "transport";
    case FailureClass::timeout: return "timeout";
    case FailureClass::http_status: return "http_status";
    case FailureClass::rate_limited: return "rate_limited";
    case FailureClass::server_error: return "server_error";
    case FailureClass::unauthorized: return "unauthorized";
    case FailureClass::not_found: return "not_found";
    case FailureClass::bad_request: return "bad_request";
    case FailureClass::provider_error: return "provider_error";
    case FailureClass::context_length: return "context_length";
    case FailureClass::content_filtered: return "content_filtered";
    case FailureClass::malformed: return "malformed";
    case FailureClass::cancelled: return "cancelled";
  }
  return "?";
}

bool LlmError::retryable() const {
  return cls == FailureClass::transport || cls == FailureClass::timeout || cls == FailureClass::rate_limited ||
         cls == FailureClass::server_error;
}

int64_t estimate_tokens(std::string_view text) { return static_cast<int64_t>((text.size() + 3) / 4); }

}  // namespace kope::llm
