// `kope memory ...`: inspect, share and check the experience graph memory.
#include <ctime>
#include <fstream>
#include <set>
#include <iostream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "agent/loop.h"
#include "agent/memory_items.h"
#include "agent/prompt.h"
#include "agent/retrieval.h"
#include "agent/reverify.h"
#include "cli.h"
#include "cli_json.h"
#include "kope/hw.h"
#include "kope/spec.h"
#include "run_services.h"
#include "kope/memory.h"
#include "eval/registry.h"
#include "kope/target.h"
#include "memory/json_io.h"
#include "memory/starter.h"
#include "memory/text.h"
#include "util/fs.h"
#include "util/strings.h"
#include "util/time.h"

namespace kope::cli {

namespace {

using nlohmann::json;
namespace mem = kope::memory;
namespace fs = std::filesystem;

struct Common {
  std::string memory;  // --memory PATH (else $KOPE_MEMORY, else data_dir()/memory.db)
  bool json = false;
};

std::filesystem::path store_path(const Common& c) {
  return c.memory.empty() ? mem::default_store_path() : std::filesystem::path(c.memory);
}

Result<std::unique_ptr<mem::Database>> open(const Common& c) { return mem::open_store(store_path(c)); }

void add_common(CLI::App* sub, const std::shared_ptr<Common>& c, bool json_flag = true) {
  sub->add_option("--memory", c->memory, "Memory database: a file or a postgresql://user@host[:port]/db URL (default: $KOPE_MEMORY, else <data dir>/memory.db)");
  if (json_flag) sub->add_flag("--json", c->json, "Print JSON");
}

std::string fmt_speed(const std::optional<double>& v) { return v ? fmt::format("{:.2f}x", *v) : std::string("-"); }

std::string one_line(std::string_view s, size_t max) {
  std::string line(s.substr(0, s.find('\n')));
  return mem::clip_text(line, max);
}

// "12", "case:12", "kernel:12" -> 12.
std::optional<int64_t> parse_case_id(std::string_view s) {
  for (std::string_view prefix : {"case:", "kernel:", "#"}) {
    if (s.starts_with(prefix)) s.remove_prefix(prefix.size());
  }
  if (s.empty() || s.size() > 18) return std::nullopt;
  int64_t v = 0;
  for (char ch : s) {
    if (ch < '0' || ch > '9') return std::nullopt;
    v = v * 10 + (ch - '0');
  }
  return v;
}

Result<mem::CaseRecord> resolve_case(mem::Database& store, const std::string& ref) {
  if (auto id = parse_case_id(ref)) {
    KOPE_ASSIGN(auto c, store.get_case(*id));
    if (c) return std::move(*c);
  }
  KOPE_ASSIGN(auto c, store.find_case(ref));
  if (c) return std::move(*c);
  return fail(ErrorKind::not_found, "no case '{}' in {} (give an id such as 12 or a natural key)", ref,
              store.path().string());
}

std::string case_table(const std::vector<mem::CaseRecord>& cases) {
  std::string out = fmt::format("{:>7} {:<16} {:<20} {:<6} {:<14} {:<11} {:>7} {:>7} {:>6} {:>7}  {}\n", "id", "op",
                                "target", "stage", "verdict", "outcome", "r", "vs ref", "d(v)", "parent", "optimisation");
  for (const auto& c : cases) {
    std::string outcome(mem::outcome_name(c.outcome));
    if (mem::quarantine_holds_back(c.quarantine_status)) outcome = mem::quarantine_status_name(c.quarantine_status);
    out += fmt::format("{:>7} {:<16} {:<20} {:<6} {:<14} {:<11} {:>7.3f} {:>7} {:>6.2f} {:>7}  {}{}\n", c.id,
                       mem::clip_text(c.task.op, 16), mem::clip_text(c.hardware.target, 20), mem::stage_name(c.stage),
                       eval::verdict_name(c.verdict), outcome, c.ratio, fmt_speed(c.speedup_vs_reference), c.downstream,
                       c.parent_id ? std::to_string(*c.parent_id) : std::string("-"), c.foreign_origin ? "[foreign] " : "",
                       one_line(c.optimisation, 50));
  }
  return out;
}

std::string lesson_table(const std::vector<mem::Lesson>& lessons) {
  std::string out = fmt::format("{:<12} {:<9} {:<11} {:<15} {:>4} {:>4} {:>6}  {}\n", "id", "kind", "status", "scope",
                                "+", "-", "value", "title");
  for (const auto& l : lessons) {
    std::string scope = l.scope.category.empty() ? "any" : l.scope.category;
    if (!l.scope.target.empty()) scope += "@" + l.scope.target;
    double best = 0;
    bool any = false;
    for (const auto& [stage, v] : l.value) {
      if (!any || v > best) best = v;
      any = true;
    }
    out += fmt::format("{:<12} {:<9} {:<11} {:<15} {:>4} {:>4} {:>6}  {}\n", l.id, mem::lesson_kind_name(l.kind),
                       mem::lesson_status_name(l.status), mem::clip_text(scope, 15), l.helpful, l.harmful,
                       any ? fmt::format("{:.2f}", best) : std::string("-"), one_line(l.title, 60));
  }
  return out;
}

std::string case_text(const mem::CaseRecord& c, bool code) {
  std::string out;
  out += fmt::format("case {}  ({})\n", c.id, c.natural_key);
  out += fmt::format("  op          {} ({}, level {}, spec {})\n", c.task.op, c.task.category, c.task.level,
                     one_line(c.task.spec_hash, 16));
  out += fmt::format("  hardware    {}  {}\n", c.hardware.target, c.hardware.cpu_model);
  out += fmt::format("  toolchain   {} ({})\n", c.toolchain.id, c.toolchain.backend);
  out += fmt::format("  run         {}\n", c.run_id);
  out += fmt::format("  began from  {}\n", c.parent_id ? "case " + std::to_string(*c.parent_id) : std::string("- (a root)"));
  out += fmt::format("  stage       {}\n", mem::stage_name(c.stage));
  out += fmt::format("  change      {}\n", c.optimisation);
  out += fmt::format("  verdict     {}  {}\n", eval::verdict_name(c.verdict), one_line(c.message, 100));
  if (!c.error_signature.empty()) out += fmt::format("  signature   {}\n", c.error_signature);
  out += fmt::format("  speedup     vs parent {}  vs reference {}  vs library {}  roofline {}\n", fmt_speed(c.speedup_vs_parent),
                     fmt_speed(c.speedup_vs_reference), fmt_speed(c.speedup_vs_library),
                     c.fraction_of_roofline ? fmt::format("{:.1f}%", 100 * *c.fraction_of_roofline) : std::string("-"));
  out += fmt::format("  outcome     {} (r = {:.4f})   d(v) = {:.4f}\n", mem::outcome_name(c.outcome), c.ratio, c.downstream);
  if (c.quarantine_status != mem::QuarantineStatus::none) {
    out += fmt::format("  quarantine  {}: {}\n", mem::quarantine_status_name(c.quarantine_status), c.quarantine_reason);
  }
  for (const auto& t : c.timings) {
    out += fmt::format("  timing      case {}: {:.3f} us ±{:.3f}  (reference {:.3f} us{})\n", t.case_index, t.median_us,
                       t.ci95_us, t.reference_us, t.library_us ? fmt::format(", library {:.3f} us", *t.library_us) : "");
  }
  out += fmt::format("  tokens      {} prompt, {} completion   wall {:.1f} s\n", c.tokens_prompt, c.tokens_completion,
                     c.wall_seconds);
  out += fmt::format("  code        {} ({} bytes)\n", c.code_hash.empty() ? "-" : c.code_hash.substr(0, 16), c.code.size());
  out += fmt::format("  recorded    {}  origin {}{}\n", c.created_at, c.origin, c.foreign_origin ? " (foreign)" : "");
  if (!c.diagnostics.empty()) out += "  diagnostics\n" + c.diagnostics + (c.diagnostics.ends_with('\n') ? "" : "\n");
  if (!c.journal.empty()) out += "  journal\n    " + util::replace_all(c.journal, "\n", "\n    ") + "\n";
  if (code && !c.code.empty()) out += "  code\n" + c.code + (c.code.ends_with('\n') ? "" : "\n");
  return out;
}

template <class T>
std::optional<T> parse_or(const std::string& s, std::optional<T> (*parse)(std::string_view)) {
  if (s.empty()) return std::nullopt;
  return parse(s);
}

// One line per provenance field a reader wants first: kope version, model, target, date, runs.
std::string provenance_line(const json& p) {
  if (!p.is_object()) return "none recorded";
  std::vector<std::string> parts;
  auto field = [&](const char* key, const char* label) {
    if (!p.contains(key)) return;
    const json& v = p[key];
    std::string text;
    if (v.is_string()) {
      text = v.get<std::string>();
    } else if (v.is_array()) {
      std::vector<std::string> items;
      for (const auto& e : v) {
        if (e.is_string()) items.push_back(e.get<std::string>());
        else if (e.is_object() && e.contains("run_id")) items.push_back(e["run_id"].get<std::string>());
      }
      text = util::join(items, ", ");
    } else if (!v.is_null()) {
      text = v.dump();
    }
    if (!text.empty()) parts.push_back(fmt::format("{} {}", label, text));
  };
  field("kope_version", "kope");
  field("model", "model");
  field("targets", "target");
  field("date", "date");
  field("runs", "runs");
  field("answers", "answers");
  return parts.empty() ? std::string("(empty)") : util::join(parts, "; ");
}

// The provenance `kope memory export` writes: what this kope knows (version, time, database),
// the targets of the runs named with --run-dir (with their model, toolchain, ops), --note, and
// the object in --provenance FILE on top (its keys win). The export adds the targets of the
// cases it writes (ExportOptions::provenance).
Result<json> build_provenance(const std::string& memory_path, const std::vector<std::string>& run_dirs,
                              const std::string& note, const std::string& extra_file) {
  json p{{"kope_version", KOPE_VERSION},
         {"date", util::now_iso8601(util::TimePrecision::seconds)},
         {"memory", memory_path}};
  std::set<std::string> models, targets;
  json runs = json::array();
  for (const auto& dir : run_dirs) {
    std::filesystem::path d(dir);
    KOPE_ASSIGN(std::string text, util::read_file(d / "config.json"));
    json c = json::parse(text, nullptr, false);
    if (!c.is_object()) return fail(ErrorKind::config, "{}: not a run's config.json", (d / "config.json").string());
    json r{{"run_id", c.value("run_id", "")},   {"created_at", c.value("created_at", "")},
           {"policy", c.value("loop", json::object()).value("policy", "")},
           {"target", c.value("target", "")},   {"toolchain", c.value("toolchain", "")},
           {"backend", c.value("backend", "")}, {"selectors", c.value("selectors", json::array())}};
    json model = c.value("model", json::object());
    if (model.is_object() && !model.empty()) {
      r["model"] = {{"profile", model.value("profile", "")}, {"provider", model.value("provider", "")},
                    {"model", model.value("model", "")}, {"base_url", model.value("base_url", "")}};
      if (!model.value("model", std::string()).empty()) models.insert(model.value("model", std::string()));
    }
    if (!c.value("target", std::string()).empty()) targets.insert(c.value("target", std::string()));
    if (auto res = util::read_file(d / "results.json")) {
      json rj = json::parse(*res, nullptr, false);
      if (rj.is_object() && rj.contains("figures")) {
        const json& f = rj["figures"];
        r["ops"] = f.value("ops", 0);
        r["solved"] = f.value("solved", 0);
        r["tokens_prompt"] = f.value("tokens_prompt", int64_t{0});
        r["tokens_completion"] = f.value("tokens_completion", int64_t{0});
      }
    }
    if (auto usage = util::read_file(d / "llm-usage.json")) {
      json u = json::parse(*usage, nullptr, false);
      if (u.is_object()) r["llm_usage"] = u;
    }
    runs.push_back(std::move(r));
  }
  if (!runs.empty()) {
    p["runs"] = runs;
    p["model"] = models.empty() ? std::string("none (replay runs)") : util::join(std::vector<std::string>(models.begin(), models.end()), ", ");
  }
  if (!targets.empty()) p["targets"] = targets;
  if (!note.empty()) p["answers"] = note;
  if (!extra_file.empty()) {
    KOPE_ASSIGN(std::string text, util::read_file(extra_file));
    json e = json::parse(text, nullptr, false);
    if (!e.is_object()) return fail(ErrorKind::config, "{}: --provenance must name a file holding one JSON object", extra_file);
    for (auto it = e.begin(); it != e.end(); ++it) p[it.key()] = it.value();
  }
  return p;
}

// --- the subcommands: each registers its options and, when chosen, sets the action that runs it.

// What every subcommand registers with: the `memory` command, the action to set and the options
// every subcommand shares (--memory, --json).
struct MemoryCli {
  CLI::App* memory = nullptr;
  Action* action = nullptr;
  std::shared_ptr<Common> common;

