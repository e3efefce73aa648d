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
#pragma once

#include <string>
#include <string_view>

namespace kope::agent {

// Real models name what they did in up to a few hundred characters; only a runaway header is cut.
inline constexpr size_t k_max_optimisation = 1000;

struct ParsedAnswer {
  bool has_code = false;
  std::string code;          // the kernel source, '\n' line ends, ends with a newline
  std::string optimisation;  // one line, at most k_max_optimisation bytes; "unspecified" when nothing named it
  bool header_found = false; // an explicit OPTIMISATION header (or JSON/YAML field) was present
  // Why there is no code, for the recorded attempt: "no code in answer", "the code block does
  // not define kope_kernel", "the answer was cut off inside the code block".
  std::string problem;
  int code_blocks = 0;       // fenced blocks seen
};

ParsedAnswer parse_answer(std::string_view text);

}  // namespace kope::agent
