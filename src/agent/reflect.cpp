#include "agent/reflect.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "agent/template.h"
#include "util/strings.h"

namespace kope::agent {

using nlohmann::json;

namespace {

// Removes `//` and `/* */` comments outside strings and trailing commas before '}' or ']'.
std::string relax_json(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  bool in_string = false;
  for (size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    if (in_string) {
      out += c;
      if (c == '\\' && i + 1 < s.size()) {
        out += s[++i];
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
      out += c;
    } else if (c == '/' && i + 1 < s.size() && s[i + 1] == '/') {
      while (i < s.size() && s[i] != '\n') ++i;
      out += '\n';
    } else if (c == '/' && i + 1 < s.size() && s[i + 1] == '*') {
      size_t end = s.find("*/", i + 2);
      i = end == std::string_view::npos ? s.size() : end + 1;
    } else if (c == ',') {
      size_t j = i + 1;
      while (j < s.size() && std::isspace(static_cast<unsigned char>(s[j]))) ++j;
      if (j < s.size() && (s[j] == '}' || s[j] == ']')) continue;
      out += c;
    } else {
      out += c;
    }
  }
  return out;
}

std::optional<json> try_parse(std::string_view text) {
  for (std::string candidate : {std::string(text), relax_json(text)}) {
    json j = json::parse(candidate, nullptr, false);
    if (!j.is_discarded() && (j.is_object() || j.is_array())) return j;
  }
  return std::nullopt;
}

// The JSON value in an answer: a fenced block, else the outermost {...} or [...].
std::optional<json> find_json(std::string_view answer) {
  std::vector<std::string> candidates;
  size_t pos = 0;
  while ((pos = answer.find("```", pos)) != std::string_view::npos) {
    size_t line_end = answer.find('\n', pos);
    if (line_end == std::string_view::npos) break;
    size_t close = answer.find("```", line_end);
    if (close == std::string_view::npos) break;
    candidates.emplace_back(answer.substr(line_end + 1, close - line_end - 1));
    pos = close + 3;
  }
  for (char open : {'{', '['}) {
    char close = open == '{' ? '}' : ']';
    size_t b = answer.find(open), e = answer.rfind(close);
    if (b != std::string_view::npos && e != std::string_view::npos && e > b) candidates.emplace_back(answer.substr(b, e - b + 1));
  }
  for (const auto& c : candidates) {
    if (auto j = try_parse(c)) return j;
  }
  return std::nullopt;
}

std::string str(const json& j, std::initializer_list<const char*> keys) {
  for (const char* k : keys) {
    auto it = j.find(k);
    if (it != j.end() && it->is_string()) return std::string(util::trim(it->get<std::string>()));
  }
  return "";
}

// The list of operations in the answer's JSON: the array itself, the array under a known key,
// or a single operation object.
json operation_list(const json& j) {
  if (j.is_array()) return j;
  json list = json::array();
  for (const char* key : {"lessons", "operations", "deltas", "ops"}) {
    if (j.contains(key) && j[key].is_array()) {
      list = j[key];
      break;
    }
  }
  if (list.empty() && (j.contains("action") || j.contains("op"))) list.push_back(j);
  return list;
}

memory::LessonKind lesson_kind_of(const json& e) {
  std::string kind = util::to_lower(str(e, {"kind", "category_kind", "lesson_kind"}));
  return kind == "pitfall"  ? memory::LessonKind::pitfall
         : kind == "fix"    ? memory::LessonKind::fix
         : kind == "recipe" ? memory::LessonKind::recipe
                            : memory::LessonKind::strategy;
}

// The scope the model asked for, from the reflection's context: anywhere, the backend, this
// target, or (the default) this category on this backend.
memory::LessonScope lesson_scope_of(const json& e, const LessonContext& ctx) {
  std::string scope = util::to_lower(str(e, {"scope"}));
  if (scope == "any" || scope == "general" || scope == "everywhere") return {};
  if (scope == "backend") return {"", ctx.backend, "", ""};
  if (scope == "target" || scope == "hardware") return {ctx.category, ctx.backend, ctx.target, ctx.toolchain};
  return {ctx.category, ctx.backend, "", ""};
}

// A lesson's title and text within the limits the prompt states, each cut at a clause boundary
// (never mid-word: a lesson shown later must read whole).
void keep_to_limits(memory::Lesson& l) {
  if (l.title.size() > k_max_lesson_title_chars) l.title = util::shorten_at_clause(l.title, k_max_lesson_title_chars);
  if (l.text.size() > k_max_lesson_text_chars) l.text = util::shorten_at_clause(l.text, k_max_lesson_text_chars);
}

// An "add": the new lesson in `d`; the problem when it cannot be added.
std::optional<std::string> parse_added_lesson(const json& e, const LessonContext& ctx, memory::LessonDelta& d) {
  d.op = memory::LessonDelta::Op::add;
  memory::Lesson& l = d.lesson;
  l.title = str(e, {"title", "name"});
  l.text = str(e, {"text", "lesson", "body", "description"});
  if (l.text.empty()) return "an added lesson has no text";
  // Never cut mid-word: a lesson shown later must read whole (util::shorten_at_clause).
  if (l.title.empty()) l.title = util::shorten_at_clause(l.text, 60);
  keep_to_limits(l);
  l.kind = lesson_kind_of(e);
  l.error_signature = str(e, {"error_signature", "signature"});
  if (l.kind != memory::LessonKind::fix) l.error_signature.clear();
  if (l.kind == memory::LessonKind::fix && l.error_signature.empty()) l.error_signature = ctx.failure_signature;
  l.scope = lesson_scope_of(e, ctx);
  if (ctx.source_case) l.source_cases.push_back(*ctx.source_case);
  return std::nullopt;
}

// An upvote, downvote, deprecate or edit of a lesson the prompt showed; the problem when it
// names another or changes nothing. A lesson listed by title only may be edited only whole: a
// new title and a new text, which need nothing of the old text (a partial edit would keep text
// the model never saw). Without that, a lesson the evidence contradicts could only be voted
// down (the real-model run of 2026-12-07 asked for it).
std::optional<std::string> parse_lesson_change(const json& e, const std::string& action, const LessonContext& ctx,
                                               memory::LessonDelta& d) {
  using Op = memory::LessonDelta::Op;
  std::string id = str(e, {"id", "lesson_id", "lesson"});
  if (id.starts_with("lesson:")) id = id.substr(7);
  if (!ctx.known_ids.contains(id)) return "'" + action + "' names lesson '" + id + "', which was not shown";
  if (action == "edit" && ctx.editable_ids && !ctx.editable_ids->contains(id) &&
      (str(e, {"title"}).empty() || str(e, {"text", "lesson"}).empty())) {
    return "'edit' names lesson '" + id + "', whose whole text was not shown: replace it with both a title and a text";
  }
  d.lesson_id = id;
  d.op = action == "upvote" ? Op::upvote : action == "downvote" ? Op::downvote : action == "deprecate" ? Op::deprecate : Op::edit;
  if (d.op == Op::edit) {
    d.lesson.title = str(e, {"title"});
    d.lesson.text = str(e, {"text", "lesson"});
    if (d.lesson.title.empty() && d.lesson.text.empty()) return "an edit of '" + id + "' changes nothing";
    keep_to_limits(d.lesson);
  }
  std::string why = str(e, {"reason", "why"});
  if (!why.empty()) d.reason += ": " + why;
  return std::nullopt;
}

// One entry of the list as a delta; the problem when it is not one.
std::optional<std::string> parse_operation(const json& e, const LessonContext& ctx, memory::LessonDelta& d) {
  if (!e.is_object()) return "an entry is not an object";
  std::string action = util::to_lower(str(e, {"action", "op", "type"}));
  if (action.empty() && e.contains("text")) action = "add";
  d.reason = ctx.reason;
  d.source_case = ctx.source_case;
  if (action == "add" || action == "new") return parse_added_lesson(e, ctx, d);
  if (action == "upvote" || action == "downvote" || action == "deprecate" || action == "edit") {
    return parse_lesson_change(e, action, ctx, d);
  }
  return "unknown action '" + action + "'";
}

}  // namespace

std::string render_lessons_in_scope(const std::vector<memory::Lesson>& in_scope, size_t whole,
                                    std::set<std::string>* listed, std::set<std::string>* editable) {
  std::string out;
  std::vector<const memory::Lesson*> rest;
  size_t shown = 0;
  for (const auto& l : in_scope) {
    if (listed && !listed->insert(l.id).second) continue;
    if (shown >= whole) {
      rest.push_back(&l);
      continue;
    }
    ++shown;
    if (editable) editable->insert(l.id);
    std::string scope = l.scope.category.empty() ? "any op" : l.scope.category;
    if (!l.scope.backend.empty()) scope += "/" + l.scope.backend;
    if (!l.scope.target.empty()) scope += " on " + l.scope.target;
    out += fmt::format("- [{}] ({} · {} · helpful {} / harmful {}) {}: {}", l.id, memory::lesson_kind_name(l.kind), scope,
                       l.helpful, l.harmful, util::replace_all(l.title, "\n", " "), util::replace_all(l.text, "\n", " "));
    if (!l.error_signature.empty()) out += fmt::format(" (fixes: {})", util::replace_all(l.error_signature, "\n", " "));
    out += "\n";
  }
  if (!rest.empty()) {
    out += "Also in scope (title only: vote on these by id; an edit of one replaces it whole, so it gives both a title and a "
           "text):\n";
    for (const auto* l : rest) out += fmt::format("- [{}] {}\n", l->id, util::replace_all(l->title, "\n", " "));
  }
  return out;
}

Result<std::vector<llm::Message>> build_reflection_prompt(const PromptLibrary& lib, const ReflectionInput& in) {
  // Blocks without their last line break: the template puts each on its own lines.
  auto block = [](std::string s) {
    while (!s.empty() && s.back() == '\n') s.pop_back();
    return s;
  };
  TemplateVars vars{{"op_name", in.op->name},
                    {"op_category", in.op->category},
                    {"backend", in.backend},
                    {"target", in.target},
                    {"trigger", in.trigger},
                    {"summary", block(in.summary)},
                    {"tried", block(in.tried)},
                    {"code", block(in.code)},
                    {"existing", block(in.existing)},
                    {"outcome", block(in.outcome)},
                    {"memory", in.memory ? "yes" : ""},
                    {"failure", block(in.failure)},
                    {"task_lessons", block(in.task_lessons)},
                    {"max_title", std::to_string(k_max_lesson_title_chars)},
                    {"max_text", std::to_string(k_max_lesson_text_chars)}};
  KOPE_ASSIGN(std::string system, render_template(lib.reflect_system, vars, "reflect_system.md"));
  KOPE_ASSIGN(std::string user, render_template(lib.reflect, vars, "reflect.md"));
  return std::vector<llm::Message>{{llm::Message::Role::system, std::move(system)},
                                   {llm::Message::Role::user, std::move(user)}};
}

ParsedLessons parse_lessons(std::string_view answer, const LessonContext& ctx) {
  ParsedLessons out;
  auto j = find_json(answer);
  if (!j) {
    out.problems.push_back("no JSON object in the answer");
    return out;
  }
  out.parsed = true;
  for (const auto& e : operation_list(*j)) {
    if (e.is_object() && out.deltas.size() >= k_max_lessons_per_reflection) {
      out.problems.push_back("more than three operations: the rest were ignored");
      break;
    }
    memory::LessonDelta d;
    if (auto problem = parse_operation(e, ctx, d)) {
      out.problems.push_back(std::move(*problem));
      continue;
    }
    out.deltas.push_back(std::move(d));
  }
  return out;
}

}  // namespace kope::agent