  CLI::App* sub(const char* name, const char* help) const {
    auto* s = memory->add_subcommand(name, help);
    s->fallthrough();
    return s;
  }
  // Sets the action to `run(common)` when `s` is chosen.
  void on_chosen(CLI::App* s, std::function<Result<int>(const Common&)> run) const {
    s->callback([action = action, common = common, run = std::move(run)] {
      *action = [common, run]() -> Result<int> { return run(*common); };
    });
  }
};

std::string export_summary_text(const mem::ExportSummary& e, const std::string& file) {
  std::string out;
  out += fmt::format("export      {}  (origin {}, exported {})\n", file, e.origin, e.exported_at);
  out += fmt::format("cases       {}  ({} correct)\nops         {}  ({} with a correct kernel)\nlessons     {}\n",
                     e.cases, e.correct_cases, e.ops.size(), e.solved_ops.size(), e.lessons);
  out += fmt::format("targets     {}\n", util::join(std::vector<std::string>(e.targets.begin(), e.targets.end()), ", "));
  out += fmt::format("provenance  {}\n", provenance_line(e.provenance));
  return out;
}

std::string stats_text(const mem::Stats& s, const std::string& path) {
  std::string out;
  out += fmt::format("memory      {}  (schema {}, instance {})\n", path, s.schema_version, s.instance);
  out += fmt::format("size        {}\n", util::human_bytes(static_cast<double>(s.bytes)));
  out += fmt::format("tasks       {}\ncases       {}  ({} runs, {} quarantined, {} foreign)\n", s.tasks, s.cases, s.runs,
                     s.quarantined, s.foreign_cases);
  out += fmt::format("targets     {}\ntoolchains  {}\n", s.targets, s.toolchains);
  out += fmt::format("lessons     {}  ({} active, {} deltas)\n", s.lessons, s.lessons_active, s.lesson_deltas);
  out += fmt::format("prompts     {}  ({} credited)\n", s.prompts, s.prompts_credited);
  out += fmt::format("code        {} blobs, {} raw, {} stored\n", s.code_blobs,
                     util::human_bytes(static_cast<double>(s.code_bytes_raw)),
                     util::human_bytes(static_cast<double>(s.code_bytes_stored)));
  auto row = [&](const char* label, const std::map<std::string, int64_t>& m) {
    std::vector<std::string> parts;
    for (const auto& [k, v] : m) parts.push_back(fmt::format("{} {}", k, v));
    out += fmt::format("{:<12}{}\n", label, parts.empty() ? std::string("-") : util::join(parts, ", "));
  };
  row("verdicts", s.by_verdict);
  row("outcomes", s.by_outcome);
  row("stages", s.by_stage);
  row("lessons by", s.lessons_by_status);
  out += fmt::format("imports     {}\n", s.imports.size());
  for (const auto& r : s.imports) {
    json p = r.provenance.empty() ? json() : json::parse(r.provenance, nullptr, false);
    out += fmt::format("  {} {}{}: {} cases, {} lessons (origin {})\n    provenance: {}\n", r.imported_at, r.source,
                       r.foreign ? " [foreign]" : "", r.cases_added, r.lessons_added, r.origin, provenance_line(p));
  }
  return out;
}

// `stats [FILE]`: the database's counts, or an export file's summary.
Result<int> run_stats(const Common& common, const std::string& file) {
  if (!file.empty()) {
    KOPE_ASSIGN(std::string text, mem::read_export_file(file));
    KOPE_ASSIGN(mem::ExportSummary e, mem::summarise_export(text, file));
    if (common.json) {
      json j = mem::export_summary_json(e);
      j["path"] = file;
      print(j.dump(2) + "\n");
    } else {
      print(export_summary_text(e, file));
    }
    return 0;
  }
  KOPE_ASSIGN(auto store, open(common));
  KOPE_ASSIGN(mem::Stats s, store->stats());
  if (common.json) {
    json j = mem::stats_json(s);
    j["path"] = store_path(common).string();
    print(j.dump(2) + "\n");
  } else {
    print(stats_text(s, store_path(common).string()));
  }
  return 0;
}

void add_stats(const MemoryCli& cli) {
  auto file = std::make_shared<std::string>();
  auto* s = cli.sub("stats", "Counts: tasks, cases, lessons, targets, verdicts, outcomes, size, imports with their provenance");
  s->add_option("file", *file, "An export file (.json or .json.zst) to describe instead of the database");
  cli.on_chosen(s, [file](const Common& common) { return run_stats(common, *file); });
}

// A listing as a JSON array (--json) or as a table with a count line.
template <class T, class ToJson, class Table>
void print_listing(const Common& common, const std::vector<T>& items, ToJson to_json, Table table, const char* noun) {
  if (common.json) {
    json arr = json::array();
    for (const auto& x : items) arr.push_back(to_json(x));
    print(arr.dump(2) + "\n");
  } else {
    print(table(items) + fmt::format("{} {}\n", items.size(), noun));
  }
}

struct CasesOptions {
  std::string op, target, toolchain, run, stage, verdict, outcome, signature;
  bool quarantined = false, foreign = false;
  int limit = 50;
  int64_t before = 0;
};

Result<int> run_cases(const Common& common, const CasesOptions& o) {
  KOPE_ASSIGN(auto store, open(common));
  mem::CaseFilter f;
  f.op = o.op;
  f.target = o.target;
  f.toolchain = o.toolchain;
  f.run_id = o.run;
  f.stage = parse_or<mem::Stage>(o.stage, mem::parse_stage);
  f.verdict = parse_or<eval::Verdict>(o.verdict, eval::parse_verdict);
  f.outcome = parse_or<mem::Outcome>(o.outcome, mem::parse_outcome);
  f.error_signature = o.signature;
  if (o.quarantined) f.quarantined = true;
  if (o.foreign) f.foreign_origin = true;
  f.limit = o.limit;
  f.before_id = o.before;
  KOPE_ASSIGN(auto cases, store->cases(f));
  print_listing(common, cases, [](const mem::CaseRecord& c) { return mem::case_json(c, false); }, case_table, "cases");
  return 0;
}

void add_cases(const MemoryCli& cli) {
  auto o = std::make_shared<CasesOptions>();
  auto* s = cli.sub("cases", "List cases (newest first) with filters");
  s->add_option("--op", o->op, "Only this op");
  s->add_option("--target", o->target, "Only this target");
  s->add_option("--toolchain", o->toolchain, "Only this toolchain id");
  s->add_option("--run", o->run, "Only this run id");
  s->add_option("--stage", o->stage, "draft, repair or refine")->check(CLI::IsMember({"draft", "repair", "refine"}));
  s->add_option("--verdict", o->verdict, "correct, compile_error, wrong_result, ...")
      ->check(CLI::IsMember(eval::verdict_name_list()));
  s->add_option("--outcome", o->outcome, "effective, partial, ineffective or negative")
      ->check(CLI::IsMember({"effective", "partial", "ineffective", "negative"}));
  s->add_option("--signature", o->signature, "Only cases with this error signature");
  s->add_flag("--quarantined", o->quarantined, "Only quarantined (or refuted) cases");
  s->add_flag("--foreign", o->foreign, "Only cases imported as foreign");
  s->add_option("--limit", o->limit, "At most this many (0 = all)")->capture_default_str();
  s->add_option("--before", o->before, "Only ids below this (paging)");
  cli.on_chosen(s, [o](const Common& common) { return run_cases(common, *o); });
}

struct LessonsOptions {
  std::string kind, status = "active", category, backend, target, toolchain, search;
  int limit = 200;
};

Result<int> run_lessons(const Common& common, const LessonsOptions& o) {
  KOPE_ASSIGN(auto store, open(common));
  mem::LessonFilter f;
  f.scope = {o.category, o.backend, o.target, o.toolchain};
  f.kind = parse_or<mem::LessonKind>(o.kind, mem::parse_lesson_kind);
  if (o.status != "all") f.status = mem::parse_lesson_status(o.status);
  f.text = o.search;
  f.limit = o.limit;
  KOPE_ASSIGN(auto lessons, store->find_lessons(f));
  print_listing(common, lessons, mem::lesson_json, lesson_table, "lessons");
  return 0;
}

void add_lessons(const MemoryCli& cli) {
  auto o = std::make_shared<LessonsOptions>();
  auto* s = cli.sub("lessons", "List lessons with filters");
  s->add_option("--kind", o->kind, "strategy, pitfall, fix or recipe")
      ->check(CLI::IsMember({"strategy", "pitfall", "fix", "recipe"}));
  s->add_option("--status", o->status, "active, quarantined, deprecated, merged or all")
      ->check(CLI::IsMember({"active", "quarantined", "deprecated", "merged", "all"}))
      ->capture_default_str();
  s->add_option("--category", o->category, "Lessons for this op category (and general ones)");
  s->add_option("--backend", o->backend, "Lessons for this backend (and general ones)");
  s->add_option("--target", o->target, "Lessons for this target (and general ones)");
  s->add_option("--toolchain", o->toolchain, "Lessons for this toolchain (and general ones)");
  s->add_option("--search", o->search, "Full-text search over titles and texts");
  s->add_option("--limit", o->limit, "At most this many (0 = all)")->capture_default_str();
  cli.on_chosen(s, [o](const Common& common) { return run_lessons(common, *o); });
}

std::string lesson_text(const mem::Lesson& lesson, const std::vector<mem::LessonLogEntry>& history) {
  std::string out = fmt::format("lesson {}  ({}, {})\n", lesson.id, mem::lesson_kind_name(lesson.kind),
                                mem::lesson_status_name(lesson.status));
  out += fmt::format("  title       {}\n  text        {}\n", lesson.title, lesson.text);
  if (!lesson.error_signature.empty()) out += fmt::format("  fixes       {}\n", lesson.error_signature);
  out += fmt::format("  scope       category '{}' backend '{}' target '{}' toolchain '{}'\n", lesson.scope.category,
                     lesson.scope.backend, lesson.scope.target, lesson.scope.toolchain);
  out += fmt::format("  votes       {} helpful, {} harmful\n", lesson.helpful, lesson.harmful);
  for (const auto& [stage, v] : lesson.value) out += fmt::format("  value       {} {:.3f}\n", stage, v);
  std::vector<std::string> srcs;
  for (int64_t c : lesson.source_cases) srcs.push_back(std::to_string(c));
  out += fmt::format("  from cases  {}\n", srcs.empty() ? std::string("-") : util::join(srcs, ", "));
  if (!lesson.merged_into.empty()) out += fmt::format("  merged into {}\n", lesson.merged_into);
  out += fmt::format("  valid       {} .. {}\n", lesson.valid_from, lesson.valid_to.empty() ? "now" : lesson.valid_to);
  out += "  history\n";
  for (const auto& e : history) {
    out += fmt::format("    #{:<5} {:<9} {:<24} +{} -{} {:<11} {}\n", e.seq, e.op, e.created_at, e.helpful_after,
                       e.harmful_after, e.status_after, e.reason);
  }
  return out;
}

// `show ID`: a lesson (an id that is no case id and names a lesson), else a case.
Result<int> run_show(const Common& common, const std::string& id, bool code) {
  KOPE_ASSIGN(auto store, open(common));
  std::string lesson_id = id.starts_with("lesson:") ? id.substr(7) : id;
  if (!parse_case_id(id)) {
    KOPE_ASSIGN(auto lesson, store->get_lesson(lesson_id));
    if (lesson) {
      KOPE_ASSIGN(auto history, store->lesson_history(lesson->id));
      if (common.json) {
        json j = mem::lesson_json(*lesson);
        json h = json::array();
        for (const auto& e : history) h.push_back(mem::lesson_log_json(e));
        j["history"] = h;
        print(j.dump(2) + "\n");
      } else {
        print(lesson_text(*lesson, history));
      }
      return 0;
    }
  }
  KOPE_ASSIGN(mem::CaseRecord c, resolve_case(*store, id));
  if (common.json) {
    print(mem::case_json(c, true).dump(2) + "\n");
  } else {
    print(case_text(c, code));
  }
  return 0;
}

void add_show(const MemoryCli& cli) {
  struct Options {
    std::string id;
    bool code = false;
  };
  auto o = std::make_shared<Options>();
  auto* s = cli.sub("show", "Show one case (id, case:ID or natural key) or lesson (its id) in full");
  s->add_option("id", o->id, "Case id, case:ID, natural key, or lesson id (L...)")->required();
  s->add_flag("--code", o->code, "Include the code (always included with --json)");
  cli.on_chosen(s, [o](const Common& common) { return run_show(common, o->id, o->code); });
}

Result<int> run_journal(const Common& common, const std::string& id) {
  KOPE_ASSIGN(auto store, open(common));
  KOPE_ASSIGN(mem::CaseRecord c, resolve_case(*store, id));
  if (common.json) {
    print(json{{"case", c.id}, {"natural_key", c.natural_key}, {"journal", c.journal}}.dump(2) + "\n");
  } else {
    print(c.journal.empty() ? fmt::format("(case {} has no journal)\n", c.id)
                            : c.journal + (c.journal.ends_with('\n') ? "" : "\n"));
  }
  return 0;
}

void add_journal(const MemoryCli& cli) {
  auto id = std::make_shared<std::string>();
  auto* s = cli.sub("journal", "Print a case's journal (strategy, change, status, numbers, reading)");
  s->add_option("case", *id, "Case id or natural key")->required();
  cli.on_chosen(s, [id](const Common& common) { return run_journal(common, *id); });
}

Result<int> run_lineage(const Common& common, const std::string& op, const std::string& target) {
  KOPE_ASSIGN(auto store, open(common));
  KOPE_ASSIGN(auto nodes, store->lineage(op, target));
  if (common.json) {
    json arr = json::array();
    for (const auto& n : nodes) arr.push_back(mem::lineage_json(n));
    print(arr.dump(2) + "\n");
    return 0;
  }
  if (nodes.empty()) {
    print(fmt::format("no cases for op '{}'{}\n", op, target.empty() ? "" : " on " + target));
    return 0;
  }
  std::string out;
  for (const auto& n : nodes) {
    std::string result = n.verdict == eval::Verdict::correct
                             ? fmt::format("{} r={:.2f} {} vs ref", mem::outcome_name(n.outcome), n.ratio,
                                           fmt_speed(n.speedup_vs_reference))
                             : std::string(eval::verdict_name(n.verdict));
    if (n.quarantine_status != mem::QuarantineStatus::none) {
      result += fmt::format(" [{}]", mem::quarantine_status_name(n.quarantine_status));
    }
    out += fmt::format("{}#{} {} {} d={:.2f} [{}]  {}\n", std::string(static_cast<size_t>(n.depth) * 2, ' '), n.id,
                       mem::stage_name(n.stage), result, n.downstream, n.target, one_line(n.optimisation, 60));
  }
  print(out);
  return 0;
}

void add_lineage(const MemoryCli& cli) {
  struct Options {
    std::string op, target;
  };
  auto o = std::make_shared<Options>();
  auto* s = cli.sub("lineage", "The began-from forest of an op's attempts");
  s->add_option("task", o->op, "Op name")->required();
  s->add_option("--target", o->target, "Only this target");
  cli.on_chosen(s, [o](const Common& common) { return run_lineage(common, o->op, o->target); });
}

struct ExportCliOptions {
  std::string format = "json", output, op, target;
  int64_t max_cases = 0;
  std::vector<std::string> run_dirs;
  std::string note, provenance;
};

// Streams `write` to a temporary beside `target`, renamed into place once complete.
Status write_file_streamed(const std::filesystem::path& target, const std::function<Status(std::ostream&)>& write) {
  std::filesystem::path tmp = target;
  tmp += ".partial";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) return fail(ErrorKind::io, "cannot write {}", tmp.string());
    if (auto st = write(out); !st) {
      std::error_code ec;
      std::filesystem::remove(tmp, ec);
      return std::unexpected(st.error());
    }
  }
  std::error_code ec;
  std::filesystem::rename(tmp, target, ec);
  if (ec) return fail(ErrorKind::io, "cannot rename {} to {}: {}", tmp.string(), target.string(), ec.message());
  return {};
}

