#include "memory/text.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <chrono>
#include <cmath>
#include <ctime>

#include <fmt/format.h>

#include "eval/stats.h"
#include "kope/memory.h"

namespace kope::memory {

namespace {

constexpr std::array<std::string_view, 34> k_stop_words = {
    "the", "an", "of", "to", "in", "is", "it", "and", "or", "for", "on", "with", "this",
    "that", "was", "be", "as", "at", "by", "from", "are", "were", "its", "into", "than",
    "then", "so", "if", "we", "our", "has", "have", "had", "but"};

bool is_stop_word(std::string_view w) {
  return std::find(k_stop_words.begin(), k_stop_words.end(), w) != k_stop_words.end();
}

bool is_word_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_';
}

std::string collapse_spaces(std::string_view s) {
  std::string out;
  bool space = false;
  for (char c : s) {
    if (std::isspace(static_cast<unsigned char>(c))) {
      space = true;
      continue;
    }
    if (space && !out.empty()) out += ' ';
    space = false;
    out += c;
  }
  return out;
}

// Replaces quoted spans ('x', ‘x’, "x", `x') with 'X'.
std::string mask_quotes(std::string_view s) {
  static const std::string k_open_utf8 = "\xE2\x80\x98";   // ‘
  static const std::string k_close_utf8 = "\xE2\x80\x99";  // ’
  std::string out;
  size_t i = 0;
  while (i < s.size()) {
    if (s.compare(i, k_open_utf8.size(), k_open_utf8) == 0) {
      size_t end = s.find(k_close_utf8, i + k_open_utf8.size());
      if (end != std::string_view::npos && end - i < 400) {
        out += "'X'";
        i = end + k_close_utf8.size();
        continue;
      }
    }
    char c = s[i];
    if (c == '\'' || c == '"' || c == '`') {
      char close = c == '`' ? '\'' : c;
      size_t end = s.find(close, i + 1);
      if (end != std::string_view::npos && end - i < 400) {
        out += "'X'";
        i = end + 1;
        continue;
      }
    }
    out += c;
    ++i;
  }
  return out;
}

// Replaces standalone numbers (decimal, hex, floats with exponents) with N and path-like tokens
// (containing '/') with <path>.
std::string mask_numbers_and_paths(std::string_view s) {
  std::string out;
  size_t i = 0;
  while (i < s.size()) {
    char c = s[i];
    bool prev_word = !out.empty() && is_word_char(out.back());
    // A path: a run of non-space characters containing '/'.
    if (!std::isspace(static_cast<unsigned char>(c)) && !prev_word) {
      size_t j = i;
      while (j < s.size() && !std::isspace(static_cast<unsigned char>(s[j])) && s[j] != '\'' &&
             s[j] != ':' && s[j] != ',' && s[j] != '(' && s[j] != ')') {
        ++j;
      }
      std::string_view tok = s.substr(i, j - i);
      if (tok.find('/') != std::string_view::npos && tok.size() > 1) {
        out += "<path>";
        i = j;
        continue;
      }
    }
    if (std::isdigit(static_cast<unsigned char>(c)) && !prev_word) {
      size_t j = i;
      if (c == '0' && j + 1 < s.size() && (s[j + 1] == 'x' || s[j + 1] == 'X')) {
        j += 2;
        while (j < s.size() && std::isxdigit(static_cast<unsigned char>(s[j]))) ++j;
      } else {
        while (j < s.size() && (std::isdigit(static_cast<unsigned char>(s[j])) || s[j] == '.')) ++j;
        if (j < s.size() && (s[j] == 'e' || s[j] == 'E') && j + 1 < s.size() &&
            (std::isdigit(static_cast<unsigned char>(s[j + 1])) || s[j + 1] == '-' || s[j + 1] == '+')) {
          j += 2;
          while (j < s.size() && std::isdigit(static_cast<unsigned char>(s[j]))) ++j;
        }
      }
      // Keep suffixes such as "f" or "ul" with the number.
      while (j < s.size() && std::isalpha(static_cast<unsigned char>(s[j])) && j - i < 24) ++j;
      out += 'N';
      i = j;
      continue;
    }
    out += c;
    ++i;
  }
  return out;
}

std::string normalise_line(std::string_view line) {
  std::string s = mask_quotes(line);
  s = mask_numbers_and_paths(s);
  s = collapse_spaces(s);
  if (s.size() > 200) s = clip_text(s, 200);
  return s;
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

bool contains_token(std::string_view text, std::string_view token) {
  std::string t = lower(text);
  size_t pos = 0;
  while ((pos = t.find(token, pos)) != std::string::npos) {
    bool left = pos == 0 || !std::isalpha(static_cast<unsigned char>(t[pos - 1]));
    size_t end = pos + token.size();
    bool right = end >= t.size() || !std::isalpha(static_cast<unsigned char>(t[end]));
    if (left && right) return true;
    pos = end;
  }
  return false;
}

std::vector<std::string_view> lines_of(std::string_view s) {
  std::vector<std::string_view> out;
  size_t start = 0;
  while (start <= s.size()) {
    size_t end = s.find('\n', start);
    if (end == std::string_view::npos) end = s.size();
    out.push_back(s.substr(start, end - start));
    if (end == s.size()) break;
    start = end + 1;
  }
  return out;
}

// The part of a compiler line from its "error" keyword on ("fatal error: ..." included),
// or npos when the line is not an error line.
size_t error_keyword_pos(std::string_view line) {
  for (std::string_view key : {"fatal error:", "error:", "Error:", "error ", "error("}) {
    size_t p = line.find(key);
    if (p == std::string_view::npos) continue;
    if (key == "error " || key == "error(") {
      // nvcc/clang style "... error #20: ..." or MSVC-like; require a location before it.
      if (p == 0 || line.find(':') == std::string_view::npos) continue;
    }
    return p;
  }
  return std::string_view::npos;
}

std::string compile_signature(std::string_view message, std::string_view diagnostics) {
  for (std::string_view src : {diagnostics, message}) {
    for (std::string_view line : lines_of(src)) {
      size_t p = error_keyword_pos(line);
      if (p == std::string_view::npos) continue;
      std::string body = normalise_line(line.substr(p));
      if (!body.empty()) return "compile_error: " + body;
    }
  }
  for (std::string_view src : {diagnostics, message}) {
    for (std::string_view line : lines_of(src)) {
      std::string body = normalise_line(line);
      // Drop a leading location such as "file.cpp:N:N:" left after masking.
      size_t colon = body.find(": ");
      if (colon != std::string::npos && body.substr(0, colon).find(':') != std::string::npos) {
        body = body.substr(colon + 2);
      }
      if (!body.empty()) return "compile_error: " + body;
    }
  }
  return "compile_error";
}

std::string signal_in(std::string_view text) {
  for (size_t p = text.find("SIG"); p != std::string_view::npos; p = text.find("SIG", p + 3)) {
    if (p > 0 && std::isalnum(static_cast<unsigned char>(text[p - 1]))) continue;
    size_t e = p + 3;
    while (e < text.size() && std::isupper(static_cast<unsigned char>(text[e]))) ++e;
    if (e - p >= 5) return std::string(text.substr(p, e - p));
  }
  return {};
}

}  // namespace

std::string_view stage_name(Stage s) {
  switch (s) {
    case Stage::draft: return "draft";
    case Stage::repair: return "repair";
    case Stage::refine: return "refine";
  }
  return "draft";
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
  return "negative";
}

std::optional<Outcome> parse_outcome(std::string_view s) {
  if (s == "effective") return Outcome::effective;
  if (s == "partial") return Outcome::partial;
  if (s == "ineffective") return Outcome::ineffective;
  if (s == "negative") return Outcome::negative;
  return std::nullopt;
}

Outcome outcome_for_ratio(double r) {
  if (std::isnan(r)) return Outcome::negative;
  if (r >= 1.05) return Outcome::effective;
  if (r >= 1.0) return Outcome::partial;
  if (r >= 0.85) return Outcome::ineffective;
  return Outcome::negative;
}

RetrievedLesson retrieved_lesson(const Lesson& l) {
  RetrievedLesson r;
  r.id = l.id;
  r.kind = l.kind;
  r.title = l.title;
  r.text = l.text;
  r.scope = l.scope;
  r.error_signature = l.error_signature;
  r.helpful = l.helpful;
  r.harmful = l.harmful;
  return r;
}

void set_lesson_evidence(RetrievedLesson& l, const std::vector<std::vector<CaseTimingRecord>>& source_timings) {
  std::vector<double> spreads;
  int disturbed = 0;
  for (const auto& timings : source_timings) {
    std::vector<double> rel;
    int marked = 0;
    for (const CaseTimingRecord& t : timings) {
      if (!(t.median_us > 0)) continue;
      rel.push_back(t.ci95_us / t.median_us);
      marked += t.disturbed ? 1 : 0;
    }
    if (rel.empty()) continue;
    spreads.push_back(eval::median(std::move(rel)));
    disturbed += 2 * marked > static_cast<int>(rel.size()) ? 1 : 0;
  }
  l.evidence_cases = static_cast<int>(spreads.size());
  l.evidence_spread.reset();
  l.evidence_disturbed = 0;
  if (spreads.empty()) return;
  l.evidence_spread = eval::median(spreads);
  l.evidence_disturbed = static_cast<double>(disturbed) / static_cast<double>(spreads.size());
}

std::string_view lesson_kind_name(LessonKind k) {
  switch (k) {
    case LessonKind::strategy: return "strategy";
    case LessonKind::pitfall: return "pitfall";
    case LessonKind::fix: return "fix";
    case LessonKind::recipe: return "recipe";
  }
  return "strategy";
}

std::optional<LessonKind> parse_lesson_kind(std::string_view s) {
  if (s == "strategy") return LessonKind::strategy;
  if (s == "pitfall") return LessonKind::pitfall;
  if (s == "fix") return LessonKind::fix;
  if (s == "recipe") return LessonKind::recipe;
  return std::nullopt;
}

std::string_view lesson_status_name(LessonStatus s) {
  switch (s) {
    case LessonStatus::active: return "active";
    case LessonStatus::quarantined: return "quarantined";
    case LessonStatus::deprecated: return "deprecated";
    case LessonStatus::merged: return "merged";
  }
  return "active";
}

std::optional<LessonStatus> parse_lesson_status(std::string_view s) {
  if (s == "active") return LessonStatus::active;
  if (s == "quarantined") return LessonStatus::quarantined;
  if (s == "deprecated") return LessonStatus::deprecated;
  if (s == "merged") return LessonStatus::merged;
  return std::nullopt;
}

namespace {

// The one name <-> status table.
constexpr std::pair<QuarantineStatus, std::string_view> k_quarantine_names[] = {
    {QuarantineStatus::none, ""},
    {QuarantineStatus::quarantined, "quarantined"},
    {QuarantineStatus::verified, "verified"},
    {QuarantineStatus::refuted, "refuted"},
};

}  // namespace

std::string_view quarantine_status_name(QuarantineStatus s) {
  for (const auto& [status, name] : k_quarantine_names) {
    if (status == s) return name;
  }
  return "";
}

std::optional<QuarantineStatus> parse_quarantine_status(std::string_view s) {
  for (const auto& [status, name] : k_quarantine_names) {
    if (name == s) return status;
  }
  return std::nullopt;
}

bool quarantine_holds_back(QuarantineStatus s) {
  return s == QuarantineStatus::quarantined || s == QuarantineStatus::refuted;
}

std::string_view delta_op_name(LessonDelta::Op op) {
  switch (op) {
    case LessonDelta::Op::add: return "add";
    case LessonDelta::Op::edit: return "edit";
    case LessonDelta::Op::upvote: return "upvote";
    case LessonDelta::Op::downvote: return "downvote";
    case LessonDelta::Op::deprecate: return "deprecate";
    case LessonDelta::Op::merge: return "merge";
  }
  return "add";
}

double stage_prior(Stage stage) { return stage == Stage::refine ? 0.0 : 0.5; }

double stage_reward(Stage stage, eval::Verdict verdict, double ratio) {
  const bool correct = verdict == eval::Verdict::correct;
  if (stage == Stage::refine) {
    if (!correct || !(ratio > 0)) return -1.0;
    return std::clamp(std::log(ratio), -1.0, 1.0);
  }
  switch (verdict) {
    case eval::Verdict::correct: return 1.0;
    case eval::Verdict::wrong_result:
    case eval::Verdict::runtime_error:
    case eval::Verdict::timeout:
    case eval::Verdict::resource_limit: return 0.25;
    case eval::Verdict::compile_error:
    case eval::Verdict::rejected:
    case eval::Verdict::bad_answer: return 0.0;
  }
  return 0.0;
}

namespace {

std::string runtime_signature(const std::string& both) {
  std::string sig = signal_in(both);
  if (!sig.empty()) return "runtime_error:" + sig;
  std::string l = lower(both);
  if (l.find("guard") != std::string::npos || l.find("outside") != std::string::npos ||
      l.find("out of bounds") != std::string::npos) {
    return "runtime_error:out_of_bounds";
  }
  if (l.find("exit") != std::string::npos) return "runtime_error:exit";
  return "runtime_error";
}

std::string wrong_result_signature(std::string_view message) {
  if (contains_token(message, "nan")) return "wrong_result:nan_mismatch";
  if (contains_token(message, "inf")) return "wrong_result:inf_mismatch";
  std::string l = lower(message);
  if (l.find("shape") != std::string::npos || l.find("size") != std::string::npos) {
    return "wrong_result:shape";
  }
  return "wrong_result:value";
}

std::string timeout_signature(const std::string& both) {
  std::string l = lower(both);
  if (l.find("cpu") != std::string::npos) return "timeout:cpu";
  return "timeout:wall";
}

std::string resource_limit_signature(const std::string& both) {
  std::string l = lower(both);
  if (l.find("memory") != std::string::npos || l.find("address space") != std::string::npos) {
    return "resource_limit:memory";
  }
  if (l.find("file size") != std::string::npos || l.find("file_size") != std::string::npos) {
    return "resource_limit:file_size";
  }
  if (l.find("process") != std::string::npos) return "resource_limit:processes";
  if (l.find("output") != std::string::npos) return "resource_limit:output";
  return "resource_limit";
}

// A rejection: "rejected: <the first normalised line of the message or diagnostics>".
std::string rejected_signature(std::string_view message, std::string_view diagnostics) {
  std::string first;
  for (std::string_view line : lines_of(message.empty() ? diagnostics : message)) {
    first = normalise_line(line);
    if (!first.empty()) break;
  }
  std::string head(eval::verdict_name(eval::Verdict::rejected));
  return first.empty() ? head : head + ": " + first;
}

// An answer that gave no candidate: "bad_answer:<cause>" from the message's wording (agent/answer.h,
// the loop's from_answer), never the edit's own text, so that equal causes share a signature.
std::string bad_answer_signature(std::string_view message) {
  std::string l = lower(message);
  std::string_view cause = "bad_answer";
  if (l.find("matches nothing") != std::string::npos) cause = "bad_answer:edit_no_match";
  else if (l.find("ambiguous") != std::string::npos) cause = "bad_answer:edit_ambiguous";
  else if (l.find("overlaps") != std::string::npos) cause = "bad_answer:edit_overlap";
  else if (l.find("empty search") != std::string::npos) cause = "bad_answer:edit_empty_search";
  else if (l.find("no incumbent") != std::string::npos) cause = "bad_answer:edits_without_incumbent";
  else if (l.find("only against the incumbent when refining") != std::string::npos) cause = "bad_answer:edits_outside_refine";
  else if (l.find("both a whole kernel and edits") != std::string::npos) cause = "bad_answer:kernel_and_edits";
  else if (l.find("cut off") != std::string::npos || l.find("no =======") != std::string::npos ||
           l.find("no >>>>>>>") != std::string::npos) cause = "bad_answer:edit_malformed";
  return std::string(cause);
}

}  // namespace

std::string error_signature(eval::Verdict verdict, std::string_view message,
                            std::string_view diagnostics) {
  const std::string both = std::string(message) + "\n" + std::string(diagnostics);
  switch (verdict) {
    case eval::Verdict::correct: return {};
    case eval::Verdict::compile_error: return compile_signature(message, diagnostics);
    case eval::Verdict::runtime_error: return runtime_signature(both);
    case eval::Verdict::wrong_result: return wrong_result_signature(message);
    case eval::Verdict::timeout: return timeout_signature(both);
    case eval::Verdict::resource_limit: return resource_limit_signature(both);
    case eval::Verdict::rejected: return rejected_signature(message, diagnostics);
    case eval::Verdict::bad_answer: return bad_answer_signature(message);
  }
  return {};
}

std::vector<std::string> text_tokens(std::string_view text) {
  std::vector<std::string> out;
  size_t i = 0;
  while (i < text.size()) {
    while (i < text.size() && !is_word_char(text[i])) ++i;
    size_t j = i;
    while (j < text.size() && is_word_char(text[j])) ++j;
    if (j - i >= 2) {
      std::string w = lower(text.substr(i, j - i));
      if (!is_stop_word(w)) out.push_back(std::move(w));
    }
    i = j;
  }
  return out;
}

std::set<std::string> token_set(std::string_view text) {
  auto v = text_tokens(text);
  return {v.begin(), v.end()};
}

double jaccard(const std::set<std::string>& a, const std::set<std::string>& b) {
  if (a.empty() && b.empty()) return 1.0;
  size_t inter = 0;
  for (const auto& t : a) inter += b.count(t);
  size_t uni = a.size() + b.size() - inter;
  return uni == 0 ? 1.0 : static_cast<double>(inter) / static_cast<double>(uni);
}

std::string normalised_text(std::string_view text) {
  auto v = text_tokens(text);
  std::string out;
  for (const auto& t : v) {
    if (!out.empty()) out += ' ';
    out += t;
  }
  return out;
}

std::string fts_or_query(std::string_view text, size_t max_terms) {
  std::set<std::string> seen;
  std::string out;
  for (const auto& t : text_tokens(text)) {
    if (seen.size() >= max_terms) break;
    if (!seen.insert(t).second) continue;
    if (!out.empty()) out += " OR ";
    out += '"' + t + '"';
  }
  return out;
}

std::vector<std::string> fts_tokens(std::string_view text) {
  std::vector<std::string> out;
  std::string cur;
  for (char ch : text) {
    auto c = static_cast<unsigned char>(ch);
    if (std::isalnum(c) || c == '_' || c >= 0x80) {
      cur += static_cast<char>(std::tolower(c));
    } else if (!cur.empty()) {
      out.push_back(std::move(cur));
      cur.clear();
    }
  }
  if (!cur.empty()) out.push_back(std::move(cur));
  return out;
}

double okapi_bm25(const std::vector<int>& tf, const std::vector<double>& df, double docs, double length,
                  double average_length) {
  constexpr double k1 = 1.2, b = 0.75;
  double n = std::max(docs, 1.0);
  double score = 0;
  for (size_t p = 0; p < tf.size() && p < df.size(); ++p) {
    if (df[p] < 0 || tf[p] == 0) continue;
    double idf = std::log((n - df[p] + 0.5) / (df[p] + 0.5) + 1.0);
    score += idf * tf[p] * (k1 + 1) / (tf[p] + k1 * (1 - b + b * length / std::max(average_length, 1e-9)));
  }
  return score;
}

std::string search_tag(std::string_view prefix, std::string_view value) {
  std::string out(prefix);
  out += '_';
  for (char c : value) {
    char l = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    out += (std::isalnum(static_cast<unsigned char>(l)) || l == '_') ? l : '_';
  }
  return out;
}

Result<eval::Verdict> stored_verdict(std::string_view name) {
  if (auto v = eval::parse_verdict(name)) return *v;
  return fail(ErrorKind::corrupt, "a case's verdict is '{}', not one of {}", name, eval::verdict_names());
}

std::optional<QuarantineStatus> stored_quarantine(int64_t code) {
  for (const auto& entry : k_quarantine_names) {
    if (quarantine_code(entry.first) == code) return entry.first;
  }
  return std::nullopt;
}

int64_t quarantine_code(QuarantineStatus s) { return static_cast<int64_t>(s); }

std::string clip_text(std::string_view text, size_t max_bytes) {
  if (text.size() <= max_bytes) return std::string(text);
  size_t cut = max_bytes;
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;
  return std::string(text.substr(0, cut)) + "\xE2\x80\xA6";
}

}  // namespace kope::memory
