#include "agent/prompt.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <set>

#include <fmt/format.h>

#include "agent/memory_items.h"
#include "agent/template.h"
#include "eval/native.h"
#include "eval/registry.h"
#include "util/fs.h"
#include "util/hash.h"
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

std::string item_text(const context::Item& it) { return "- " + it.text + "\n"; }

// The template variables of the knowledge sections, in the order the templates show them.
constexpr const char* k_knowledge_keys[] = {"exp_exemplar", "exp_fix",         "exp_hunks",      "exp_kernels", "exp_cases",
                                            "exp_lessons",  "exp_feasibility", "exp_unverified", "notes"};


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
  KOPE_ASSIGN(lib.op_part, load_template(lib.dir, "op.md"));
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
  if (t.starts_with(k_foreign_prefix)) t = util::trim(t.substr(t.find(')') + 1));
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
  auto make = [&](const memory::RetrievedItem& r, const std::string& text, context::Tier tier, double scale,
                  std::string reason, std::string category) {
    context::Item it;
    it.category = std::move(category);
    it.id = r.id;
    it.tier = tier;
    it.foreign = r.foreign;
    it.text = std::string(util::trim(text));
    // A retrieved item goes under the heading of what it is, whatever its tier ("General notes"
    // holds the library's notes only: an answerer read a case record there as a note).
    if (r.foreign) {
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
    // Foreign: another target or toolchain, or imported (the starter) and not yet confirmed
    // here, whose target can read like this one's; what is true of all three is that it was
    // not timed here.
    if (r.foreign && !r.target.empty()) it.text = std::string(k_foreign_prefix) + r.target + ", not timed here) " + it.text;
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
    // A lesson for any op is admitted by what it earned only when it shares words with this op's
    // query (retrieval's lexical part): credit spreads to general lessons shown in many prompts,
    // and a Winograd or pooling lesson that earned it elsewhere says nothing about a GEMV. Without
    // words in common it competes for the exploration slot like an item with no value yet.
    auto lexical = r.score_parts.find("lexical");
    if (r.kind == memory::RetrievedItem::Kind::lesson && it.category.empty() && it.learned > 0 &&
        (lexical == r.score_parts.end() || lexical->second <= 0)) {
      it.learned = 0;
      it.reason += " (no word in common with this op: its learned value does not admit it)";
    }
    out.scores[r.id] = r.score;
    return it;
  };
  // A case is one item whatever form it is retrieved in: its best-kernel form ("kernel:N") and
  // its summary ("case:N") render different text, and both reached one refine prompt (a
  // matmul_softmax kernel under "kernels that verified" and again under "General notes"). A fix
  // item is about the failed case beside it, and stays.
  std::set<int64_t> seen_cases;
  auto fresh = [&](const memory::RetrievedItem& r, const std::string& text) {
    bool one_case = r.kind != memory::RetrievedItem::Kind::lesson && r.case_id > 0 && !r.failed_case;
    if (one_case && seen_cases.contains(r.case_id)) return false;
    if (!seen.insert(r.id).second || !seen_content.insert(knowledge_content_key(text)).second) return false;
    if (one_case) seen_cases.insert(r.case_id);
    return true;
  };
  // The op category an item is about: the store's, else the suite's ("" for general items).
  auto category_of_item = [&](const memory::RetrievedItem& r) {
    if (!r.category.empty()) return r.category;
    if (r.op == op.name) return op.category;
    return r.op.empty() ? std::string() : category_of(r.op).value_or("");
  };
  // Where an item belongs, and why; nullopt when it is not likely to change this attempt's outcome.
  auto place = [&](const memory::RetrievedItem& r, const std::string& text,
                   bool from_state) -> std::optional<std::pair<context::Tier, std::string>> {
    bool other_op = !r.op.empty() && r.op != op.name;
    std::string category = category_of_item(r);
    bool other_category = !category.empty() && category != op.category;
    bool shows_code = r.kind == memory::RetrievedItem::Kind::best_kernel || text.find("```") != std::string::npos;
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
      const std::string text = render_item(r);
      auto where = place(r, text, from_state);
      if (!where || !fresh(r, text)) continue;
      bool warm = where->first == context::Tier::warm;
      (warm ? out.warm : out.cold).push_back(make(r, text, where->first, warm ? 1.0 : 0.8, std::move(where->second),
                                                   category_of_item(r)));
    }
  }
  add_notes(lib, op, stage, estimator, shown_notes, out);
  return out;
}

// --- assembly --------------------------------------------------------------------------------

namespace {

// The stage's memory ceiling in active and random mode.
int64_t stage_memory(const context::Budget& b, memory::Stage stage) {
  switch (stage) {
    case memory::Stage::draft: return b.memory_draft;
    case memory::Stage::repair: return b.memory_repair;
    case memory::Stage::refine: return b.memory_refine;
  }
  return b.memory_draft;
}

// The knowledge sections' template variables filled with `items` (each in its section; an
// unknown section still reaches the prompt, under the notes).
void fill_sections(TemplateVars& vars, const std::vector<context::Item>& items, bool warm_only = false) {
  for (const char* key : k_knowledge_keys) vars[key] = "";
  for (const auto& it : items) {
    if (warm_only && it.tier != context::Tier::warm) continue;
    std::string key = it.section == "notes" ? "notes" : "exp_" + it.section;
    if (!vars.contains(key)) key = "notes";
    vars[key] += item_text(it);
  }
}

}  // namespace