Result<int> run_export(const Common& common, const ExportCliOptions& o) {
  KOPE_ASSIGN(auto store, open(common));
  mem::ExportOptions eo{o.op, o.target, o.max_cases, {}};
  if (o.format == "json") {
    KOPE_ASSIGN(json prov, build_provenance(store_path(common).string(), o.run_dirs, o.note, o.provenance));
    eo.provenance = prov.dump();
  }
  if (o.format == "json" && std::filesystem::path(o.output).extension() == ".zst") {
    std::ostringstream text;
    KOPE_TRY(store->export_json(text, eo));
    KOPE_TRY(mem::write_export_file(o.output, text.str()));
    return 0;
  }
  auto write = [&](std::ostream& out) -> Status {
    return o.format == "dot" ? store->export_dot(out, eo) : store->export_json(out, eo);
  };
  if (o.output.empty() || o.output == "-") {
    KOPE_TRY(write(std::cout));
    return 0;
  }
  KOPE_TRY(write_file_streamed(o.output, write));
  return 0;
}

void add_export(const MemoryCli& cli) {
  auto o = std::make_shared<ExportCliOptions>();
  auto* s = cli.sub("export", "Write the memory as JSON (to share) or Graphviz dot (to look at)");
  s->add_option("--format", o->format, "json or dot")->check(CLI::IsMember({"json", "dot"}))->capture_default_str();
  s->add_option("-o,--output", o->output, "Output file (default: stdout)");
  s->add_option("--op", o->op, "Only this op");
  s->add_option("--target", o->target, "Only this target");
  s->add_option("--max-cases", o->max_cases, "dot: only the newest N cases");
  s->add_option("--run-dir", o->run_dirs, "json: record this run's model, target and ops in the provenance (repeatable)");
  s->add_option("--note", o->note, "json: where the answers came from, in words, for the provenance");
  s->add_option("--provenance", o->provenance, "json: a file holding a JSON object merged into the provenance");
  cli.on_chosen(s, [o](const Common& common) { return run_export(common, *o); });
}

