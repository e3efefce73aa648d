#include "agent/prompt_check.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <regex>
#include <set>

#include <fmt/format.h>

#include "run/events.h"
#include "agent/loop.h"
#include "agent/prompt.h"
#include "util/fs.h"
#include "util/strings.h"

namespace kope::agent {

namespace {

using json = nlohmann::json;

// Headings of the sections that hold memory items (prompts/<backend>/experience.md, and the op
// pack of op.md).
constexpr const char* k_knowledge_headings[] = {"## Experience from this machine",
                                                "## Lessons learned on this machine",
                                                "## Feasibility evidence from other hardware",
                                                "## Feasibility only",
                                                "## General notes",
                                                "## What memory knows for",
                                                "## A verified kernel of the closest operator",
                                                "## The same error, fixed before",
                                                "## Changes that paid on similar operators"};
constexpr std::string_view k_lessons_heading = "## Lessons already in memory";
constexpr std::string_view k_byte_cut_marker = " more bytes cut ...]";
constexpr std::string_view k_ellipsis = "\xE2\x80\xA6";

bool is_fence(std::string_view line) {
  std::string_view t = util::trim(line);
  return t.starts_with("```") || t.starts_with("~~~");
}

int heading_level(std::string_view line) {
  size_t n = 0;
  while (n < line.size() && line[n] == '#') ++n;
  if (n == 0 || n > 6 || n >= line.size() || line[n] != ' ') return 0;
  return static_cast<int>(n);
}

bool is_knowledge_heading(std::string_view line) {
  for (const char* h : k_knowledge_headings) {
    if (line.starts_with(h)) return true;
  }
  return false;
}

// Cells of a markdown table row: `|` not escaped by a backslash separate them.
size_t table_cells(std::string_view row) {
  std::string_view t = util::trim(row);
  size_t pipes = 0;
  for (size_t i = 0; i < t.size(); ++i) {
    if (t[i] == '\\') {
      ++i;
      continue;
    }
    if (t[i] == '|') ++pipes;
  }
  bool closed = t.size() > 1 && t.back() == '|' && t[t.size() - 2] != '\\';
  return pipes == 0 ? 0 : (closed ? pipes - 1 : pipes);
}


struct Line {
  std::string_view text;
  int number;  // in the transcript
};

std::vector<Line> lines_of(std::string_view message, int first_line) {
  std::vector<Line> out;
  size_t pos = 0;
  int n = first_line;
  while (pos <= message.size()) {
    size_t nl = message.find('\n', pos);
    if (nl == std::string_view::npos) {
      if (pos < message.size()) out.push_back({message.substr(pos), n});
      break;
    }
    out.push_back({message.substr(pos, nl - pos), n++});
    pos = nl + 1;
  }
  return out;
}

bool is_word_byte(char c) {
  auto u = static_cast<unsigned char>(c);
  return std::isalnum(u) || u >= 0x80;
}

// The words up to and including the first "..." or "…" in `line` that follows a letter or digit
// and ends the line, a table cell, a quotation or a parenthesis; nullopt when there is none.
std::optional<std::string> find_cut_description(std::string_view line) {
  for (std::string_view dots : {std::string_view("..."), k_ellipsis}) {
    for (size_t pos = line.find(dots); pos != std::string_view::npos; pos = line.find(dots, pos + 1)) {
      if (pos == 0 || !is_word_byte(line[pos - 1])) continue;
      size_t after = pos + dots.size();
      if (dots == "..." && after < line.size() && line[after] == '.') continue;  // "....": not an ellipsis
      while (after < line.size() && line[after] == ' ') ++after;
      if (after < line.size() && std::string_view("\"')]|*`").find(line[after]) == std::string_view::npos) continue;
      size_t begin = pos > 24 ? line.rfind(' ', pos - 24) : std::string_view::npos;
      begin = begin == std::string_view::npos ? 0 : begin + 1;
      std::string excerpt(util::trim(line.substr(begin, pos + dots.size() - begin)));
      return begin > 0 ? "…" + excerpt : excerpt;
    }
  }
  return std::nullopt;
}

class TextChecker {
 public:
  TextChecker(const std::string& file, const std::string& prompt, std::vector<PromptFinding>& out)
      : m_file(file), m_prompt(prompt), m_out(out) {}

