#include "agent/prompt.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <set>

#include <fmt/format.h>

#include "agent/template.h"
#include "eval/native.h"
#include "eval/registry.h"
#include "hw/cpu_id.h"
#include "util/fs.h"
#include "util/strings.h"

namespace kope::agent {

namespace {

// Replaces `{{> file}}` with the file's content (from the same folder), recursively, depth 4.
Result<std::string> expand_partials(const fs::path& dir, std::string text, std::string_view name, int depth = 0) {
  size_t pos = 0;
  while ((pos = text.find("{{>", pos)) != std::string::npos) {
    size_t close = text.find("}}", pos);
    if (close == std::string::npos) return fail(ErrorKind::config, "{}: unclosed '{{{{>' partial", name);
    std::string file(util::trim(std::string_view(text).substr(pos + 3, close - pos - 3)));
    if (depth >= 4) return fail(ErrorKind::config, "{}: partials nested too deep at '{}'", name, file);
    if (file.empty() || file.find('/') != std::string::npos || file.starts_with(".")) {
      return fail(ErrorKind::config, "{}: bad partial name '{}' (a file in the same folder)", name, file);
    }
    KOPE_ASSIGN(std::string content, util::read_file(dir / file));
    KOPE_ASSIGN(std::string expanded, expand_partials(dir, std::move(content), file, depth + 1));
    // A partial tag alone on its line takes its newline with it.
    size_t end = close + 2;
    if (end < text.size() && text[end] == '\n' && !expanded.empty() && expanded.back() == '\n') ++end;
    text.replace(pos, end - pos, expanded);
    pos += expanded.size();
  }
  return text;
}

Result<std::string> load_template(const fs::path& dir, const std::string& file) {
  KOPE_ASSIGN(std::string text, util::read_file(dir / file));
  std::string name = (dir / file).string();
  KOPE_ASSIGN(std::string expanded, expand_partials(dir, std::move(text), name));
  KOPE_TRY(check_template(expanded, name));
  return expanded;
}

std::string fmt_us(double us) {
  if (us >= 10000) return fmt::format("{:.1f} ms", us / 1000);
  if (us >= 100) return fmt::format("{:.0f} us", us);
  if (us >= 1) return fmt::format("{:.2f} us", us);
  return fmt::format("{:.3f} us", us);
}

// One line of text: line breaks become spaces; longer than `max` bytes, it is cut at a word
// boundary and marked with "...".
std::string one_line(std::string_view s, size_t max = SIZE_MAX) {
  std::string out;
  for (char c : s) out += (c == '\n' || c == '\r') ? ' ' : c;
  out = std::string(util::trim(out));
  if (out.size() > max) {
    size_t cut = out.rfind(' ', max - 3);
    if (cut == std::string::npos || cut < max / 2) cut = max - 3;
    while (cut > 0 && (static_cast<unsigned char>(out[cut]) & 0xC0) == 0x80) --cut;
    out = std::string(util::trim(std::string_view(out).substr(0, cut))) + "...";
  }
  return out;
}

// A markdown table cell: one line, `|` escaped so it cannot end the cell.
std::string cell(std::string_view s, size_t max = SIZE_MAX) { return util::replace_all(one_line(s, max), "|", "\\|"); }

std::string item_text(const context::Item& it) { return "- " + it.text + "\n"; }

// The template variables of the knowledge sections, in the order the templates show them.
constexpr const char* k_knowledge_keys[] = {"exp_kernels", "exp_cases", "exp_lessons", "exp_feasibility", "exp_unverified", "notes"};


// "category=a, b; stage=draft" into `note`; fails naming `where` for an unknown key or stage.
Status parse_applies(std::string_view spec, PromptNote& note, const std::string& where) {
  for (const auto& clause : util::split(std::string(spec), ';')) {
    std::string_view c = util::trim(clause);
    if (c.empty()) continue;
    size_t eq = c.find('=');
    std::string key(util::trim(c.substr(0, eq)));
    if (eq == std::string_view::npos || (key != "category" && key != "stage")) {
      return fail(ErrorKind::config, "{}: bad 'applies:' clause '{}' (expected category=... or stage=...)", where, c);
    }
    for (const auto& v : util::split(std::string(c.substr(eq + 1)), ',')) {
      std::string value(util::trim(v));
      if (value.empty()) continue;
      if (key == "stage" && !memory::parse_stage(value)) {
        return fail(ErrorKind::config, "{}: unknown stage '{}' (expected draft, repair or refine)", where, value);
      }
      (key == "category" ? note.categories : note.stages).insert(value);
    }
  }
  return {};
}

// notes.md (rendered) split at "## " headings; an "applies:" line right under a heading limits
// the note (PromptNote).
Result<std::vector<PromptNote>> parse_notes(const std::string& text, const std::string& file) {
  std::vector<PromptNote> notes;
  PromptNote cur;
  auto flush = [&] {
    cur.body = std::string(util::trim(cur.body));
    if (!cur.title.empty() && !cur.body.empty()) notes.push_back(cur);
    cur = PromptNote{};
  };
  bool heading_just_seen = false;
  for (const auto& line : util::split(text, '\n')) {
    if (line.starts_with("## ")) {
      flush();
      cur.title = std::string(util::trim(std::string_view(line).substr(3)));
      heading_just_seen = true;
      continue;
    }
    if (heading_just_seen && line.starts_with("applies:")) {
      KOPE_TRY(parse_applies(std::string_view(line).substr(8), cur, fmt::format("{} (note '{}')", file, cur.title)));
    } else {
      cur.body += line + "\n";
    }
    heading_just_seen = false;
  }
  flush();
  return notes;
}

}  // namespace

// --- PromptLibrary ---------------------------------------------------------------------------

Result<PromptLibrary> PromptLibrary::load(const fs::path& root, std::string_view backend) {
  PromptLibrary lib;
  lib.backend = std::string(backend);
  const eval::BackendRow* row = eval::find_backend_row(backend);
  lib.dir = root / (row ? row->prompt_folder : backend);
  std::error_code ec;
  if (!fs::is_directory(lib.dir, ec)) {
    return fail(ErrorKind::not_found, "no prompt templates for backend '{}' (expected folder {})", backend, lib.dir.string());
  }
  KOPE_ASSIGN(lib.system, load_template(lib.dir, "system.md"));
  KOPE_ASSIGN(lib.draft, load_template(lib.dir, "draft.md"));
  KOPE_ASSIGN(lib.repair, load_template(lib.dir, "repair.md"));
  KOPE_ASSIGN(lib.refine, load_template(lib.dir, "refine.md"));
  KOPE_ASSIGN(lib.reflect_system, load_template(lib.dir, "reflect_system.md"));
  KOPE_ASSIGN(lib.reflect, load_template(lib.dir, "reflect.md"));
  KOPE_ASSIGN(std::string notes, load_template(lib.dir, "notes.md"));
  KOPE_ASSIGN(notes, render_template(notes, {}, (lib.dir / "notes.md").string()));
  KOPE_ASSIGN(lib.notes, parse_notes(notes, (lib.dir / "notes.md").string()));
  return lib;
}

bool PromptNote::applies_to(std::string_view category, memory::Stage stage) const {
  return (categories.empty() || categories.contains(std::string(category))) &&
         (stages.empty() || stages.contains(std::string(memory::stage_name(stage))));
}

const std::string& PromptLibrary::stage_template(memory::Stage s) const {
  switch (s) {
    case memory::Stage::draft: return draft;
    case memory::Stage::repair: return repair;
    case memory::Stage::refine: return refine;
  }
  return draft;
}

fs::path default_prompts_dir() { return util::share_dir() / "prompts"; }

// --- SharedEstimator -------------------------------------------------------------------------

int64_t SharedEstimator::estimate(std::string_view text) const {
  std::lock_guard lock(m_mutex);
  return m_estimator.estimate(text);
}

void SharedEstimator::calibrate(int64_t estimated, int64_t reported) {
  std::lock_guard lock(m_mutex);
  m_estimator.calibrate(estimated, reported);
}

context::TokenEstimator SharedEstimator::snapshot() const {
  std::lock_guard lock(m_mutex);
  return m_estimator;
}

double SharedEstimator::scale() const {
  std::lock_guard lock(m_mutex);
  return m_estimator.scale();
}

std::string knowledge_content_key(std::string_view text) {
  size_t fence = text.find("```");
  if (fence != std::string_view::npos) {
    size_t body = text.find('\n', fence);
    size_t close = body == std::string_view::npos ? std::string_view::npos : text.find("```", body);
    if (close != std::string_view::npos) return "code:" + std::string(util::trim(text.substr(body, close - body)));
  }
  std::string_view t = util::trim(text);
  if (t.starts_with("- ")) t = util::trim(t.substr(2));
  if (t.starts_with("(from ")) t = util::trim(t.substr(t.find(')') + 1));
  if (t.starts_with("[")) {
    size_t close = t.find(']');
    if (close != std::string_view::npos) t = t.substr(close + 1);
  }
  return "text:" + std::string(util::trim(t));
}

// --- knowledge -------------------------------------------------------------------------------

namespace {

// The words of the task (name, category, summary, stage) a note may mention.
std::set<std::string> task_words(const spec::OpSpec& op, memory::Stage stage) {
  std::set<std::string> words;
  std::string query = op.name + " " + op.category + " " + op.summary + " " + std::string(memory::stage_name(stage));
  for (auto& w : util::split(util::to_lower(query), ' ')) {
    std::string clean;
    for (char c : w) {
      if (std::isalnum(static_cast<unsigned char>(c))) clean += c;
    }
    for (auto& part : util::split(clean, '_')) {
      if (part.size() >= 4) words.insert(part);
    }
    if (clean.size() >= 4) words.insert(clean);
  }
  return words;
}

// The library's notes that apply to this op and stage and were not shown in this task yet,
// valued by how many words of the task they mention (at least 0.2 when the note names the op's
// category in its "applies:" line).
void add_notes(const PromptLibrary& lib, const spec::OpSpec& op, memory::Stage stage, const SharedEstimator& estimator,
               const std::set<std::string>& shown, KnowledgeCandidates& out) {
  std::set<std::string> words = task_words(op, stage);
  for (size_t i = 0; i < lib.notes.size(); ++i) {
    const PromptNote& note = lib.notes[i];
    std::string id = fmt::format("note:{}", i + 1);
    if (shown.contains(id) || !note.applies_to(op.category, stage)) continue;
    std::string lower = util::to_lower(note.title + " " + note.body);
    int hits = 0;
    for (const auto& w : words) {
      if (lower.find(w.substr(0, std::min<size_t>(w.size(), 7))) != std::string::npos) ++hits;
    }
    bool for_category = note.categories.contains(op.category);
    context::Item it;
    it.id = id;
    it.tier = context::Tier::cold;
    it.section = "notes";
    it.text = note.title + ": " + util::replace_all(note.body, "\n", " ");
    it.tokens = estimator.estimate(item_text(it));
    it.value = std::max(0.1 * std::min(hits, 5), for_category ? 0.2 : 0.0);
    it.parts = {{"relevance", it.value}, {"word_hits", static_cast<double>(hits)}};
    it.reason = for_category ? fmt::format("general note for {} ({} stage), not shown in this task yet", op.category,
                                           memory::stage_name(stage))
                             : fmt::format("general note mentioning {} word{} of the task, not shown in this task yet",
                                           hits, hits == 1 ? "" : "s");
    out.cold.push_back(std::move(it));
  }
}

}  // namespace

KnowledgeCandidates classify_knowledge(const std::vector<memory::RetrievedItem>& state_items,
                                       const std::vector<memory::RetrievedItem>& broad_items, const spec::OpSpec& op,
                                       memory::Stage stage, const PromptLibrary& lib, const SharedEstimator& estimator,
                                       const std::function<std::optional<std::string>(std::string_view)>& category_of,
                                       const std::set<std::string>& exclude, const std::set<std::string>& shown_notes) {
  KnowledgeCandidates out;
  std::set<std::string> seen = exclude;
  std::set<std::string> seen_content;  // no item twice in one prompt, whatever its id
  double max_score = 1e-9;
  for (const auto* list : {&state_items, &broad_items}) {
    for (const auto& it : *list) max_score = std::max(max_score, it.score);
  }
  auto make = [&](const memory::RetrievedItem& r, context::Tier tier, double scale, std::string reason,
                  std::string category) {
    context::Item it;
    it.category = std::move(category);
    it.id = r.id;
    it.tier = tier;
    it.foreign = r.foreign;
    it.text = std::string(util::trim(r.text));
    if (tier == context::Tier::cold) {
      it.section = "notes";
    } else if (r.foreign) {
      it.section = "feasibility";
    } else if (r.quarantined) {
      it.section = "unverified";
    } else if (r.kind == memory::RetrievedItem::Kind::best_kernel) {
      it.section = "kernels";
    } else if (r.kind == memory::RetrievedItem::Kind::case_summary) {
      it.section = "cases";
    } else {
      it.section = "lessons";
    }
    if (r.foreign && !r.target.empty()) it.text = "(from " + r.target + ") " + it.text;
    it.tokens = estimator.estimate(item_text(it));
    double relevance = std::max(0.0, r.score) / max_score;
    // Lessons are ranked by what they earned at this stage: up to twice the relevance for a
    // lesson that helped, down to half for one that hurt.
    double learned_weight = r.kind == memory::RetrievedItem::Kind::lesson ? 1.0 + std::clamp(r.learned, -0.5, 1.0) : 1.0;
    it.value = relevance * scale * learned_weight;
    it.learned = r.learned;
    it.parts = r.score_parts;
    it.parts["relevance"] = relevance;
    it.parts["learned"] = r.learned;
    it.reason = std::move(reason);
    out.scores[r.id] = r.score;
    return it;
  };
  auto fresh = [&](const memory::RetrievedItem& r) {
    return seen.insert(r.id).second && seen_content.insert(knowledge_content_key(r.text)).second;
  };
  // The op category an item is about: the store's, else the suite's ("" for general items).
  auto category_of_item = [&](const memory::RetrievedItem& r) {
    if (!r.category.empty()) return r.category;
    if (r.op == op.name) return op.category;
    return r.op.empty() ? std::string() : category_of(r.op).value_or("");
  };
  // Where an item belongs, and why; nullopt when it is not likely to change this attempt's outcome.
  auto place = [&](const memory::RetrievedItem& r, bool from_state) -> std::optional<std::pair<context::Tier, std::string>> {
    bool other_op = !r.op.empty() && r.op != op.name;
    std::string category = category_of_item(r);
    bool other_category = !category.empty() && category != op.category;
    bool shows_code = r.kind == memory::RetrievedItem::Kind::best_kernel || r.text.find("```") != std::string::npos;
    if (r.kind == memory::RetrievedItem::Kind::lesson) {
      if (other_category && r.learned <= 0) return std::nullopt;  // another category's lesson that never paid off
      if (other_category) {
        return std::pair{context::Tier::cold, fmt::format("lesson for {} with learned value {:.2f}", category, r.learned)};
      }
      return std::pair{from_state ? context::Tier::warm : context::Tier::cold,
                       category.empty() ? std::string("lesson for any op") : "lesson for " + category};
    }
    if (other_op && shows_code && !r.structurally_close) return std::nullopt;  // another computation's code
    std::string what = !other_op              ? std::string("this op")
                       : !other_category      ? fmt::format("{} (same category)", r.op)
                       : r.structurally_close ? fmt::format("{} ({}: same signature shape and arithmetic intensity)", r.op, category)
                                              : fmt::format("{} ({})", r.op, category);
    if (!from_state || other_category) return std::pair{context::Tier::cold, what};
    return std::pair{context::Tier::warm, what};
  };
  for (const auto* list : {&state_items, &broad_items}) {
    bool from_state = list == &state_items;
    for (const auto& r : *list) {
      auto where = place(r, from_state);
      if (!where || !fresh(r)) continue;
      bool warm = where->first == context::Tier::warm;
      (warm ? out.warm : out.cold).push_back(make(r, where->first, warm ? 1.0 : 0.8, std::move(where->second),
                                                   category_of_item(r)));
    }
  }
  add_notes(lib, op, stage, estimator, shown_notes, out);
  return out;
}

// --- assembly --------------------------------------------------------------------------------

Result<AssembledPrompt> assemble_prompt(const PromptLibrary& lib, const PromptInput& in, const KnowledgeCandidates& knowledge,
                                        const context::Budget& budget, context::Mode mode, const SharedEstimator& shared) {
  AssembledPrompt out;
  // One scale for the whole prompt, even while other ops calibrate the shared estimator.
  const context::TokenEstimator estimator = shared.snapshot();
  out.token_scale = estimator.scale();
  KOPE_ASSIGN(std::string system,
              render_template(lib.system, {{"toolchain", in.toolchain}, {"backend", lib.backend}}, "system.md"));
  int64_t system_tokens = estimator.estimate(system);
  out.limit = budget.window - budget.generation;
  const std::string& tmpl = lib.stage_template(in.stage);
  std::string tmpl_name = std::string(memory::stage_name(in.stage)) + ".md";

  TemplateVars vars{{"op_name", in.op->name},
                    {"op_category", in.op->category},
                    {"iteration", std::to_string(in.iteration)},
                    {"max_iterations", std::to_string(in.max_iterations)},
                    {"stage", std::string(memory::stage_name(in.stage))},
                    {"hardware", in.hardware},
                    {"op_spec", render_op_spec(*in.op)},
                    {"signature", eval::backend_row_or_default(lib.backend).signature(*in.op)},
                    {"reference", in.reference_source},
                    {"incumbent", in.incumbent},
                    {"feedback", in.feedback},
                    {"tried", in.tried},
                    {"toolchain", in.toolchain},
                    {"backend", lib.backend},
                    {"exp_kernels", ""},
                    {"exp_cases", ""},
                    {"exp_lessons", ""},
                    {"exp_feasibility", ""},
                    {"exp_unverified", ""},
                    {"notes", ""}};

  // The hot tier alone; cut its largest blocks while it does not fit.
  KOPE_ASSIGN(std::string hot_user, render_template(tmpl, vars, tmpl_name));
  int64_t hot_tokens = estimator.estimate(hot_user);
  for (int round = 0; system_tokens + hot_tokens > out.limit && round < 12; ++round) {
    std::string* largest = nullptr;
    for (const char* key : {"reference", "incumbent", "feedback", "tried", "op_spec", "hardware"}) {
      std::string& v = vars[key];
      if (v.size() > 400 && (!largest || v.size() > largest->size())) largest = &v;
    }
    if (!largest) break;
    *largest = cut_at_lines(*largest, largest->size() / 2);
    out.hot_truncated = true;
    KOPE_ASSIGN(hot_user, render_template(tmpl, vars, tmpl_name));
    hot_tokens = estimator.estimate(hot_user);
  }
  if (system_tokens + hot_tokens > out.limit) {
    return fail(ErrorKind::config,
                "the prompt for {} needs {} tokens even with its hot tier cut down, but the model's window leaves {} "
                "(window {} − generation {}); use a model with a larger window",
                in.op->name, system_tokens + hot_tokens, out.limit, budget.window, budget.generation);
  }

  // Section headings are part of what knowledge costs: reserve room for all of them, so the
  // admitted items plus their headings stay within B_k.
  TemplateVars all_sections = vars;
  for (const char* key : k_knowledge_keys) all_sections[key] = "-";
  KOPE_ASSIGN(std::string with_headings, render_template(tmpl, all_sections, tmpl_name));
  int64_t headings = std::max<int64_t>(0, estimator.estimate(with_headings) - hot_tokens);
  context::Budget b = budget;
  b.system_prompt = system_tokens + headings;
  context::Item hot_item;
  hot_item.id = "hot";
  hot_item.tier = context::Tier::hot;
  hot_item.tokens = hot_tokens;
  context::Selection sel = context::select({hot_item}, knowledge.warm, knowledge.cold, b, mode);
  context::Budget formula = budget;
  formula.system_prompt = system_tokens;
  out.knowledge_budget = formula.knowledge(hot_tokens);
  out.dropped = static_cast<int>(sel.dropped.size());
  std::vector<context::Item> chosen;
  for (auto& it : sel.chosen) {
    if (it.tier != context::Tier::hot) chosen.push_back(std::move(it));
  }

  // Render with the chosen items; section headings cost a little, so drop the least valuable
  // item per token until the whole prompt fits.
  std::string user;
  for (;;) {
    for (const char* key : k_knowledge_keys) vars[key] = "";
    for (const auto& it : chosen) {
      std::string key = it.section == "notes" ? "notes" : "exp_" + it.section;
      if (!vars.contains(key)) key = "notes";  // an unknown section still reaches the prompt
      vars[key] += item_text(it);
    }
    KOPE_ASSIGN(user, render_template(tmpl, vars, tmpl_name));
    int64_t total = system_tokens + estimator.estimate(user);
    if (total <= out.limit || chosen.empty()) {
      out.total_tokens = total;
      break;
    }
    auto worst = std::min_element(chosen.begin(), chosen.end(), [](const auto& a, const auto& b2) {
      return a.value / static_cast<double>(std::max<int64_t>(1, a.tokens)) <
             b2.value / static_cast<double>(std::max<int64_t>(1, b2.tokens));
    });
    chosen.erase(worst);
    ++out.dropped;
  }

  // Tier accounting: hot is the prompt rendered without knowledge (identical in every mode);
  // warm is what the warm items and their headings add to it; cold is the rest.
  bool any_warm = false, any_cold = false;
  for (const auto& it : chosen) {
    (it.tier == context::Tier::warm ? any_warm : any_cold) = true;
    out.admitted.push_back(it.id);
    out.admission.push_back({it.id, std::string(context::tier_name(it.tier)), it.section, it.tokens, it.value, it.parts,
                             it.reason, it.category});
    auto s = knowledge.scores.find(it.id);
    if (s != knowledge.scores.end()) out.memory_items.emplace_back(it.id, s->second);
  }
  int64_t user_tokens = out.total_tokens - system_tokens;
  int64_t warm = 0, cold = 0;
  if (any_warm && any_cold) {
    TemplateVars warm_only = vars;
    for (const char* key : k_knowledge_keys) warm_only[key] = "";
    for (const auto& it : chosen) {
      if (it.tier != context::Tier::warm) continue;
      std::string k = "exp_" + it.section;
      warm_only[warm_only.contains(k) ? k : "notes"] += item_text(it);
    }
    KOPE_ASSIGN(std::string w, render_template(tmpl, warm_only, tmpl_name));
    warm = std::clamp<int64_t>(estimator.estimate(w) - hot_tokens, 0, user_tokens - hot_tokens);
    cold = std::max<int64_t>(0, user_tokens - hot_tokens - warm);
  } else if (any_warm) {
    warm = std::max<int64_t>(0, user_tokens - hot_tokens);
  } else if (any_cold) {
    cold = std::max<int64_t>(0, user_tokens - hot_tokens);
  }
  out.tier_tokens = {{"system", system_tokens},
                     {"hot", user_tokens - warm - cold},
                     {"warm", warm},
                     {"cold", cold}};
  out.messages = {{llm::Message::Role::system, std::move(system)}, {llm::Message::Role::user, std::move(user)}};
  return out;
}

// --- hot-tier blocks -------------------------------------------------------------------------

HardwareGuide describe_hardware_guide(std::string_view backend) {
  HardwareGuide g;
  g.backend = std::string(backend);
  hw::CpuIdentity id = hw::cpu_identity();
  g.microarchitecture = hw::microarchitecture(id);
  g.cpu_family = id.family;
  g.cpu_model = id.model;
  eval::backend_row_or_default(backend).describe_device(g);
  return g;
}

std::string render_hardware(const HardwareProfile& hw, std::string_view toolchain, const HardwareGuide& guide) {
  std::string out;
  out += fmt::format("- target: {}\n", hw.target.str());
  if (!hw.cpu_model.empty()) {
    std::string cpu = hw.cpu_model;
    std::vector<std::string> ident;
    if (!guide.microarchitecture.empty()) ident.push_back(guide.microarchitecture + " microarchitecture");
    if (guide.cpu_family > 0) ident.push_back(fmt::format("CPUID family {:#x} model {:#x}", guide.cpu_family, guide.cpu_model));
    if (!ident.empty()) cpu += " (" + util::join(ident, ", ") + ")";
    out += fmt::format("- CPU: {}\n", cpu);
  }
  out += eval::backend_row_or_default(guide.backend).device_section(hw, guide);
  if (hw.l1d_bytes || hw.l2_bytes || hw.l3_bytes) {
    out += fmt::format("- caches: L1d {} per core, L2 {} per core, L3 {} shared\n",
                       util::human_bytes(static_cast<double>(hw.l1d_bytes)), util::human_bytes(static_cast<double>(hw.l2_bytes)),
                       util::human_bytes(static_cast<double>(hw.l3_bytes)));
  }
  if (hw.peak_gflops > 0) {
    bool measured_core = hw.peak_gflops_core > 0;
    double core = measured_core ? hw.peak_gflops_core : hw.peak_gflops / std::max(1, hw.cores);
    out += fmt::format("- FP32 FMA throughput: {:.0f} GFLOP/s per core ({}), {:.0f} GFLOP/s on all {} cores (measured; an "
                       "FMA counts as 2 flops)\n",
                       core, measured_core ? "measured on one core" : "all-core figure / cores", hw.peak_gflops, hw.cores);
  }
  if (hw.peak_gbps > 0) {
    out += fmt::format("- DRAM bandwidth: {:.1f} GB/s, measured with the STREAM triad a[i] = b[i] + s*c[i] on all cores and "
                       "counted as 24 bytes per element (reads of b and c, write of a): the write-allocate read of a is not "
                       "counted, so the bytes the memory moves are up to 4/3 of this\n",
                       hw.peak_gbps);
  }
  if (hw.peak_gflops_f64 > 0) {
    out += fmt::format("- FP64 FMA throughput: {:.0f} GFLOP/s on all cores ({:.0f} per core; measured)\n", hw.peak_gflops_f64,
                       hw.peak_gflops_f64_core);
  }
  if (!hw.bandwidth.empty()) {
    std::vector<std::string> pts;
    for (const auto& p : hw.bandwidth) pts.push_back(fmt::format("{} {:.0f} GB/s", util::human_bytes(static_cast<double>(p.working_set_bytes)), p.gbps));
    out += "- triad bandwidth by working set (same counting): " + util::join(pts, ", ") + "\n";
    out += "- roofline of a case: max(flops / the peak of its dtype, bytes / the bandwidth at a working set of `bytes`)\n";
  }
  out += fmt::format("- compiler: {}\n", toolchain);
  return out;
}

namespace {

// How the dtypes whose C type does not say what they hold are stored (docs/design.md §2).
std::string dtype_storage_note(spec::DType t) {
  switch (t) {
    case spec::DType::f16: return " (uint16_t bits of IEEE binary16)";
    case spec::DType::bf16: return " (uint16_t: the upper 16 bits of an f32, rounded to nearest even)";
    case spec::DType::boolean: return " (uint8_t, 0 or 1)";
    default: return "";
  }
}

}  // namespace

std::string render_op_spec(const spec::OpSpec& op) {
  std::string out;
  out += fmt::format("- name: {} (category {}, level {})\n", op.name, op.category, op.level);
  if (!op.summary.empty()) out += fmt::format("- what it computes: {}\n", op.summary);
  out += fmt::format("- dims: {}\n", util::join(op.dims, ", "));
  auto tensor = [&](const spec::Tensor& t, bool input) {
    std::vector<std::string> shape;
    for (const auto& e : t.shape) shape.push_back(e.text());
    std::string s = fmt::format("  - {} {}[{}]", t.name, spec::dtype_name(t.dtype), util::join(shape, ", "));
    if ((input || t.inout) && t.init) s += fmt::format(", filled with {}", t.init->text);
    s += dtype_storage_note(t.dtype);
    if (!input && t.tolerance) {
      s += fmt::format(", its own tolerance: atol {}, rtol {}", t.tolerance->atol ? t.tolerance->atol->text() : "as the op's",
                       t.tolerance->rtol ? t.tolerance->rtol->text() : "as the op's");
    }
    if (!input && !spec::dtype_is_float(t.dtype) && t.dtype != spec::DType::i32 && t.dtype != spec::DType::i64) {
      s += ", compared exactly";
    }
    return s + "\n";
  };
  out += "- inputs (read-only):\n";
  bool specials = false;
  for (const auto& t : op.inputs) {
    if (!t.inout) out += tensor(t, true);
    specials = specials || (t.init && t.init->specials > 0);
  }
  if (specials) {
    out += "  (`specials(p)`: a fraction p of the elements, at random positions, is NaN, +Inf, -Inf, -0.0 or a subnormal, in "
           "equal shares)\n";
  }
  out += "- outputs (garbage on entry; write every element):\n";
  for (const auto& t : op.outputs) {
    if (!t.inout) out += tensor(t, false);
  }
  if (!op.inout_pairs().empty()) {
    out += "- inouts (after the outputs; their initial contents on entry; updated in place and checked like outputs):\n";
    for (const auto& t : op.outputs) {
      if (t.inout) out += tensor(t, false);
    }
  }
  if (!op.attrs.empty()) {
    out += "- attributes (passed by value):\n";
    for (const auto& a : op.attrs) {
      if (a.per_case) {
        out += fmt::format("  - {} {}{}, set by each case (see the cases)\n", a.name, spec::dtype_name(a.dtype), dtype_storage_note(a.dtype));
        continue;
      }
      out += spec::dtype_is_float(a.dtype) ? fmt::format("  - {} {} = {}\n", a.name, spec::dtype_name(a.dtype), a.value)
                                           : fmt::format("  - {} {} = {}\n", a.name, spec::dtype_name(a.dtype), a.ivalue);
    }
  }
  out += fmt::format("- tolerance: |got − expected| <= {} + {}·|expected| (NaN/Inf positions must match)\n",
                     op.tolerance.atol, op.tolerance.rtol);
  out += fmt::format("- work: flops = {}, bytes = {}\n", op.flops.text(), op.bytes.text());
  std::vector<std::string> checked, timed;
  for (const auto& c : op.cases) (c.timed ? timed : checked).push_back(op.case_label(c));
  out += fmt::format("- cases checked: {}\n", util::join(checked, "; "));
  out += fmt::format("- cases checked and timed: {}\n", util::join(timed, "; "));
  return out;
}

std::string code_language(std::string_view backend) { return std::string(eval::backend_row_or_default(backend).fence); }

std::string fence_code(std::string_view code, std::string_view lang) {
  std::string out = "```" + std::string(lang) + "\n";
  out += code;
  if (!code.empty() && code.back() != '\n') out += '\n';
  return out + "```\n";
}

std::string cut_at_lines(std::string_view text, size_t max_bytes, size_t max_lines) {
  size_t end = 0, lines_kept = 0;
  while (end < text.size() && lines_kept < max_lines) {
    size_t nl = text.find('\n', end);
    size_t next = nl == std::string_view::npos ? text.size() : nl + 1;
    if (next > max_bytes) break;
    end = next;
    ++lines_kept;
  }
  if (end >= text.size()) return std::string(text);
  std::string_view rest = text.substr(end);
  size_t lines = static_cast<size_t>(std::count(rest.begin(), rest.end(), '\n')) + (rest.ends_with('\n') ? 0 : 1);
  return fmt::format("{}[... {} more line{} not shown ...]\n", text.substr(0, end), lines, lines == 1 ? "" : "s");
}

// "memory: 120 GB/s at 8.0 MiB" / "compute: 576 GFLOP/s" for a timed case; "-" when unknown.
static std::string roof_text(const TimingSummary& t) {
  if (t.roofline_bound == "memory") {
    return fmt::format("memory: {:.0f} GB/s at {}", t.roofline_gbps, util::human_bytes(static_cast<double>(t.roofline_working_set_bytes)));
  }
  if (t.roofline_bound == "compute") return fmt::format("compute: {:.0f} GFLOP/s", t.roofline_gflops);
  return "-";
}

std::string render_timings(const Attempt& inc) {
  if (inc.timings.empty()) return "";
  std::string out = "| timed case | kernel | reference | library | roofline | bound by | fraction of roofline |\n|---|---|---|---|---|---|---|\n";
  for (const auto& t : inc.timings) {
    out += fmt::format("| {} | {} ± {:.1f}% | {} | {} | {} | {} | {:.0f}%{} |\n", cell(t.label), fmt_us(t.median_us),
                       t.median_us > 0 ? 100 * t.ci95_us / t.median_us : 0.0, fmt_us(t.reference_us),
                       t.library_us ? fmt_us(*t.library_us) : std::string("-"), fmt_us(t.roofline_us), cell(roof_text(t)),
                       100 * t.fraction_of_roofline, t.beyond_roofline ? " (beyond the model: kope's roofline is wrong here)" : "");
  }
  return out;
}

std::string render_incumbent(const Attempt& inc, std::string_view code, std::string_view lang) {
  std::string out;
  out += fmt::format("From attempt {} ({}): {}\n", inc.iteration, memory::stage_name(inc.stage), inc.optimisation);
  out += fmt::format("Speedup vs reference {:.2f}x", inc.speedup_vs_reference.value_or(0));
  if (inc.speedup_vs_library) {
    out += fmt::format(", vs library {:.2f}x{}", *inc.speedup_vs_library,
                       inc.library_config ? inc.library_config->forced_note() : std::string());
  }
  if (inc.fraction_of_roofline) out += fmt::format(", {:.0f}% of the roofline", 100 * *inc.fraction_of_roofline);
  out += ".\n";
  out += render_timings(inc);
  out += fence_code(code, lang);
  return out;
}

// Whether the incumbent decision came from timing the two kernels side by side (the
// evaluator's interleaved comparison) rather than from the incumbent's recorded timings.
bool compared_side_by_side(const Attempt& a) { return !a.decision.empty() && a.decision != "recorded_timings"; }

std::string describe_outcome(const Attempt& a) {
  if (a.correct()) {
    std::string s = fmt::format("correct, {:.2f}x vs reference", a.speedup_vs_reference.value_or(0));
    if (a.speedup_vs_incumbent) {
      s += fmt::format(", {:.2f}x vs incumbent{}", *a.speedup_vs_incumbent, compared_side_by_side(a) ? " timed beside it" : "");
    }
    if (a.improved) s += " (new incumbent)";
    return s;
  }
  // The cause is never trimmed: it is what the next attempt needs.
  std::string msg = one_line(a.message);
  std::string verdict(eval::verdict_name(a.verdict));
  return msg.empty() ? verdict : verdict + ": " + msg;
}

// How the incumbent decision was reached, in the numbers it used. The table beside it shows the
// incumbent's recorded timing, measured at another time and perhaps under other load; without
// this a reader sees "1.08x vs incumbent" next to "+200%" and "not faster" and cannot tell which
// figure decided, or why.
std::string render_decision(const Attempt& a) {
  if (!a.speedup_vs_incumbent) return "";
  std::string out;
  if (compared_side_by_side(a)) {
    std::string interval = a.decision_lower && a.decision_upper && std::isfinite(*a.decision_upper)
                               ? fmt::format(" (95% interval {:.2f}x to {:.2f}x)", *a.decision_lower, *a.decision_upper)
                               : " (too few pairs for an interval)";
    std::string verdict = "undecided within the comparison's time, and an undecided kernel does not replace the incumbent";
    auto d = eval::parse_incumbent_decision(a.decision);
    if (d == eval::IncumbentDecision::faster) verdict = "faster";
    if (d == eval::IncumbentDecision::slower) verdict = "slower";
    if (d == eval::IncumbentDecision::not_faster) verdict = "not faster by more than the required margin";
    out += fmt::format("Timed in alternating batches beside the incumbent (the same load for both): {:.2f}x the incumbent's speed{}, "
                       "geometric mean over the timed cases, {} pairs: {}.\n",
                       *a.speedup_vs_incumbent, interval, a.decision_pairs, verdict);
  } else {
    out += fmt::format("Compared with the incumbent's recorded timings: {:.2f}x its speed (geometric mean over the timed cases).\n",
                       *a.speedup_vs_incumbent);
  }
  if (a.margin_demanded) {
    out += fmt::format("Its timing was disturbed by other load, so it had to exceed {:.2f}x to replace the incumbent{}.\n",
                       *a.margin_demanded, a.improved ? "" : ", and did not");
  }
  return out;
}

std::string render_feedback(const Attempt& a, const Attempt* inc, std::string_view lang) {
  std::string out;
  out += fmt::format("Attempt {} ({}; \"{}\") ended: {}.\n", a.iteration, memory::stage_name(a.stage),
                     one_line(a.optimisation, 120), describe_outcome(a));
  if (!a.has_code) {
    out += fmt::format("The answer held no usable code: reply with one ```{} block that defines kope_kernel.\n", lang);
  }
  if (!a.correct() && !a.message.empty()) out += "Evaluator: " + a.message + "\n";
  if (!a.first_mismatch.empty()) out += "First mismatch: " + a.first_mismatch + "\n";
  if (a.cases_total > 0 && !a.correct()) out += fmt::format("Cases passed: {} of {}.\n", a.cases_passed, a.cases_total);
  if (!a.diagnostics.empty()) {
    out += "Diagnostics (trimmed):\n```\n" + cut_at_lines(a.diagnostics, 2500, 40);
    if (out.back() != '\n') out += '\n';
    out += "```\n";
  }
  if (a.correct() && !a.timings.empty()) {
    bool other_incumbent = inc && inc->iteration != a.iteration;
    out += "| timed case | this attempt | incumbent | reference | fraction of roofline |\n|---|---|---|---|---|\n";
    for (const auto& t : a.timings) {
      std::string inc_time = "-";
      if (inc && inc->iteration != a.iteration) {
        for (const auto& it : inc->timings) {
          if (it.case_index == t.case_index) {
            inc_time = fmt::format("{} ({:+.0f}%)", fmt_us(it.median_us), 100 * (t.median_us / it.median_us - 1));
          }
        }
      }
      out += fmt::format("| {} | {} | {} | {} | {:.0f}% |\n", cell(t.label), fmt_us(t.median_us), inc_time, fmt_us(t.reference_us),
                         100 * t.fraction_of_roofline);
    }
    if (other_incumbent && compared_side_by_side(a)) {
      out += "The incumbent column is its recorded timing, measured at another time; the decision rests on the side-by-side "
             "comparison.\n";
    }
    out += render_decision(a);
    if (!a.improved && other_incumbent) {
      out += "It was not faster than the incumbent, so the incumbent stays.\n";
    }
  }
  return out;
}

std::string render_tried(const std::vector<Attempt>& attempts, size_t max_rows) {
  if (attempts.empty()) return "";
  std::string out = "| # | stage | optimisation | result |\n|---|---|---|---|\n";
  size_t start = attempts.size() > max_rows ? attempts.size() - max_rows : 0;
  if (start > 0) out += fmt::format("| ... | | {} earlier attempts omitted | |\n", start);
  for (size_t i = start; i < attempts.size(); ++i) {
    const Attempt& a = attempts[i];
    // The description gives way, never the cause.
    out += fmt::format("| {} | {} | {} | {} |\n", a.iteration, memory::stage_name(a.stage), cell(a.optimisation, 70),
                       cell(describe_outcome(a)));
  }
  return out;
}

}  // namespace kope::agent