// `import FILE` (an export, plain or zstd-compressed) or `merge DB` (another database).
Result<int> run_import(const Common& common, const std::string& source, bool foreign, bool merge) {
  KOPE_ASSIGN(auto store, open(common));
  mem::ImportOptions io{foreign, source};
  mem::ImportReport r;
  if (merge) {
    KOPE_ASSIGN(r, store->merge_from(source, io));
  } else {
    KOPE_ASSIGN(std::string text, mem::read_export_file(source));  // plain or zstd-compressed
    KOPE_ASSIGN(r, store->import_json(text, io));
  }
  if (common.json) {
    print(mem::import_report_json(r).dump(2) + "\n");
  } else {
    print(fmt::format("{} {} (origin {}): cases {} added, {} already present, {} renamed; lessons {} added, "
                      "{} merged into existing, {} already present\n",
                      merge ? "merged" : "imported", source, r.origin, r.cases_added, r.cases_skipped, r.cases_renamed,
                      r.lessons_added, r.lessons_merged, r.lessons_skipped));
  }
  return 0;
}

void add_import(const MemoryCli& cli, bool merge) {
  struct Options {
    std::string source;
    bool foreign = false;
  };
  auto o = std::make_shared<Options>();
  auto* s = merge ? cli.sub("merge", "Merge another kope memory database into this one (the other is not modified)")
                  : cli.sub("import", "Import a `kope memory export` file, plain or .zst (idempotent; provenance kept)");
  s->add_option(merge ? "db" : "file", o->source, merge ? "The database to merge" : "The export file (- for stdin)")
      ->required();
  s->add_flag("--foreign", o->foreign, "Mark everything as from another machine (feasibility, never speed evidence)");
  cli.on_chosen(s, [o, merge](const Common& common) { return run_import(common, o->source, o->foreign, merge); });
}

