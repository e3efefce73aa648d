// Classifying failed attempts (FailureClass) from statuses, error bodies and transport errors.
#include <algorithm>
#include <array>
#include <chrono>

#include "llm/provider.h"
#include "llm/retry.h"
#include "util/strings.h"

namespace kope::llm {

std::string one_line(std::string_view text, size_t cap) {
  std::string out;
  out.reserve(std::min(text.size(), cap + 3));
  bool space = false;
  for (char c : text) {
    if (c == '\n' || c == '\r' || c == '\t' || c == ' ') {
      space = !out.empty();
      continue;
    }
    if (space) out.push_back(' ');
    space = false;
    if (out.size() >= cap) {
      out += "...";
      break;
    }
    out.push_back(c);
  }
  return redact(out);
}

int64_t json_int(const Json& j, std::string_view key) {
  if (!j.is_object()) return 0;
  auto it = j.find(key);
  if (it == j.end()) return 0;
  if (it->is_number_integer() || it->is_number_unsigned()) return it->get<int64_t>();
  if (it->is_number_float()) return static_cast<int64_t>(it->get<double>());
  return 0;
}

std::string json_string(const Json& j, std::string_view key) {
  if (!j.is_object()) return {};
  auto it = j.find(key);
  if (it == j.end() || !it->is_string()) return {};
  return it->get<std::string>();
}

namespace {

std::string scalar_text(const Json& j) {
  if (j.is_string()) return j.get<std::string>();
  if (j.is_number_integer() || j.is_number_unsigned()) return std::to_string(j.get<int64_t>());
  return {};
}

bool contains_any(std::string_view haystack, std::initializer_list<std::string_view> needles) {
  return std::any_of(needles.begin(), needles.end(), [&](std::string_view n) {
    return haystack.find(n) != std::string_view::npos;
  });
}

std::string lower_all(const ErrorBody& e) {
  return util::to_lower(e.message + " | " + e.type + " | " + e.code);
}

std::string describe(const ErrorBody& e) {
  std::string out = e.message;
  std::string tags;
  if (!e.code.empty()) tags = e.code;
  if (!e.type.empty() && e.type != e.code) tags += (tags.empty() ? "" : ", ") + e.type;
  if (!tags.empty()) out += (out.empty() ? "" : " ") + ("(" + tags + ")");
  return out;
}

std::optional<std::chrono::milliseconds> retry_after_of(const HttpResponse& r) {
  const auto now = std::chrono::system_clock::now();
  if (auto ms = r.header("retry-after-ms"); !ms.empty()) {
    if (auto v = parse_retry_after(ms, now)) return std::chrono::milliseconds(v->count() / 1000);
  }
  if (auto ra = r.header("retry-after"); !ra.empty()) return parse_retry_after(ra, now);
  return std::nullopt;
}

AttemptFailure make(FailureClass cls, int status, std::string message, bool retry,
                    std::string_view body = {}) {
  AttemptFailure f;
  f.error.cls = cls;
  f.error.http_status = status;
  f.error.message = redact(message);
  f.retry = retry;
  f.body = redact(body.substr(0, std::min(body.size(), k_error_body_cap)));
  return f;
}

}  // namespace

ErrorBody error_body_from_json(const Json& j) {
  ErrorBody e;
  if (!j.is_object()) return e;
  auto err = j.find("error");
  if (err != j.end() && err->is_object()) {
    e.structured = true;
    e.message = json_string(*err, "message");
    e.type = json_string(*err, "type");
    if (auto c = err->find("code"); c != err->end()) e.code = scalar_text(*c);
    // OpenRouter passes the upstream provider's own error text in metadata.raw.
    if (auto md = err->find("metadata"); md != err->end() && md->is_object()) {
      if (auto raw = md->find("raw"); raw != md->end()) {
        std::string r = raw->is_string() ? raw->get<std::string>() : raw->dump();
        if (!r.empty()) e.message += (e.message.empty() ? "" : ": ") + r;
      }
    }
  } else if (err != j.end() && err->is_string()) {
    e.structured = true;
    e.message = err->get<std::string>();
    e.type = json_string(j, "type");
  } else if (j.contains("message") &&
             (json_string(j, "object") == "error" || j.contains("type") || j.contains("code"))) {
    e.structured = true;
    e.message = json_string(j, "message");
    e.type = json_string(j, "type");
    if (auto c = j.find("code"); c != j.end()) e.code = scalar_text(*c);
  } else if (auto d = j.find("detail"); d != j.end()) {
    e.structured = true;
    e.message = d->is_string() ? d->get<std::string>() : d->dump();
  }
  e.message = one_line(e.message);
  return e;
}

ErrorBody parse_error_body(std::string_view body) {
  Json j = Json::parse(body, nullptr, false);
  if (!j.is_discarded()) {
    ErrorBody e = error_body_from_json(j);
    if (e.structured) return e;
  }
  ErrorBody e;
  e.message = one_line(body);
  return e;
}

bool is_context_length_error(const ErrorBody& e) {
  const std::string s = lower_all(e);
  return contains_any(
      s,
      {"context_length_exceeded", "exceed_context_size", "maximum context length", "context length",
       "context window", "context size", "context limit", "prompt is too long", "input is too long",
       "too many tokens", "exceeds the context", "reduce the length of", "too long for the model",
       "`inputs` tokens + `max_new_tokens`", "request_too_large", "request too large"});
}

bool is_unknown_model_error(const ErrorBody& e) {
  const std::string s = lower_all(e);
  if (contains_any(s, {"model_not_found", "unknown model", "invalid model", "no such model",
                       "model not found"})) {
    return true;
  }
  return s.find("model") != std::string::npos &&
         contains_any(s, {"not found", "does not exist", "not exist"});
}

bool is_content_filter_error(const ErrorBody& e) {
  const std::string s = lower_all(e);
  return contains_any(s, {"content_filter", "content filter", "content_policy", "content policy",
                          "content management policy", "responsibleaipolicyviolation"});
}

bool is_quota_exhausted_error(const ErrorBody& e) {
  const std::string s = lower_all(e);
  return contains_any(
      s, {"insufficient_quota", "exceeded your current quota", "credit balance is too low",
          "insufficient balance", "insufficient credits"});
}

AttemptFailure classify_status(const HttpResponse& r, std::string_view host) {
  const int status = r.status;
  const ErrorBody eb = parse_error_body(r.body);
  const std::string detail = describe(eb);
  auto msg = [&](std::string_view what) {
    return fmt::format("HTTP {} {} from {}{}{}", status, what, host, detail.empty() ? "" : ": ",
                       detail);
  };
  AttemptFailure f;
  if (status >= 300 && status < 400) {
    std::string_view location = r.header("location");
    f = make(FailureClass::http_status, status,
             fmt::format("HTTP {} redirect from {} to {}: set base_url to the final address",
                         status, host, location.empty() ? "(no Location)" : location),
             false, r.body);
  } else if (status == 401 || status == 403) {
    f = make(FailureClass::unauthorized, status, msg(status == 401 ? "unauthorized" : "forbidden"),
             false, r.body);
  } else if (status == 429) {
    // Rate-limit texts talk about tokens too ("tokens per min"); only a request larger than the
    // limit itself ("Request too large ... must be reduced") needs a smaller prompt.
    const std::string s = util::to_lower(eb.message + " " + eb.code);
    if (s.find("request too large") != std::string::npos ||
        s.find("context_length_exceeded") != std::string::npos) {
      f = make(FailureClass::context_length, status, msg("request too large for the limits"), false,
               r.body);
    } else if (is_quota_exhausted_error(eb)) {
      f = make(FailureClass::provider_error, status,
               msg("quota exhausted (add credit; retrying cannot help)"), false, r.body);
    } else {
      f = make(FailureClass::rate_limited, status, msg("rate limited"), true, r.body);
    }
  } else if (is_context_length_error(eb) || status == 413) {
    f = make(FailureClass::context_length, status, msg("context length exceeded"), false, r.body);
  } else if (status == 404) {
    f = make(FailureClass::not_found, status, msg("not found (unknown model or endpoint)"), false,
             r.body);
  } else if (status == 408 || status == 409) {
    f = make(FailureClass::http_status, status, msg(status == 408 ? "request timeout" : "conflict"),
             true, r.body);
  } else if (status >= 400 && status < 500) {
    if (is_content_filter_error(eb)) {
      f = make(FailureClass::content_filtered, status, msg("content filtered"), false, r.body);
    } else if (is_unknown_model_error(eb)) {
      f = make(FailureClass::not_found, status, msg("unknown model"), false, r.body);
    } else {
      f = make(FailureClass::bad_request, status, msg("bad request"), false, r.body);
    }
  } else if (status >= 500 && status < 600) {
    f = make(FailureClass::server_error, status, msg("server error"), true, r.body);
  } else {
    f = make(FailureClass::http_status, status, msg("unexpected status"), false, r.body);
  }
  if (f.retry) f.retry_after = retry_after_of(r);
  return f;
}

AttemptFailure classify_error_object(const Json& j, std::string_view host) {
  const ErrorBody eb = error_body_from_json(j);
  const std::string detail = describe(eb);
  const std::string lower_type = util::to_lower(eb.type);
  int code = 0;
  if (!eb.code.empty() &&
      std::all_of(eb.code.begin(), eb.code.end(), [](char c) { return c >= '0' && c <= '9'; }) &&
      eb.code.size() <= 3) {
    code = std::stoi(eb.code);
  }
  auto msg = [&](std::string_view what) {
    return fmt::format("{} from {}: {}", what, host, detail);
  };
  const std::string body = j.dump(-1, ' ', false, Json::error_handler_t::replace);
  if (is_context_length_error(eb))
    return make(FailureClass::context_length, code, msg("context length exceeded"), false, body);
  if (is_content_filter_error(eb))
    return make(FailureClass::content_filtered, code, msg("content filtered"), false, body);
  if (is_quota_exhausted_error(eb))
    return make(FailureClass::provider_error, code, msg("quota exhausted"), false, body);
  if (code == 429 || lower_type == "rate_limit_error") {
    return make(FailureClass::rate_limited, code, msg("rate limited (error in the response body)"),
                true, body);
  }
  if (code >= 500 || lower_type == "overloaded_error" || lower_type == "api_error" ||
      lower_type == "server_error") {
    return make(FailureClass::server_error, code, msg("server error (error in the response body)"),
                true, body);
  }
  if (code == 401 || code == 403 || lower_type == "authentication_error" ||
      lower_type == "permission_error") {
    return make(FailureClass::unauthorized, code, msg("unauthorized"), false, body);
  }
  if (is_unknown_model_error(eb))
    return make(FailureClass::not_found, code, msg("unknown model"), false, body);
  return make(FailureClass::provider_error, code, msg("provider error"), false, body);
}

AttemptFailure classify_http_error(const HttpError& e) {
  switch (e.kind) {
    case HttpFailure::timeout:
      return make(FailureClass::timeout, e.status, e.message, true, e.partial_body);
    case HttpFailure::truncated:
      return make(FailureClass::malformed, e.status, e.message, true, e.partial_body);
    case HttpFailure::cancelled:
      return make(FailureClass::cancelled, e.status, e.message, false);
    case HttpFailure::transport:
      break;
  }
  return make(FailureClass::transport, e.status, e.message, true, e.partial_body);
}

AttemptFailure malformed(std::string message, bool retry, std::string_view body) {
  return make(FailureClass::malformed, 0, std::move(message), retry, body);
}

}  // namespace kope::llm