  void add(int line, std::string rule, std::string message) {
    m_out.push_back({m_file, m_prompt, line, std::move(rule), std::move(message)});
  }

  // Checks one message (its first line is transcript line `first_line`): cut text, empty
  // sections, duplicate or cut memory items, lessons offered for editing not shown whole, tables.
  void message(std::string_view text, int first_line) {
    std::vector<Line> lines = lines_of(text, first_line);
    m_scan = {};
    for (size_t i = 0; i < lines.size(); ++i) {
      std::string_view line = lines[i].text;
      int n = lines[i].number;
      if (line.find(k_byte_cut_marker) != std::string_view::npos && line.find("[... ") != std::string_view::npos) {
        add(n, "cut", "text cut mid-line (a byte limit's \"[... N more bytes cut ...]\")");
      }
      if (is_fence(line)) {
        fence(line, n);
      } else if (m_scan.in_fence) {
        fenced_line(line, n);
      } else if (int level = heading_level(line)) {
        heading(lines, i, level);
      } else if (line.starts_with("Answer with ")) {  // the closing instruction of kernel prompts
        if (m_scan.knowledge) end_item();
        m_scan.knowledge = m_scan.lessons = false;
      } else {
        text_line(line, n);
        if (std::string_view(util::trim(line)).starts_with("|")) {
          size_t j = i;
          while (j < lines.size() && std::string_view(util::trim(lines[j].text)).starts_with("|")) ++j;
          table(lines, i, j);
          for (size_t k = i; k < j; ++k) cut_description(lines[k].text, lines[k].number);
          i = j - 1;
        } else {
          cut_description(line, n);
        }
      }
    }
    if (m_scan.knowledge) end_item();
    if (m_scan.in_fence) add(m_scan.fence_line, "cut", "a code block is never closed (its listing was cut)");
  }

 private:
  // Where message() is in the message it reads.
  struct Scan {
    bool in_fence = false;
    int fence_line = 0;
    std::string section;  // the current "## " heading
    bool knowledge = false, lessons = false, lessons_whole = false;
    std::string item;     // the knowledge item being read
    int item_line = 0;
    bool item_fence_open = false;
    std::map<std::string, int> seen_items;
  };

  void end_item() {
    Scan& s = m_scan;
    if (s.item.empty()) return;
    if (s.item_fence_open) add(s.item_line, "cut", "a memory item ends inside its code block (its listing was cut)");
    std::string key = knowledge_content_key(s.item);
    auto [it, fresh] = s.seen_items.emplace(key, s.item_line);
    if (!fresh) add(s.item_line, "duplicate", fmt::format("this item repeats the one at line {}", it->second));
    s.item.clear();
    s.item_fence_open = false;
  }

  void fence(std::string_view line, int n) {
    Scan& s = m_scan;
    if (!s.in_fence) s.fence_line = n;
    s.in_fence = !s.in_fence;
    if (s.knowledge && !s.item.empty()) {
      s.item_fence_open = !s.item_fence_open;
      s.item += std::string(line) + "\n";
    }
  }

  void fenced_line(std::string_view line, int n) {
    Scan& s = m_scan;
    if (s.knowledge && !s.item.empty()) s.item += std::string(line) + "\n";
    if ((s.knowledge || s.lessons) && std::string_view(util::trim(line)).ends_with(k_ellipsis)) {
      add(n, "cut", "a code line ends in \"…\": the listing was cut");
    }
  }

  void heading(const std::vector<Line>& lines, size_t i, int level) {
    Scan& s = m_scan;
    std::string_view line = lines[i].text;
    if (s.knowledge) end_item();
    // A heading with nothing under it before the next heading of its level or above.
    size_t j = i + 1;
    while (j < lines.size() && util::trim(lines[j].text).empty()) ++j;
    int next_level = j < lines.size() ? heading_level(lines[j].text) : 1;
    if (next_level > 0 && next_level <= level) add(lines[i].number, "empty", fmt::format("section '{}' is empty", util::trim(line)));
    if (level <= 2) {
      s.section = std::string(line);
      s.knowledge = is_knowledge_heading(line);
      s.lessons = line.starts_with(k_lessons_heading);
      s.lessons_whole = s.lessons;
    }
  }