Result<AssembledPrompt> assemble_prompt(const PromptLibrary& lib, const PromptInput& in, const KnowledgeCandidates& knowledge,
                                        const context::Budget& budget, context::Mode mode, const SharedEstimator& shared) {
  AssembledPrompt out;
  // One scale for the whole prompt, even while other ops calibrate the shared estimator.
  const context::TokenEstimator estimator = shared.snapshot();
  out.token_scale = estimator.scale();
  KOPE_ASSIGN(std::string system, render_template(lib.system, {{"toolchain", in.toolchain}, {"backend", lib.backend},
                                                               {"hardware", in.hardware}},
                                                  "system.md"));
  int64_t system_tokens = estimator.estimate(system);
  out.limit = budget.window - budget.generation;
  const std::string& tmpl = lib.stage_template(in.stage);
  std::string tmpl_name = std::string(memory::stage_name(in.stage)) + ".md";
  const bool with_memory = mode != context::Mode::none;

  TemplateVars vars{{"op_name", in.op->name},
                    {"op_category", in.op->category},
                    {"iteration", std::to_string(in.iteration)},
                    {"max_iterations", std::to_string(in.max_iterations)},
                    {"stage", std::string(memory::stage_name(in.stage))},
                    {"hardware", in.hardware},
                    {"op_spec", render_op_spec(*in.op)},
                    {"signature", eval::backend_row_or_default(lib.backend).signature(*in.op)},
                    {"reference", in.reference_source},
                    // A KernelBench op's reference is its PyTorch module (design §2).
                    {"reference_lang", in.op->reference_path.extension() == ".py" ? "python" : "cpp"},
                    {"op_pack", ""},
                    {"incumbent", in.incumbent},
                    {"feedback", in.feedback},
                    {"tried", in.tried},
                    {"learned", in.learned},
                    {"toolchain", in.toolchain},
                    {"backend", lib.backend}};
  for (const char* key : k_knowledge_keys) vars[key] = "";
  // The user message: the per-op part, a blank line, the tail.
  auto render_user = [&](const TemplateVars& v, std::string* op_part) -> Result<std::string> {
    KOPE_ASSIGN(std::string head, render_template(lib.op_part, v, "op.md"));
    KOPE_ASSIGN(std::string tail, render_template(tmpl, v, tmpl_name));
    if (!head.empty() && head.back() != '\n') head += '\n';
    head += '\n';
    if (op_part) *op_part = head;
    return head + tail;
  };

  // The hot tier alone (no op pack, no knowledge); cut its largest blocks while it does not fit.
  KOPE_ASSIGN(std::string hot_user, render_user(vars, nullptr));
  int64_t hot_tokens = estimator.estimate(hot_user);
  for (int round = 0; system_tokens + hot_tokens > out.limit && round < 12; ++round) {
    std::string* largest = nullptr;
    for (const char* key : {"reference", "incumbent", "feedback", "tried", "learned", "op_spec"}) {
      std::string& v = vars[key];
      if (v.size() > 400 && (!largest || v.size() > largest->size())) largest = &v;
    }
    if (!largest) break;
    *largest = cut_at_lines(*largest, largest->size() / 2);
    out.hot_truncated = true;
    KOPE_ASSIGN(hot_user, render_user(vars, nullptr));
    hot_tokens = estimator.estimate(hot_user);
  }
  if (system_tokens + hot_tokens > out.limit) {
    return fail(ErrorKind::config,
                "the prompt for {} needs {} tokens even with its hot tier cut down, but the model's window leaves {} "
                "(window {} − generation {}); use a model with a larger window",
                in.op->name, system_tokens + hot_tokens, out.limit, budget.window, budget.generation);
  }

  // The op pack, when it fits beside the hot tier (it is memory: none never has one).
  std::vector<context::Item> op_pack;
  if (with_memory && !knowledge.op_pack_text.empty()) {
    TemplateVars with_pack = vars;
    with_pack["op_pack"] = knowledge.op_pack_text;
    KOPE_ASSIGN(std::string u, render_user(with_pack, nullptr));
    if (system_tokens + estimator.estimate(u) <= out.limit) {
      vars = std::move(with_pack);
      op_pack = knowledge.op_pack;
    }
  }
  KOPE_ASSIGN(std::string base_user, render_user(vars, nullptr));
  const int64_t base_tokens = estimator.estimate(base_user);  // hot tier + op pack

  // Section headings are part of what knowledge costs: reserve room for all of them, so the
  // admitted items plus their headings stay within B_k.
  TemplateVars all_sections = vars;
  for (const char* key : k_knowledge_keys) all_sections[key] = "-";
  KOPE_ASSIGN(std::string with_headings, render_user(all_sections, nullptr));
  int64_t headings = std::max<int64_t>(0, estimator.estimate(with_headings) - base_tokens);
  context::Budget b = budget;
  b.system_prompt = system_tokens + headings;
  // Under a stage ceiling the items leave room for the headings of about two sections (the
  // rendering below drops items if more are needed).
  constexpr int64_t k_heading_room = 60;
  const int64_t stage_cap = mode == context::Mode::active || mode == context::Mode::random ? stage_memory(budget, in.stage) : 0;
  if (stage_cap > 0) b.memory_cap = std::max<int64_t>(1, stage_cap - k_heading_room);
  context::Item hot_item;
  hot_item.id = "hot";
  hot_item.tier = context::Tier::hot;
  hot_item.tokens = base_tokens;
  // The memory a selection adds to the prompt as rendered (its items and their headings).
  auto rendered_memory = [&](const context::Selection& s) -> Result<int64_t> {
    std::vector<context::Item> items;
    for (const auto& it : s.chosen) {
      if (it.tier != context::Tier::hot) items.push_back(it);
    }
    TemplateVars v = vars;
    fill_sections(v, items);
    KOPE_ASSIGN(std::string u, render_user(v, nullptr));
    return estimator.estimate(u) - base_tokens;
  };
  context::Selection sel;
  if (mode == context::Mode::random) {
    // The control matches what active admits for this prompt, as rendered: its items' count
    // first, then corrected by what the headings of the sections each one fills make of it.
    context::Selection active =
        context::select({hot_item}, knowledge.match_warm, knowledge.match_cold, b, context::Mode::active);
    KOPE_ASSIGN(int64_t target, rendered_memory(active));
    b.random_tokens = active.tier_tokens["warm"] + active.tier_tokens["cold"];
    for (int round = 0; round < 4; ++round) {
      sel = context::select({hot_item}, knowledge.warm, knowledge.cold, b, mode);
      KOPE_ASSIGN(int64_t got, rendered_memory(sel));
      if (std::abs(got - target) <= target / 20 || b.random_tokens <= 0) break;
      b.random_tokens = std::max<int64_t>(0, b.random_tokens + target - got);
    }
  } else {
    sel = context::select({hot_item}, knowledge.warm, knowledge.cold, b, mode);
  }
  context::Budget formula = budget;
  formula.system_prompt = system_tokens;
  out.knowledge_budget = formula.knowledge(base_tokens);
  out.dropped = static_cast<int>(sel.dropped.size());
  std::vector<context::Item> chosen;
  for (auto& it : sel.chosen) {
    if (it.tier != context::Tier::hot) chosen.push_back(std::move(it));
  }

  // Render with the chosen items; section headings cost a little, so drop the least valuable
  // item per token until the whole prompt fits.
  // Under a stage ceiling, the tail's memory with its section headings stays within it too.
  // (random matches active's rendered memory instead, which is within the ceiling.)
  const int64_t tail_cap = mode == context::Mode::random ? 0 : stage_cap;
  std::string user, op_part;
  for (;;) {
    fill_sections(vars, chosen);
    KOPE_ASSIGN(user, render_user(vars, &op_part));
    int64_t user_tokens = estimator.estimate(user);
    int64_t total = system_tokens + user_tokens;
    bool within_cap = tail_cap <= 0 || user_tokens - base_tokens <= tail_cap;
    if ((total <= out.limit && within_cap) || chosen.empty()) {
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

  // Admission: the op pack's items first (shown in the per-op part), then the tail's.
  bool any_warm = !op_pack.empty(), any_cold = false;
  auto admit = [&](const context::Item& it) {
    out.admitted.push_back(it.id);
    std::string reason = it.admitted_for.empty() ? it.reason : it.admitted_for + "; " + it.reason;
    out.admission.push_back({it.id, std::string(context::tier_name(it.tier)), it.section, it.tokens, it.value, it.parts,
                             std::move(reason), it.category});
    auto s = knowledge.scores.find(it.id);
    if (s != knowledge.scores.end()) out.memory_items.emplace_back(it.id, s->second);
  };
  for (const auto& it : op_pack) admit(it);
  for (const auto& it : chosen) {
    (it.tier == context::Tier::warm ? any_warm : any_cold) = true;
    admit(it);
  }
  // Tier accounting: hot is the prompt rendered without memory (identical in every mode); warm
  // is what the op pack, the warm items and their headings add to it; cold is the rest.
  int64_t user_tokens = out.total_tokens - system_tokens;
  int64_t warm = 0, cold = 0;
  if (any_warm && any_cold) {
    TemplateVars warm_only = vars;
    fill_sections(warm_only, chosen, true);
    KOPE_ASSIGN(std::string w, render_user(warm_only, nullptr));
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
  out.prefix_tokens = system_tokens + estimator.estimate(op_part);
  out.prefix_hash = util::sha256_hex(system + '\0' + op_part);
  llm::Message user_msg{llm::Message::Role::user, std::move(user)};
  user_msg.cache_prefix = op_part.size();
  out.messages = {{llm::Message::Role::system, std::move(system)}, std::move(user_msg)};
  return out;
}

}  // namespace kope::agent
