// agent/prompt_check.h — checking the prompts a run sent to the model.
//
// Every prompt kope sends is kept in the run directory as a transcript
// (transcripts/<op>/<k>-<stage>.md, reflect-<key>.md: "## system", "## user", "## assistant"),
// and its estimated tokens per tier are in the event log (a "prompt" event). The check reads
// them back and reports, with file and line:
//   cut         an item, listing or lesson cut mid-line (the "[... N more bytes cut ...]" marker
//               of a byte cut, a line ending in "…" inside memory items or lessons, or a code
//               fence left open), or a description cut mid-word or mid-sentence: "..." or "…"
//               right after a letter or digit that ends a line, a table cell, a quotation or a
//               parenthesis (util::shorten_at_clause never writes one);
//   case        "case <number>" (outside code and memory items, which name memory cases by id)
//               where the prompt never names that case by its dims ("case 3 (N=128 D=64)");
//   empty       a section heading with nothing under it, or a table without rows;
//   lesson      a lesson offered for editing that is not shown whole;
//   table       a markdown table whose rows do not have the header's cells (an unescaped `|`),
//               or whose second line is not the separator row;
//   duplicate   the same memory item twice in one prompt;
//   tokens      tier token counts that do not add up to the logged total, or that do not
//               match the text (system and user message sizes at the logged tokens-per-byte
//               ratio; the hot tier against the prompt without its knowledge sections);
//   log         a transcript without its prompt event, or one that cannot be read.
// Pure over the files it reads; thread-safe.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "run/events.h"

#include "kope/error.h"

namespace kope::agent {

struct PromptFinding {
  std::string file;     // relative to the run directory
  std::string prompt;   // "softmax 3 (refine)", "softmax reflect-end"
  int line = 0;         // 1-based line of the transcript file; 0 for the whole prompt
  std::string rule;     // cut, case, empty, lesson, table, duplicate, tokens, log
  std::string message;
};

struct PromptCheckReport {
  int prompts = 0;  // transcripts checked
  std::vector<PromptFinding> findings;
  bool ok() const { return findings.empty(); }
  nlohmann::json to_json() const;
  // One line per finding ("transcripts/a/2-refine.md:41: [table] ..."), then a summary line.
  std::string to_text() const;
};

// The system and user messages of one prompt (as sent), for the text rules.
struct PromptText {
  std::string system;
  std::string user;
  int system_line = 1;  // line of the transcript where each message starts
  int user_line = 1;
};

// Splits a transcript file ("## system\n\n…\n\n## user\n\n…\n\n## assistant\n\n…"). Fails
// with corrupt when the headings are missing.
Result<PromptText> parse_transcript(std::string_view transcript);

// The text rules (cut, case, empty, lesson, table, duplicate) over one prompt; `file` and `prompt`
// fill the findings' fields, lines are those of the transcript.
std::vector<PromptFinding> check_prompt_text(const PromptText& text, const std::string& file, const std::string& prompt);

// The token rules for one prompt against its logged "prompt" event.
std::vector<PromptFinding> check_prompt_tokens(const PromptText& text, const run::PromptEvent& prompt_event,
                                               const std::string& file, const std::string& prompt);
// The same over the event's JSON line (read by run::parse_event); a line that is not a prompt
// event is one "log" finding.
std::vector<PromptFinding> check_prompt_tokens(const PromptText& text, const nlohmann::json& prompt_event,
                                               const std::string& file, const std::string& prompt);

// Every transcript of the run directory against the rules and its event log. Fails with
// not_found when `run_dir` has no events.jsonl, corrupt when the log cannot be read.
Result<PromptCheckReport> check_run_prompts(const std::filesystem::path& run_dir);

}  // namespace kope::agent