  // A line of prose: part of a knowledge item, or of the lessons offered.
  void text_line(std::string_view line, int n) {
    Scan& s = m_scan;
    std::string_view t = util::trim(line);
    if (s.knowledge) {
      if (line.starts_with("- ")) {
        end_item();
        s.item = std::string(line) + "\n";
        s.item_line = n;
      } else if (!s.item.empty()) {
        s.item += std::string(line) + "\n";
      }
      if (t.ends_with(k_ellipsis)) add(n, "cut", "a memory item's line ends in \"…\": it was cut");
    }
    if (s.lessons) {
      if (t.starts_with("Also in scope")) s.lessons_whole = false;
      if (s.lessons_whole && line.starts_with("- [") && (t.ends_with(k_ellipsis) || t.ends_with("..."))) {
        add(n, "lesson", "a lesson offered for editing is not shown whole");
      }
    }
  }

  // A description cut mid-word or mid-sentence: "..." (or "…") right after a letter or digit,
  // at the end of the line, a table cell, a quotation or a parenthesis ("unroll the inner lo...",
  // "| tile by 8 and unro... |"). Not reported again on a line another cut rule just named.
  void cut_description(std::string_view line, int n) {
    if (!m_out.empty() && m_out.back().line == n && (m_out.back().rule == "cut" || m_out.back().rule == "lesson")) return;
    if (auto cut = find_cut_description(line)) {
      add(n, "cut", fmt::format("a description is cut mid-word or mid-sentence (\"{}\"): shorten it by whole clauses, or "
                                "say \"(shortened)\"", *cut));
    }
  }

  void table(const std::vector<Line>& lines, size_t begin, size_t end) {
    static const std::regex k_separator(R"(^\|(\s*:?-{3,}:?\s*\|)+$)");
    size_t cells = table_cells(lines[begin].text);
    if (end - begin < 2) {
      add(lines[begin].number, "table", "a table row outside a table (no separator row follows)");
      return;
    }
    std::string sep(util::trim(lines[begin + 1].text));
    if (!std::regex_match(sep, k_separator) || table_cells(sep) != cells) {
      add(lines[begin + 1].number, "table", fmt::format("the table's second line is not a separator row of {} cells", cells));
    }
    if (end - begin == 2) add(lines[begin].number, "empty", "a table without rows");
    for (size_t k = begin + 2; k < end; ++k) {
      size_t c = table_cells(lines[k].text);
      if (c != cells) {
        add(lines[k].number, "table",
            fmt::format("the row has {} cells, the header {} (an unescaped '|' in a cell?)", c, cells));
      }
    }
  }

