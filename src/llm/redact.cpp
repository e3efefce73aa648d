// The one place where API keys are removed from text (kope/llm.h: register_secret, redact).
//
// Hand-written scanners rather than std::regex: transcript lines can be megabytes long and
// libstdc++'s regex recurses per character.
#include <algorithm>
#include <array>
#include <cctype>
#include <shared_mutex>

#include "kope/llm.h"

namespace kope::llm {

namespace {

constexpr std::string_view k_redacted = "[REDACTED]";
constexpr size_t k_min_secret_length = 8;
constexpr size_t k_min_sk_key_length = 16;  // characters after "sk-"

struct SecretRegistry {
  std::shared_mutex mutex;
  std::vector<std::string> secrets;  // longest first
};

SecretRegistry& registry() {
  static SecretRegistry r;
  return r;
}

bool token_char(char c) {
  auto u = static_cast<unsigned char>(c);
  return std::isalnum(u) != 0 || c == '-' || c == '_' || c == '.' || c == '~' || c == '+' ||
         c == '/' || c == '=';
}

bool key_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '-' || c == '_';
}

bool iequals_at(std::string_view text, size_t pos, std::string_view word) {
  if (pos + word.size() > text.size()) return false;
  for (size_t i = 0; i < word.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(text[pos + i])) != word[i]) return false;
  }
  return true;
}

void replace_secrets(std::string& s) {
  auto& r = registry();
  std::shared_lock lock(r.mutex);
  for (const auto& secret : r.secrets) {
    size_t pos = 0;
    while ((pos = s.find(secret, pos)) != std::string::npos) {
      s.replace(pos, secret.size(), k_redacted);
      pos += k_redacted.size();
    }
  }
}

// "Bearer <token>" (any case): the token goes.
std::string redact_bearer(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    if (iequals_at(s, i, "bearer") && (i == 0 || !key_char(s[i - 1]))) {
      size_t j = i + 6;
      size_t ws = j;
      while (j < s.size() && (s[j] == ' ' || s[j] == '\t')) ++j;
      size_t tok = j;
      while (j < s.size() && token_char(s[j])) ++j;
      if (j > ws && tok > ws && j - tok >= k_min_secret_length) {
        out.append(s.substr(i, tok - i));
        out.append(k_redacted);
        i = j;
        continue;
      }
    }
    out.push_back(s[i]);
    ++i;
  }
  return out;
}

// "sk-" followed by at least 16 key characters (OpenAI, Anthropic "sk-ant-...", DeepSeek, ...).
std::string redact_sk_keys(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    if (s.compare(i, 3, "sk-") == 0 && (i == 0 || !key_char(s[i - 1]))) {
      size_t j = i + 3;
      while (j < s.size() && key_char(s[j])) ++j;
      if (j - (i + 3) >= k_min_sk_key_length) {
        out.append(k_redacted);
        i = j;
        continue;
      }
    }
    out.push_back(s[i]);
    ++i;
  }
  return out;
}

// Key-like URL query parameters and header-like "name: value" / "name": "value" pairs.
std::string redact_named_values(std::string_view s) {
  static constexpr std::array<std::string_view, 9> k_query_names = {
      "key=",          "api_key=", "api-key=", "apikey=",   "token=",
      "access_token=", "auth=",    "sig=",     "signature="};
  static constexpr std::array<std::string_view, 4> k_header_names = {
      "x-api-key", "api-key", "x-goog-api-key", "authorization"};
  std::string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    bool done = false;
    if ((s[i] == '?' || s[i] == '&') && i + 1 < s.size()) {
      for (auto name : k_query_names) {
        if (iequals_at(s, i + 1, name)) {
          size_t j = i + 1 + name.size();
          size_t v = j;
          while (j < s.size() && s[j] != '&' && s[j] != '#' && s[j] != '"' && s[j] != '\'' &&
                 s[j] != '<' && s[j] != '>' &&
                 std::isspace(static_cast<unsigned char>(s[j])) == 0) {
            ++j;
          }
          out.append(s.substr(i, v - i));
          if (j > v) out.append(k_redacted);
          i = j;
          done = true;
          break;
        }
      }
    }
    if (!done && (i == 0 || !key_char(s[i - 1]))) {
      for (auto name : k_header_names) {
        if (!iequals_at(s, i, name)) continue;
        size_t j = i + name.size();
        if (j < s.size() && key_char(s[j])) continue;  // a longer word
        size_t sep = j;
        while (j < s.size() &&
               (s[j] == '"' || s[j] == '\'' || s[j] == ' ' || s[j] == ':' || s[j] == '='))
          ++j;
        bool has_separator = s.substr(sep, j - sep).find_first_of(":=") != std::string_view::npos;
        if (!has_separator) continue;
        // "Authorization: Bearer x": keep the scheme word, redact what follows it.
        size_t v = j;
        if (iequals_at(s, v, "bearer ") || iequals_at(s, v, "basic ")) {
          v = s.find(' ', v) + 1;
          while (v < s.size() && s[v] == ' ') ++v;
        }
        size_t e = v;
        while (e < s.size() && token_char(s[e])) ++e;
        if (e - v < k_min_secret_length) continue;  // too short for a key ("api-key: set")
        out.append(s.substr(i, v - i));
        out.append(k_redacted);
        i = e;
        done = true;
        break;
      }
    }
    if (!done) {
      out.push_back(s[i]);
      ++i;
    }
  }
  return out;
}

}  // namespace

void register_secret(std::string_view secret) {
  if (secret.size() < k_min_secret_length) return;
  auto& r = registry();
  std::unique_lock lock(r.mutex);
  if (std::find(r.secrets.begin(), r.secrets.end(), secret) != r.secrets.end()) return;
  r.secrets.emplace_back(secret);
  std::sort(r.secrets.begin(), r.secrets.end(),
            [](const std::string& a, const std::string& b) { return a.size() > b.size(); });
}

std::string redact(std::string_view text) {
  std::string s(text);
  replace_secrets(s);
  s = redact_bearer(s);
  s = redact_sk_keys(s);
  s = redact_named_values(s);
  return s;
}

}  // namespace kope::llm