Result<int> run_check(const Common& common) {
  KOPE_ASSIGN(auto store, open(common));
  KOPE_ASSIGN(mem::CheckReport r, store->check());
  if (common.json) {
    print(mem::check_report_json(r).dump(2) + "\n");
  } else if (r.ok()) {
    print(fmt::format("ok: {} cases, {} code blobs, {} lessons checked\n", r.cases_checked, r.blobs_checked,
                      r.lessons_checked));
  } else {
    std::string out = fmt::format("{} problems in {}:\n", r.problems.size(), store_path(common).string());
    for (const auto& p : r.problems) out += "  " + p + "\n";
    print(out);
  }
  return r.ok() ? 0 : 1;
}

void add_check(const MemoryCli& cli) {
  cli.on_chosen(cli.sub("check", "Integrity check plus kope's invariants; exits 1 listing problems"), run_check);
}

struct VerifyOptions {
  std::string id, note, op;
  bool refute = false;
  bool recheck = false;
  std::optional<uint64_t> seed;
};

// The re-check of `c` (agent/reverify.h, as `kope run` does at the end of an op): its kernel
// evaluated again here on fresh inputs, on the op it was recorded for.
Result<agent::Reverification> recheck_case(const mem::CaseRecord& c, const VerifyOptions& o) {
  if (c.code.empty()) return fail(ErrorKind::usage, "case {} has no code to re-check", c.id);
  KOPE_ASSIGN(spec::OpSpec op, spec::resolve_op(o.op.empty() ? c.task.op : o.op));
  if (!c.task.spec_hash.empty() && op.spec_hash != c.task.spec_hash) {
    return fail(ErrorKind::usage, "case {} was recorded for another version of op {} (spec {}, here {} in {}); pass --op "
                "with the op folder it was recorded for", c.id, c.task.op, c.task.spec_hash.substr(0, 12),
                op.spec_hash.substr(0, 12), op.dir.string());
  }
  KOPE_ASSIGN(HardwareProfile hw, load_hardware_profile());
  KOPE_ASSIGN(auto evaluator, make_run_evaluator(c.toolchain.backend.empty() ? "cpu" : c.toolchain.backend, hw));
  if (!c.hardware.target.empty() && c.hardware.target != evaluator->target().str()) {
    return fail(ErrorKind::usage, "case {} was timed on {}, this machine is {}: re-check it on its own machine", c.id,
                c.hardware.target, evaluator->target().str());
  }
  eval::EvalOptions opts;
  opts.seed = o.seed;  // unset: fresh random inputs
  return agent::reverify(*evaluator, op, c.code, c.timings, opts);
}