  const std::string& m_file;
  const std::string& m_prompt;
  std::vector<PromptFinding>& m_out;
  Scan m_scan;
};

// "case <number>" outside code and memory items (which name memory cases by id: "[case 12 · …]",
// "memory case 12", "replay of case 12"), with whether the dims follow in parentheses
// ("case 3 (N=128 D=64)").
struct CaseMention {
  std::string index;
  int line = 0;
  bool named = false;
};

std::vector<CaseMention> case_mentions(std::string_view message, int first_line) {
  static const std::regex k_case(R"((^|[^A-Za-z_])[Cc]ase #?(\d+)\b)");
  static const std::regex k_named(R"(^\s*\([^)]*=[^)]*\))");
  std::vector<CaseMention> out;
  bool in_fence = false, skipped_section = false;
  for (const auto& l : lines_of(message, first_line)) {
    std::string_view line = l.text;
    if (is_fence(line)) {
      in_fence = !in_fence;
      continue;
    }
    if (in_fence) continue;
    if (int level = heading_level(line); level > 0 && level <= 2) {
      skipped_section = is_knowledge_heading(line) || line.starts_with(k_lessons_heading);
    } else if (line.starts_with("Answer with ")) {
      skipped_section = false;
    }
    if (skipped_section) continue;
    std::string text(line);
    for (auto it = std::sregex_iterator(text.begin(), text.end(), k_case); it != std::sregex_iterator(); ++it) {
      const std::smatch& m = *it;
      size_t at = static_cast<size_t>(m.position(0)) + m[1].length();
      std::string before = util::to_lower(text.substr(0, at));
      if (before.ends_with("memory ") || before.ends_with("replay of ") || before.ends_with("[")) continue;
      std::string rest = m.suffix().str();
      out.push_back({m[2].str(), l.number, std::regex_search(rest, k_named)});
    }
  }
  return out;
}

// The user message without its knowledge sections: what the hot tier is estimated on.
std::string without_knowledge(std::string_view user) {
  std::vector<Line> lines = lines_of(user, 1);
  std::string out;
  bool in_fence = false, skipping = false;
  std::string pending_blank;
  for (const auto& l : lines) {
    std::string_view line = l.text;
    if (!in_fence && heading_level(line) > 0) {
      skipping = is_knowledge_heading(line);
      if (skipping) pending_blank.clear();  // the blank line before a section belongs to it
    } else if (!in_fence && line.starts_with("Answer with ")) {
      skipping = false;
    }
    if (is_fence(line)) in_fence = !in_fence;
    if (skipping) continue;
    if (util::trim(line).empty() && !in_fence) {
      out += pending_blank;
      pending_blank = std::string(line) + "\n";
      continue;
    }
    out += pending_blank;
    pending_blank.clear();
    out += std::string(line) + "\n";
  }
  out += pending_blank;
  if (!user.ends_with('\n') && !out.empty()) out.pop_back();
  return out;
}

// How the prompt event's estimates were made: kope's estimator at a logged scale
// ("token_scale"), or, in runs from before the one estimator, bytes times a tokens-per-byte ratio
// ("tokens_per_byte", else what the system message implies).
struct LoggedEstimate {
  bool per_byte = false;
  double value = 0;  // the scale, or tokens per byte

