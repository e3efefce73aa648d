// util/strings.h — small string helpers with no project dependencies.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace kope::util {

std::string_view trim(std::string_view s);
std::vector<std::string> split(std::string_view s, char sep);
std::string join(const std::vector<std::string>& parts, std::string_view sep);
bool starts_with(std::string_view s, std::string_view prefix);
bool ends_with(std::string_view s, std::string_view suffix);
std::string to_lower(std::string_view s);
// Replaces every occurrence of `from` with `to`.
std::string replace_all(std::string s, std::string_view from, std::string_view to);
// `s` as one word for /bin/sh: in single quotes, each ' written as '\''.
std::string shell_quote(std::string_view s);
// Keeps the first `max_lines` lines and at most `max_bytes` bytes, marking what was cut.
std::string truncate_text(std::string_view s, size_t max_bytes, size_t max_lines = SIZE_MAX);
// One line of prose (a description, a message) in at most `max_bytes` bytes, never cut inside a
// word or a clause without saying so. Text that fits is returned trimmed. Longer text is cut at
// the last clause boundary ("; ", ", ", ". ", " - ") that fits, when that keeps at least a
// third of `max_bytes`: the clauses before it are kept whole (a sentence keeps its full stop,
// the separator of the other boundaries is dropped). Otherwise it is cut at the last word
// boundary that fits together with the marker " (shortened)", which is appended; trailing
// clause punctuation before the marker is dropped. Text whose first word alone does not fit
// becomes "(shortened)" (or "" when `max_bytes` is smaller than that). Never adds "...".
std::string shorten_at_clause(std::string_view text, size_t max_bytes);
// Shell-style glob match supporting '*', '?' and '[...]' (used for op selectors).
bool glob_match(std::string_view pattern, std::string_view text);
// Human-readable byte count ("1.5 MiB").
std::string human_bytes(double bytes);

}  // namespace kope::util