// `verify CASE [--refute | --recheck]`: the re-verification of a quarantined case, stated by
// hand or re-checked here.
Result<int> run_verify(const Common& common, const VerifyOptions& o) {
  if (o.refute && o.recheck) return fail(ErrorKind::usage, "--refute and --recheck exclude each other");
  KOPE_ASSIGN(auto store, open(common));
  KOPE_ASSIGN(mem::CaseRecord c, resolve_case(*store, o.id));
  bool confirmed = !o.refute;
  std::string note = o.note;
  if (o.recheck) {
    if (c.quarantine_status != mem::QuarantineStatus::quarantined) {
      return fail(ErrorKind::usage, "case {} is not quarantined ({})", c.id,
                  c.quarantine_status == mem::QuarantineStatus::none ? "never was"
                                                                     : mem::quarantine_status_name(c.quarantine_status));
    }
    KOPE_ASSIGN(agent::Reverification v, recheck_case(c, o));
    confirmed = v.confirmed;
    note = note.empty() ? v.reason : note + "; " + v.reason;
  }
  KOPE_TRY(store->verify_case(c.id, confirmed, note));
  std::string status(mem::quarantine_status_name(confirmed ? mem::QuarantineStatus::verified : mem::QuarantineStatus::refuted));
  if (common.json) {
    print(json{{"case", c.id}, {"quarantine_status", status}, {"note", note}}.dump(2) + "\n");
  } else {
    print(fmt::format("case {} {}{}\n", c.id, status, o.recheck ? ": " + note : ""));
  }
  return 0;
}

void add_verify(const MemoryCli& cli) {
  auto o = std::make_shared<VerifyOptions>();
  auto* s = cli.sub("verify", "Lift the quarantine of a re-verified case (or --refute it, or --recheck it here)");
  s->add_option("case", o->id, "Case id or natural key")->required();
  s->add_flag("--refute", o->refute, "The re-verification did not confirm it");
  s->add_flag("--recheck", o->recheck,
              "Re-verify it here as `kope run` does at the end of an op: evaluated again on fresh inputs and re-timed, "
              "confirmed or refuted by what that finds");
  s->add_option("--op", o->op, "With --recheck: the op (name or folder) the case was recorded for (default: its op's name)");
  s->add_option("--seed", o->seed, "With --recheck: the fresh inputs' seed (default: random)");
  s->add_option("--note", o->note, "What the re-verification found");
  cli.on_chosen(s, [o](const Common& common) { return run_verify(common, *o); });
}

