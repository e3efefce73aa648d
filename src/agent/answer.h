// agent/answer.h — reading a model's answer: the kernel source and the optimisation it names.
//
// The prompt asks for a short header line `OPTIMISATION: <what was applied>` and one fenced
// code block holding the whole translation unit. Models drift from that, so parsing is lenient:
// CRLF line ends; ``` or ~~~ fences with or without a language tag (```cpp, ``` c++, ~~~C++);
// several blocks (the last one that defines `kope_kernel` wins, since models revise as they
// go); a final fence left open because the answer was cut off (accepted only when the braces
// balance); no fences at all but text that is plainly a translation unit defining kope_kernel;
// the header spelled OPTIMIZATION/Optimisation, in bold, as a JSON/YAML field, or missing (then
// the first line of prose stands in). Pure functions, thread-safe.
//
// A refinement may instead answer with search/replace edits against the incumbent
// (docs/design.md §2, "Edit answers"): after the header, one or more blocks
//   <<<<<<< SEARCH
//   (lines copied exactly from the incumbent)
//   =======
//   (the lines that replace them)
//   >>>>>>> REPLACE
// inside or outside a code fence. parse_answer collects them; apply_edits applies them exactly
// (only CRLF line ends are normalised; no fuzzy matching).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "kope/error.h"
#include "run/attempt.h"

namespace kope::agent {

// Real models name what they did in up to a few hundred characters; only a runaway header is cut.
inline constexpr size_t k_max_optimisation = 1000;

// Markers of an edit block; each stands alone on its line (surrounding blanks ignored).
inline constexpr std::string_view k_edit_search = "<<<<<<< SEARCH";
inline constexpr std::string_view k_edit_divider = "=======";
inline constexpr std::string_view k_edit_replace = ">>>>>>> REPLACE";

// One search/replace edit: `search` and `replace` are whole lines, each ended by '\n' ("" for an
// empty part). `line` is the 1-based line of the answer its SEARCH marker stands on.
struct Edit {
  std::string search;
  std::string replace;
  int line = 0;
};

using run::AnswerForm;  // how the answer gave its kernel: whole, or edits against the incumbent

struct ParsedAnswer {
  bool has_code = false;
  std::string code;          // the kernel source, '\n' line ends, ends with a newline
  std::string optimisation;  // one line, at most k_max_optimisation bytes; "unspecified" when nothing named it
  bool header_found = false; // an explicit OPTIMISATION header (or JSON/YAML field) was present
  // Why there is no code, for the recorded attempt: "no code in answer", "the code block does
  // not define kope_kernel", "the answer was cut off inside the code block".
  std::string problem;
  int code_blocks = 0;       // fenced blocks seen
  // Edit blocks in answer order (whether fenced or not). A fenced block holding edit markers is
  // never taken as the whole kernel. form is `edits` when at least one edit block was seen
  // (complete or not); has_code may then still be true when the answer also gave a whole kernel.
  AnswerForm form = AnswerForm::whole;
  std::vector<Edit> edits;
  // A malformed edit block, naming it: "edit 2 (SEARCH `for (...`) has no ======= line" or
  // "... is cut off before its >>>>>>> REPLACE line"; "" when every block is well formed.
  std::string edit_problem;
};

ParsedAnswer parse_answer(std::string_view text);

// `source` with every edit applied. The edits are matched against `source` as given (not one
// after another): each SEARCH must occur exactly once, starting at the beginning of a line, and
// no two matched regions may overlap; then each region is replaced. CRLF line ends in `source`
// and the edits are read as '\n'; the result has '\n' line ends and ends with a newline.
// Fails with ErrorKind::config and a message naming the first faulty edit by its 1-based number
// and first SEARCH line, and the cause: "has an empty SEARCH part", "matches nothing in the
// incumbent's source", "matches N places in the incumbent's source", "overlaps edit K".
// Pure, thread-safe.
Result<std::string> apply_edits(std::string_view source, const std::vector<Edit>& edits);

// "edit 2 (SEARCH `for (int i = 0; ...`)": how messages name an edit (its first non-blank SEARCH
// line, cut to 60 characters).
std::string describe_edit(int number, const Edit& e);

}  // namespace kope::agent