  int64_t operator()(std::string_view text) const {
    if (!per_byte) return context::TokenEstimator(value).estimate(text);
    if (text.empty()) return 0;
    return std::max<int64_t>(1, static_cast<int64_t>(std::ceil(static_cast<double>(text.size()) * value)));
  }
  std::string describe() const {
    return per_byte ? fmt::format("{:.4f} tokens/byte", value) : fmt::format("kope's estimate at scale {:.4f}", value);
  }
};

bool positive(const std::optional<double>& v) { return v && *v > 0; }

int64_t tier(const std::map<std::string, int64_t>& tiers, const char* name) {
  auto it = tiers.find(name);
  return it != tiers.end() ? it->second : 0;
}

}  // namespace

Result<PromptText> parse_transcript(std::string_view t) {
  constexpr std::string_view k_system = "## system\n\n", k_user = "\n\n## user\n\n", k_assistant = "\n\n## assistant\n\n";
  if (!t.starts_with(k_system)) return fail(ErrorKind::corrupt, "the transcript does not begin with '## system'");
  size_t u = t.find(k_user, k_system.size());
  if (u == std::string_view::npos) return fail(ErrorKind::corrupt, "the transcript has no '## user' message");
  size_t user_begin = u + k_user.size();
  size_t a = t.find(k_assistant, user_begin);
  if (a == std::string_view::npos) return fail(ErrorKind::corrupt, "the transcript has no '## assistant' message");
  PromptText p;
  p.system = std::string(t.substr(k_system.size(), u - k_system.size()));
  p.user = std::string(t.substr(user_begin, a - user_begin));
  p.system_line = 3;
  p.user_line = static_cast<int>(std::count(t.begin(), t.begin() + static_cast<std::ptrdiff_t>(user_begin), '\n')) + 1;
  return p;
}

std::vector<PromptFinding> check_prompt_text(const PromptText& text, const std::string& file, const std::string& prompt) {
  std::vector<PromptFinding> out;
  TextChecker c(file, prompt, out);
  c.message(text.system, text.system_line);
  c.message(text.user, text.user_line);
  // A case named by its index alone, where the prompt never names that case by its dims.
  std::vector<CaseMention> mentions = case_mentions(text.system, text.system_line);
  for (auto& m : case_mentions(text.user, text.user_line)) mentions.push_back(std::move(m));
  std::set<std::string> named;
  for (const auto& m : mentions) {
    if (m.named) named.insert(m.index);
  }
  std::set<std::pair<int, std::string>> reported;
  for (const auto& m : mentions) {
    if (named.contains(m.index) || !reported.emplace(m.line, m.index).second) continue;
    out.push_back({file, prompt, m.line, "case",
                   fmt::format("\"case {}\" is named by its index alone, and the prompt never says which dims that case has "
                               "(name it as \"case {} (N=… D=…)\")", m.index, m.index)});
  }
  return out;
}

std::vector<PromptFinding> check_prompt_tokens(const PromptText& text, const json& line, const std::string& file,
                                               const std::string& prompt) {
  auto e = run::parse_event(line);
  if (!e) return {{file, prompt, 0, "log", e.error().message}};
  const auto* ev = std::get_if<run::PromptEvent>(&e->event);
  if (!ev) return {{file, prompt, 0, "log", "the event is not a prompt event"}};
  return check_prompt_tokens(text, *ev, file, prompt);
}

std::vector<PromptFinding> check_prompt_tokens(const PromptText& text, const run::PromptEvent& ev, const std::string& file,
                                               const std::string& prompt) {
  std::vector<PromptFinding> out;
  auto add = [&](std::string msg) { out.push_back({file, prompt, 0, "tokens", std::move(msg)}); };
  const auto& tiers = ev.tier_tokens;
  int64_t sys = tier(tiers, "system"), hot = tier(tiers, "hot"), warm = tier(tiers, "warm"), cold = tier(tiers, "cold");
  int64_t total = ev.total_tokens.value_or(-1);
  if (total < 0) {
    add("the prompt event has no total_tokens");
    return out;
  }
  if (sys + hot + warm + cold != total) {
    add(fmt::format("tiers add up to {} (system {} + hot {} + warm {} + cold {}) but the total is {}", sys + hot + warm + cold,
                    sys, hot, warm, cold, total));
  }
  for (auto [name, v] : {std::pair{"system", sys}, {"hot", hot}, {"warm", warm}, {"cold", cold}}) {
    if (v < 0) add(fmt::format("the {} tier has {} tokens", name, v));
  }
  // What the estimates used: logged, or (older runs) the ratio the system message implies.
  const bool logged = positive(ev.token_scale) || positive(ev.tokens_per_byte);
  LoggedEstimate estimate;
  if (positive(ev.token_scale)) {
    estimate = {false, *ev.token_scale};
  } else {
    estimate.per_byte = true;
    estimate.value = logged ? *ev.tokens_per_byte
                            : (text.system.empty() ? 0.0 : static_cast<double>(sys) / static_cast<double>(text.system.size()));
  }
  if (estimate.value <= 0) {
    add("no tokens-per-byte ratio to check the text against");
    return out;
  }
  auto close = [&](int64_t want, int64_t got, int64_t slack) { return std::llabs(want - got) <= slack; };
  int64_t slack = logged ? 1 : 2 + total / 100;
  int64_t sys_text = estimate(text.system);
  int64_t user_text = estimate(text.user);
  if (!close(sys_text, sys, slack)) {
    add(fmt::format("the system tier says {} tokens, but its {} bytes are {} tokens at {}", sys, text.system.size(),
                    sys_text, estimate.describe()));
  }
  if (!close(sys_text + user_text, total, slack + 1)) {
    add(fmt::format("the total says {} tokens, but the text ({} + {} bytes) is {} tokens at {}", total,
                    text.system.size(), text.user.size(), sys_text + user_text, estimate.describe()));
  }
  if (ev.reflect()) {
    if (warm != 0 || cold != 0) add("a reflection prompt has no knowledge tiers, but warm/cold are not 0");
    return out;
  }
  std::string hot_text = without_knowledge(text.user);
  bool has_knowledge = hot_text.size() < text.user.size();
  if (has_knowledge != (warm + cold > 0)) {
    add(has_knowledge ? "the prompt has knowledge sections but warm + cold is 0"
                      : fmt::format("warm + cold is {} but the prompt has no knowledge section", warm + cold));
  }
  int64_t hot_est = estimate(hot_text);
  int64_t hot_slack = 3 + hot / 200;
  if (!close(hot_est, hot, hot_slack)) {
    add(fmt::format("the hot tier says {} tokens, but the prompt without its knowledge sections ({} bytes) is {} tokens", hot,
                    hot_text.size(), hot_est));
  }
  return out;
}

Result<PromptCheckReport> check_run_prompts(const std::filesystem::path& run_dir) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(run_dir / "events.jsonl", ec)) {
    return fail(ErrorKind::not_found, "{} is not a run directory (no events.jsonl)", run_dir.string());
  }
  KOPE_ASSIGN(auto events, run::read_log(run_dir / "events.jsonl"));
  // The last prompt event of each transcript (a context-length retry logs one per try).
  std::map<std::string, run::PromptEvent> prompt_of;
  for (const auto& e : events) {
    const auto* p = std::get_if<run::PromptEvent>(&e.event);
    if (!p) continue;
    std::string dir = op_dir_name(e.op);
    std::string name = p->reflect() ? "reflect-" + p->key : fmt::format("{}-{}", p->iteration.value_or(0), p->purpose);
    prompt_of[dir + "/" + name] = *p;
  }
  PromptCheckReport report;
  std::filesystem::path root = run_dir / "transcripts";
  std::vector<std::filesystem::path> files;
  if (std::filesystem::is_directory(root, ec)) {
    for (auto it = std::filesystem::recursive_directory_iterator(root, ec); it != std::filesystem::recursive_directory_iterator();
         it.increment(ec)) {
      if (ec) break;
      if (it->is_regular_file() && it->path().extension() == ".md") files.push_back(it->path());
    }
  }
  std::sort(files.begin(), files.end());
  for (const auto& path : files) {
    std::string rel = std::filesystem::relative(path, run_dir, ec).generic_string();
    std::string key = std::filesystem::relative(path, root, ec).replace_extension().generic_string();
    std::string label = util::replace_all(key, "/", " ");
    ++report.prompts;
    auto content = util::read_file(path);
    if (!content) {
      report.findings.push_back({rel, label, 0, "log", content.error().message});
      continue;
    }
    auto text = parse_transcript(*content);
    if (!text) {
      report.findings.push_back({rel, label, 0, "log", text.error().message});
      continue;
    }
    for (auto& f : check_prompt_text(*text, rel, label)) report.findings.push_back(std::move(f));
    auto ev = prompt_of.find(key);
    if (ev == prompt_of.end()) {
      report.findings.push_back({rel, label, 0, "log", "no prompt event in events.jsonl for this transcript"});
      continue;
    }
    for (auto& f : check_prompt_tokens(*text, ev->second, rel, label)) report.findings.push_back(std::move(f));
  }
  return report;
}

json PromptCheckReport::to_json() const {
  json list = json::array();
  for (const auto& f : findings) {
    list.push_back({{"file", f.file}, {"prompt", f.prompt}, {"line", f.line}, {"rule", f.rule}, {"message", f.message}});
  }
  return {{"prompts", prompts}, {"ok", ok()}, {"findings", list}};
}

std::string PromptCheckReport::to_text() const {
  std::string out;
  for (const auto& f : findings) {
    out += f.line > 0 ? fmt::format("{}:{}: [{}] {}\n", f.file, f.line, f.rule, f.message)
                      : fmt::format("{}: [{}] {}\n", f.file, f.rule, f.message);
  }
  out += fmt::format("{} prompt{} checked, {} finding{}\n", prompts, prompts == 1 ? "" : "s", findings.size(),
                     findings.size() == 1 ? "" : "s");
  return out;
}

}  // namespace kope::agent