// `retrieve OP --admit`: what the agent's prompt for this state would hold. The op's spec comes
// from the suite, the query is the agent's (state and broad, classified into tiers, in the
// mode's forms), and the prompt is assembled with this machine's hardware guide, and once more
// without memory (what memory adds is the difference).
struct AdmitView {
  agent::AssembledPrompt prompt;
  agent::KnowledgeCandidates candidates;
  std::string category;
  int64_t other_category_tokens = 0;  // admitted items about ops of another category
  int64_t memory_tokens = 0;          // the prompt's tokens beyond the same prompt without memory
};

Result<AdmitView> admit_view(mem::Store& store, const mem::RetrievalQuery& base, const RetrieveOptions& o) {
  fs::path suite_root = o.suite.empty() ? spec::default_ops_dir() : fs::path(o.suite);
  KOPE_ASSIGN(spec::OpSpec op, spec::resolve_op(o.op, suite_root));
  KOPE_ASSIGN(spec::Suite suite, spec::load_suite(suite_root));
  std::vector<const spec::OpSpec*> known;
  for (const auto& s : suite.ops) known.push_back(&s);
  std::string backend = o.backend.empty() ? "cpu" : o.backend;
  KOPE_ASSIGN(agent::PromptLibrary lib, agent::PromptLibrary::load(agent::default_prompts_dir(), backend));
  agent::SharedEstimator estimator;
  mem::RetrievalQuery q = base;
  q.task = agent::task_info(op);
  q.backend = backend;
  if (q.text.empty()) q.text = op.summary;
  if (o.limit == RetrieveOptions{}.limit) q.limit = run::LoopConfig{}.retrieval_limit;  // the agent's default
  AdmitView v;
  v.category = op.category;
  agent::KnowledgeRequest req;
  req.query = q;
  req.op = &op;
  auto mode = context::parse_mode(o.mode);
  if (!mode) return fail(ErrorKind::usage, "--mode: '{}' is not a context mode (active, passive, random, none)", o.mode);
  req.mode = *mode;
  // The backend's hardware (the device's for a device backend; the host's, measured once and
  // cached, for the CPU): the hardware guide of the system message and the balance that tells
  // an op's bottleneck, as in the agent's prompts.
  KOPE_ASSIGN(HardwareProfile host, load_hardware_profile());
  auto device = eval::backend_profile(backend, host, eval::EvaluatorOptions{});
  if (!device) return fail(ErrorKind::unavailable, "the {} backend's hardware is unknown here: {}", backend, device.error().message);
  const HardwareProfile& hw = *device;
  double balance = agent::machine_balance(hw);
  if (q.bottleneck.empty() && balance > 0 && q.task.arithmetic_intensity > 0) {
    q.bottleneck = q.task.arithmetic_intensity < balance ? "memory" : "compute";
  }
  req.query = q;
  req.balance = balance;
  KOPE_ASSIGN(v.candidates, agent::knowledge_for(store, req, lib, estimator, known));
  agent::PromptInput in;
  in.op = &op;
  KOPE_ASSIGN(in.reference_source, util::read_file(op.reference_path));
  in.stage = q.stage;
  in.hardware = agent::render_hardware(hw, "(the candidates' compiler)", agent::describe_hardware_guide(backend));
  context::Budget budget;
  budget.window = o.window;
  budget.generation = o.generation;
  KOPE_ASSIGN(v.prompt, agent::assemble_prompt(lib, in, v.candidates, budget, *mode, estimator));
  // The same prompt without memory: what memory adds is the difference.
  KOPE_ASSIGN(agent::AssembledPrompt bare, agent::assemble_prompt(lib, in, agent::KnowledgeCandidates{}, budget,
                                                                  context::Mode::none, estimator));
  v.memory_tokens = v.prompt.total_tokens - bare.total_tokens;
  for (const auto& a : v.prompt.admission) {
    if (!a.category.empty() && a.category != op.category) v.other_category_tokens += a.tokens;
  }
  return v;
}

json admit_json(const AdmitView& v, const RetrieveOptions& o) {
  const auto& p = v.prompt;
  json left = json::array();
  std::set<std::string> admitted(p.admitted.begin(), p.admitted.end());
  for (const auto* tier : {&v.candidates.warm, &v.candidates.cold}) {
    for (const auto& it : *tier) {
      if (!admitted.contains(it.id)) left.push_back({{"id", it.id}, {"tier", std::string(context::tier_name(it.tier))}, {"tokens", it.tokens}});
    }
  }
  return {{"op", o.op},
          {"category", v.category},
          {"stage", o.stage},
          {"knowledge_budget", p.knowledge_budget},
          {"tier_tokens", p.tier_tokens},
          {"total_tokens", p.total_tokens},
          {"mode", o.mode},
          {"memory_tokens", v.memory_tokens},
          {"prefix_tokens", p.prefix_tokens},
          {"other_category_tokens", v.other_category_tokens},
          {"other_category_share", p.total_tokens > 0 ? static_cast<double>(v.other_category_tokens) / p.total_tokens : 0.0},
          {"admitted", run::admission_json(p.admission)},
          {"left_out", left}};
}

std::string admit_text(const AdmitView& v, const RetrieveOptions& o) {
  const auto& p = v.prompt;
  auto tier = [&](const char* t) { auto it = p.tier_tokens.find(t); return it == p.tier_tokens.end() ? int64_t{0} : it->second; };
  std::string out = fmt::format("{} ({}), {} stage, context {}: B_k {} tokens; prompt {} tokens (system {}, hot {}, warm {}, "
                                "cold {}); memory {} tokens beyond the same prompt without it; cacheable prefix {} tokens; "
                                "items of other categories {} tokens ({:.1f}%)\n",
                                o.op, v.category, o.stage, o.mode, p.knowledge_budget, p.total_tokens, tier("system"),
                                tier("hot"), tier("warm"), tier("cold"), v.memory_tokens, p.prefix_tokens, v.other_category_tokens,
                                p.total_tokens > 0 ? 100.0 * static_cast<double>(v.other_category_tokens) / p.total_tokens : 0.0);
  for (const auto& a : p.admission) {
    std::vector<std::string> parts;
    for (const auto& [k, x] : a.parts) parts.push_back(fmt::format("{} {:.2f}", k, x));
    out += fmt::format("{:<16} {:<4} {:<12} {:>5} tokens  value {:.3f}  {}\n    ({})\n", a.id, a.tier, a.section, a.tokens,
                       a.value, a.reason, util::join(parts, ", "));
  }
  out += fmt::format("{} admitted, {} candidates left out\n", p.admission.size(),
                     v.candidates.warm.size() + v.candidates.cold.size() - p.admission.size());
  return out;
}

