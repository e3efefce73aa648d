// agent/template.h — the tiny template engine prompt files are written in.
//
//   {{name}}                 the value of `name`
//   {{#name}} ... {{/name}}  the inside only when `name` is non-empty
//   {{^name}} ... {{/name}}  the inside only when `name` is empty
//   {{! a comment }}         nothing
//
// A section tag alone on its line takes its line (and newline) with it, so templates can put
// tags on their own lines and still render without blank gaps. Values are inserted verbatim (no
// escaping: prompts are plain text). Names are [A-Za-z0-9_.]. Rendering is strict: a name the
// variables do not define, an unclosed or mismatched section is an error naming the template
// and line, so a typo in a prompt file fails loudly instead of silently dropping text.
// Pure and thread-safe.
#pragma once

#include <map>
#include <string>
#include <string_view>

#include "kope/error.h"

namespace kope::agent {

using TemplateVars = std::map<std::string, std::string, std::less<>>;

// Renders `text`; `name` (e.g. "prompts/cpu/draft.md") is used in error messages.
Result<std::string> render_template(std::string_view text, const TemplateVars& vars, std::string_view name = "template");

// Checks a template's syntax without values (every name is treated as defined).
Status check_template(std::string_view text, std::string_view name = "template");

}  // namespace kope::agent