std::string retrieved_text(const std::vector<mem::RetrievedItem>& items) {
  std::string out;
  int64_t tokens = 0;
  for (const auto& it : items) {
    std::vector<std::string> parts;
    for (const auto& [k, v] : it.score_parts) parts.push_back(fmt::format("{} {:.2f}", k, v));
    std::string text = agent::render_item(it);
    int64_t it_tokens = agent::item_tokens(it);
    out += fmt::format("{:<16} {:<12} score {:6.3f}  {:>5} tokens{}  ({})\n", it.id, mem::item_kind_name(it.kind),
                       it.score, it_tokens, it.foreign ? "  FOREIGN" : "", util::join(parts, ", "));
    out += "    " + one_line(text, 110) + "\n";
    tokens += it_tokens;
  }
  out += fmt::format("{} items, {} tokens\n", items.size(), tokens);
  return out;
}

// One element of `retrieve OP --json`: the item's facts the agent's admission uses, its prompt
// text and its tokens (agent/memory_items.h).
json retrieved_json(const mem::RetrievedItem& item) {
  return {{"id", item.id},       {"kind", mem::item_kind_name(item.kind)}, {"score", item.score},
          {"score_parts", item.score_parts}, {"tokens", agent::item_tokens(item)}, {"foreign", item.foreign},
          {"target", item.target}, {"op", item.op},                  {"text", agent::render_item(item)},
          {"category", item.category}, {"structurally_close", item.structurally_close}, {"learned", item.learned}};
}

// The retrieval query of `retrieve OP` for a state (the op's features from its newest recorded
// case).
Result<mem::RetrievalQuery> retrieval_query(mem::Database& store, const RetrieveOptions& o) {
  mem::CaseFilter f;
  f.op = o.op;
  f.limit = 1;
  KOPE_ASSIGN(auto any, store.cases(f));
  mem::RetrievalQuery q;
  if (!any.empty()) {
    q.task = any.front().task;
  } else {
    q.task.op = o.op;
  }
  q.target = o.target.empty() ? Target::host().str() : o.target;
  q.toolchain = o.toolchain;
  q.backend = o.backend;
  auto stage = mem::parse_stage(o.stage);
  if (!stage) return fail(ErrorKind::usage, "stage '{}' is none of draft, repair, refine", o.stage);
  q.stage = *stage;
  q.last_error_signature = o.error;
  q.bottleneck = o.bottleneck;
  q.text = o.text;
  q.limit = o.limit;
  if (o.incumbent > 0) q.incumbent_case = o.incumbent;
  return q;
}

}  // namespace

Result<json> memory_retrieve_json(const std::string& memory, const RetrieveOptions& o) {
  KOPE_ASSIGN(auto store, mem::open_store(memory.empty() ? mem::default_store_path() : fs::path(memory)));
  KOPE_ASSIGN(mem::RetrievalQuery q, retrieval_query(*store, o));
  if (o.admit) {
    KOPE_ASSIGN(AdmitView v, admit_view(*store, q, o));
    return admit_json(v, o);
  }
  KOPE_ASSIGN(auto items, store->retrieve(q));
  json arr = json::array();
  for (const auto& it : items) arr.push_back(retrieved_json(it));
  return arr;
}

namespace {

// `retrieve OP`: what the agent would be given for a state.
Result<int> run_retrieve(const Common& common, const RetrieveOptions& o) {
  if (common.json) {
    KOPE_ASSIGN(json j, memory_retrieve_json(common.memory, o));
    print(j.dump(2) + "\n");
    return 0;
  }
  KOPE_ASSIGN(auto store, open(common));
  KOPE_ASSIGN(mem::RetrievalQuery q, retrieval_query(*store, o));
  if (o.admit) {
    KOPE_ASSIGN(AdmitView v, admit_view(*store, q, o));
    print(admit_text(v, o));
    return 0;
  }
  KOPE_ASSIGN(auto items, store->retrieve(q));
  print(retrieved_text(items));
  return 0;
}

void add_retrieve(const MemoryCli& cli) {
  auto o = std::make_shared<RetrieveOptions>();
  auto* s = cli.sub("retrieve", "Show the items retrieval returns for a state, with scores and tokens");
  s->add_option("op", o->op, "Op name (its features are taken from its recorded cases)")->required();
  s->add_option("--target", o->target, "Target (default: this host)");
  s->add_option("--toolchain", o->toolchain, "Toolchain id");
  s->add_option("--backend", o->backend, fmt::format("Backend ({})", eval::backend_names()));
  s->add_option("--stage", o->stage, "draft, repair or refine")->check(CLI::IsMember({"draft", "repair", "refine"}))
      ->capture_default_str();
  s->add_option("--error", o->error, "Last error signature");
  s->add_option("--bottleneck", o->bottleneck, "memory, compute or latency");
  s->add_option("--text", o->text, "Free text for lexical search");
  s->add_option("--incumbent", o->incumbent, "Incumbent case id (lineage signals)");
  s->add_option("--limit", o->limit, "At most this many items")->capture_default_str();
  s->add_flag("--admit", o->admit,
              "Show the prompt's admission for this state instead: the items the agent's active mode admits, their tier, "
              "tokens, why (score parts and reason), the tier totals and the tokens spent on other categories");
  s->add_option("--suite", o->suite, "Operator suite the op's spec is read from, with --admit (default: the bundled ops/)");
  s->add_option("--window", o->window, "Model window with --admit")->capture_default_str();
  s->add_option("--mode", o->mode, "Context mode with --admit: active, passive, random or none")->capture_default_str();
  s->add_option("--generation", o->generation, "Generation allowance with --admit")->capture_default_str();
  cli.on_chosen(s, [o](const Common& common) { return run_retrieve(common, *o); });
}

}  // namespace

void register_memory(CLI::App& app, Action& action) {
  auto* memory = app.add_subcommand("memory", "Inspect, share and check the experience graph memory");
  memory->require_subcommand(1);
  auto common = std::make_shared<Common>();
  add_common(memory, common);
  const MemoryCli cli{memory, &action, common};
  add_stats(cli);
  add_cases(cli);
  add_lessons(cli);
  add_show(cli);
  add_journal(cli);
  add_lineage(cli);
  add_export(cli);
  add_import(cli, false);
  add_import(cli, true);
  add_check(cli);
  add_verify(cli);
  add_retrieve(cli);
}

}  // namespace kope::cli
