// Sharing experience: export (JSON, Graphviz), import (idempotent, provenance kept) and merge.
#include <sqlite3.h>

#include <algorithm>
#include <ostream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "memory/json_io.h"
#include "memory/schema.h"
#include "memory/pg.h"
#include "memory/case_store.h"
#include "memory/exchange.h"
#include "memory/lesson_store.h"
#include "memory/sqlite_store.h"
#include "memory/text.h"
#include "util/fs.h"
#include "util/time.h"

namespace kope::memory {

namespace {

using nlohmann::json;

constexpr const char* k_export_format = "kope-memory";
constexpr int k_export_version = 1;


std::optional<double> opt_from(const json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_number()) return std::nullopt;
  return it->get<double>();
}

std::string str_from(const json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

double num_from(const json& j, const char* key, double dflt = 0) {
  auto it = j.find(key);
  return it != j.end() && it->is_number() ? it->get<double>() : dflt;
}

int64_t int_from(const json& j, const char* key, int64_t dflt = 0) {
  auto it = j.find(key);
  return it != j.end() && it->is_number() ? it->get<int64_t>() : dflt;
}

Result<CaseRecord> case_from_json(const json& j) {
  if (!j.is_object()) return fail(ErrorKind::config, "a case is not a JSON object");
  CaseRecord c;
  c.natural_key = str_from(j, "natural_key");
  if (c.natural_key.empty()) return fail(ErrorKind::config, "a case has no natural_key");
  c.run_id = str_from(j, "run_id");
  c.origin = str_from(j, "origin");
  c.foreign_origin = j.value("foreign_origin", false);
  const json& t = j.contains("task") ? j["task"] : json::object();
  c.task.op = str_from(t, "op");
  c.task.spec_hash = str_from(t, "spec_hash");
  c.task.category = str_from(t, "category");
  c.task.level = static_cast<int>(int_from(t, "level", 1));
  c.task.signature = str_from(t, "signature");
  c.task.timed_dims = str_from(t, "timed_dims");
  c.task.arithmetic_intensity = num_from(t, "arithmetic_intensity");
  c.task.log2_flops = num_from(t, "log2_flops");
  c.task.log2_bytes = num_from(t, "log2_bytes");
  // Optional (exports of older kope versions lack it): absent, the signature text is read.
  if (auto it = t.find("signature_shape"); it != t.end() && !it->is_null()) {
    if (!it->is_string()) {
      return fail(ErrorKind::config, "case {}: task.signature_shape is not a string: {}", c.natural_key, it->dump());
    }
    auto shape = spec::SignatureShape::parse(it->get<std::string>());
    if (!shape) return fail(ErrorKind::config, "case {}: task: {}", c.natural_key, shape.error().message);
    c.task.signature_shape = std::move(*shape);
  }
  const json& h = j.contains("hardware") ? j["hardware"] : json::object();
  c.hardware.target = str_from(h, "target");
  c.hardware.cpu_model = str_from(h, "cpu_model");
  c.hardware.cores = static_cast<int>(int_from(h, "cores"));
  c.hardware.peak_gflops = num_from(h, "peak_gflops");
  c.hardware.peak_gbps = num_from(h, "peak_gbps");
  const json& tc = j.contains("toolchain") ? j["toolchain"] : json::object();
  c.toolchain.id = str_from(tc, "id");
  c.toolchain.backend = str_from(tc, "backend");
  c.parent_key = str_from(j, "parent_key");
  auto stage = parse_stage(str_from(j, "stage"));
  if (!stage) return fail(ErrorKind::config, "case {}: unknown stage '{}'", c.natural_key, str_from(j, "stage"));
  c.stage = *stage;
  c.optimisation = str_from(j, "optimisation");
  c.code = str_from(j, "code");
  const std::string verdict = str_from(j, "verdict");
  auto known = eval::parse_verdict(verdict);
  if (!known) {
    return fail(ErrorKind::usage, "case {}: unknown verdict '{}' (expected one of {})", c.natural_key, verdict,
                eval::verdict_names());
  }
  c.verdict = *known;
  c.message = str_from(j, "message");
  c.diagnostics = str_from(j, "diagnostics");
  c.error_signature = str_from(j, "error_signature");
  if (auto it = j.find("timings"); it != j.end() && it->is_array()) {
    for (const auto& row : *it) {
      CaseTimingRecord r;
      r.case_index = static_cast<int>(int_from(row, "case_index"));
      r.median_us = num_from(row, "median_us");
      r.ci95_us = num_from(row, "ci95_us");
      r.reference_us = num_from(row, "reference_us");
      r.library_us = opt_from(row, "library_us");
      if (auto d = row.find("disturbed"); d != row.end() && d->is_boolean()) r.disturbed = d->get<bool>();
      r.contention = num_from(row, "contention");
      r.floor_us = opt_from(row, "floor_us");
      c.timings.push_back(r);
    }
  }
  c.speedup_vs_parent = opt_from(j, "speedup_vs_parent");
  c.speedup_vs_reference = opt_from(j, "speedup_vs_reference");
  c.speedup_vs_library = opt_from(j, "speedup_vs_library");
  c.fraction_of_roofline = opt_from(j, "fraction_of_roofline");
  c.tokens_prompt = int_from(j, "tokens_prompt");
  c.tokens_completion = int_from(j, "tokens_completion");
  c.wall_seconds = num_from(j, "wall_seconds");
  c.journal = str_from(j, "journal");
  c.created_at = str_from(j, "created_at");
  c.quarantine_status = parse_quarantine_status(str_from(j, "quarantine_status")).value_or(QuarantineStatus::none);
  c.quarantine_reason = str_from(j, "quarantine_reason");
  return c;
}

std::string dot_escape(std::string_view s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else if (static_cast<unsigned char>(c) < 0x20) {
      out += ' ';
    } else {
      out += c;
    }
  }
  return out;
}

const char* outcome_colour(eval::Verdict verdict, Outcome o) {
  if (verdict != eval::Verdict::correct) return "#f4b6b6";
  switch (o) {
    case Outcome::effective: return "#9fd89f";
    case Outcome::partial: return "#d8efb0";
    case Outcome::ineffective: return "#f7dc9c";
    case Outcome::negative: return "#f5c58e";
  }
  return "#ffffff";
}

// The review state an exported case carries over: nullopt when it names none (the store assesses
// the case afresh), none for a name kope does not know.
std::optional<QuarantineStatus> imported_quarantine(const json& j) {
  std::string name = str_from(j, "quarantine_status");
  if (name.empty()) return std::nullopt;
  return parse_quarantine_status(name).value_or(QuarantineStatus::none);
}

}  // namespace

// ----------------------------------------------------------------------------------------------
// Export

Status Exchange::export_json(std::ostream& out, const ExportOptions& options) {
  std::lock_guard lock(m_shared.mutex());
  // One read transaction: a consistent snapshot even while other processes write.
  KOPE_TRY(m_db->begin_read());
  struct EndRead {
    Db* db;
    ~EndRead() { (void)db->exec("COMMIT"); }
  } end_read{m_db};

  json head{{"format", k_export_format}, {"version", k_export_version}, {"schema_version", k_schema_version},
            {"origin", m_shared.instance()}, {"exported_at", util::now_iso8601()},
            {"filter", {{"op", options.op}, {"target", options.target}}}};
  if (!options.provenance.empty()) {
    json prov = json::parse(options.provenance, nullptr, false);
    if (prov.is_discarded() || !prov.is_object()) {
      return fail(ErrorKind::usage, "export: the provenance must be a JSON object");
    }
    // Its targets include every target a written case was recorded on, from the same snapshot
    // as the cases: an export that carries kernels of earlier runs says so.
    std::set<std::string> targets;
    if (auto it = prov.find("targets"); it != prov.end() && it->is_array()) {
      for (const json& t : *it) {
        if (t.is_string()) targets.insert(t.get<std::string>());
      }
    }
    KOPE_ASSIGN(Stmt st, m_db->prepare("SELECT DISTINCT h.target FROM cases c JOIN task t ON t.id = c.task_id "
                                       "JOIN hardware h ON h.id = c.hardware_id "
                                       "WHERE (?1 = '' OR t.op = ?1) AND (?2 = '' OR h.target = ?2)"));
    st.bind(1, options.op).bind(2, options.target);
    for (;;) {
      KOPE_ASSIGN(bool row, st.step());
      if (!row) break;
      if (!st.text(0).empty()) targets.insert(st.text(0));
    }
    if (!targets.empty()) prov["targets"] = targets;
    head["provenance"] = std::move(prov);
  }
  std::string head_text = head.dump(1);
  head_text.pop_back();  // the closing brace; the arrays follow
  while (!head_text.empty() && (head_text.back() == '\n' || head_text.back() == ' ')) head_text.pop_back();
  out << head_text << ",\n \"cases\": [";

  std::unordered_map<int64_t, std::string> key_of;
  int64_t after = 0;
  bool first = true;
  for (;;) {
    std::string where = "WHERE c.id > ?1 AND (?2 = '' OR t.op = ?2) AND (?3 = '' OR h.target = ?3)";
    KOPE_ASSIGN(auto batch,
                m_cases.select_cases_locked(where, {SqlValue{after}, SqlValue{options.op}, SqlValue{options.target}},
                                            true, "ORDER BY c.id LIMIT 500"));
    if (batch.empty()) break;
    for (const auto& c : batch) {
      std::string parent_key;
      if (c.parent_id) {
        auto it = key_of.find(*c.parent_id);
        if (it != key_of.end()) {
          parent_key = it->second;
        } else {
          KOPE_ASSIGN(Stmt st, m_db->prepare("SELECT natural_key FROM cases WHERE id = ?"));
          st.bind(1, *c.parent_id);
          KOPE_ASSIGN(bool row, st.step());
          if (row) parent_key = st.text(0);
        }
      }
      key_of[c.id] = c.natural_key;
      out << (first ? "\n  " : ",\n  ") << case_json(c, true, parent_key).dump();
      first = false;
      after = c.id;
    }
  }
  out << "\n ],\n \"lessons\": [";
  KOPE_ASSIGN(auto lessons, m_lessons.select_lessons_locked("WHERE (?1 = '' OR l.target IN ('', ?1))",
                                                            {SqlValue{options.target}}, "ORDER BY l.seq"));
  first = true;
  for (const auto& l : lessons) {
    json sources = json::array();
    for (int64_t cid : l.source_cases) {
      KOPE_ASSIGN(Stmt st, m_db->prepare("SELECT natural_key FROM cases WHERE id = ?"));
      st.bind(1, cid);
      KOPE_ASSIGN(bool row, st.step());
      if (row) sources.push_back(st.text(0));
    }
    json history = json::array();
    {
      KOPE_ASSIGN(Stmt st, m_db->prepare("SELECT op, reason, payload, helpful_after, harmful_after, status_after, "
                                         "created_at FROM lesson_delta WHERE lesson_id = ? ORDER BY seq"));
      st.bind(1, l.id);
      for (;;) {
        KOPE_ASSIGN(bool row, st.step());
        if (!row) break;
        history.push_back({{"op", st.text(0)}, {"reason", st.text(1)}, {"payload", st.text(2)},
                           {"helpful_after", st.int64(3)}, {"harmful_after", st.int64(4)},
                           {"status_after", st.text(5)}, {"created_at", st.text(6)}});
      }
    }
    json jl = lesson_json(l);
    jl["source_keys"] = sources;
    jl["history"] = history;
    out << (first ? "\n  " : ",\n  ") << jl.dump();
    first = false;
  }
  out << "\n ]\n}\n";
  out.flush();
  if (!out) return fail(ErrorKind::io, "export: writing the output failed (disk full or closed pipe?)");
  return {};
}

Status Exchange::export_dot(std::ostream& out, const ExportOptions& options) {
  std::lock_guard lock(m_shared.mutex());
  KOPE_TRY(m_db->begin_read());
  struct EndRead {
    Db* db;
    ~EndRead() { (void)db->exec("COMMIT"); }
  } end_read{m_db};
  std::string limit = options.max_cases > 0 ? fmt::format("LIMIT {}", options.max_cases) : "";
  KOPE_ASSIGN(Stmt st, m_db->prepare(fmt::format(
                           "SELECT * FROM (SELECT c.id, c.parent_id, t.op, h.target, c.stage, c.verdict, c.outcome, "
                           "c.ratio, c.speedup_ref, d.downstream, d.quarantine, c.optimisation, c.task_id, c.hardware_id "
                           "FROM cases c JOIN task t ON t.id = c.task_id JOIN hardware h ON h.id = c.hardware_id "
                           "JOIN case_derived d ON d.case_id = c.id WHERE (?1 = '' OR t.op = ?1) "
                           "AND (?2 = '' OR h.target = ?2) ORDER BY c.id DESC {}) AS newest ORDER BY id",
                           limit)));
  st.bind(1, options.op).bind(2, options.target);
  struct Node {
    int64_t id;
    std::optional<int64_t> parent;
    std::string label, colour;
    bool quarantined;
  };
  std::map<std::pair<std::string, std::string>, std::vector<Node>> clusters;
  std::set<int64_t> present;
  std::vector<std::pair<int64_t, int64_t>> edges;
  for (;;) {
    KOPE_ASSIGN(bool row, st.step());
    if (!row) break;
    Node n;
    n.id = st.int64(0);
    n.parent = st.opt_int64(1);
    KOPE_ASSIGN(eval::Verdict verdict, stored_verdict(st.text(5)));
    auto outcome = static_cast<Outcome>(std::clamp<int64_t>(st.int64(6), 0, 3));
    std::string stage(stage_name(static_cast<Stage>(std::clamp<int64_t>(st.int64(4), 0, 2))));
    std::string numbers = verdict == eval::Verdict::correct
                              ? fmt::format("{} r={:.2f}\\n{:.2f}x ref · d={:.2f}", outcome_name(outcome), st.real(7),
                                            st.opt_real(8).value_or(0), st.real(9))
                              : fmt::format("{}\\nd={:.2f}", eval::verdict_name(verdict), st.real(9));
    n.label = fmt::format("#{} {}\\n{}\\n{}", n.id, stage, numbers, dot_escape(clip_text(st.text(11), 40)));
    n.colour = outcome_colour(verdict, outcome);
    n.quarantined = quarantine_holds_back(stored_quarantine(st.int64(10)).value_or(QuarantineStatus::none));
    present.insert(n.id);
    clusters[{st.text(2), st.text(3)}].push_back(std::move(n));
  }
  out << "digraph kope_memory {\n"
         "  rankdir=LR;\n"
         "  node [shape=box, style=\"rounded,filled\", fontname=\"Helvetica\", fontsize=10];\n"
         "  edge [color=\"#555555\"];\n";
  int cluster_index = 0;
  for (const auto& [key, nodes] : clusters) {
    out << fmt::format("  subgraph cluster_{} {{\n    label=\"{} on {}\";\n    style=rounded; color=\"#999999\";\n",
                       cluster_index++, dot_escape(key.first), dot_escape(key.second));
    for (const auto& n : nodes) {
      out << fmt::format("    c{} [label=\"{}\", fillcolor=\"{}\"{}];\n", n.id, n.label, n.colour,
                         n.quarantined ? ", style=\"rounded,filled,dashed\", penwidth=2" : "");
      if (n.parent && present.count(*n.parent)) edges.emplace_back(*n.parent, n.id);
    }
    out << "  }\n";
  }
  for (const auto& [from, to] : edges) out << fmt::format("  c{} -> c{};\n", from, to);
  // Lessons, linked to the cases they came from.
  {
    KOPE_ASSIGN(Stmt ls, m_db->prepare("SELECT l.seq, l.id, l.kind, l.title, l.status, s.case_id FROM lessons l "
                                       "LEFT JOIN lesson_source s ON s.lesson_id = l.id ORDER BY l.seq"));
    std::set<int64_t> drawn;
    for (;;) {
      KOPE_ASSIGN(bool row, ls.step());
      if (!row) break;
      int64_t seq = ls.int64(0);
      auto src = ls.opt_int64(5);
      bool linked = src && present.count(*src);
      if (!linked && (!options.op.empty() || !options.target.empty())) continue;
      if (drawn.insert(seq).second) {
        auto status = static_cast<LessonStatus>(std::clamp<int64_t>(ls.int64(4), 0, 3));
        out << fmt::format("  l{} [shape=note, fillcolor=\"{}\", label=\"{} {}\\n{}\"];\n", seq,
                           status == LessonStatus::active ? "#cfe2ff" : "#e0e0e0", dot_escape(ls.text(1)),
                           lesson_kind_name(static_cast<LessonKind>(std::clamp<int64_t>(ls.int64(2), 0, 3))),
                           dot_escape(clip_text(ls.text(3), 50)));
      }
      if (linked) out << fmt::format("  c{} -> l{} [style=dashed, color=\"#3b6fb6\"];\n", *src, seq);
    }
  }
  out << "}\n";
  out.flush();
  if (!out) return fail(ErrorKind::io, "export: writing the output failed");
  return {};
}

// ----------------------------------------------------------------------------------------------
// Import and merge

// import_json, step 1: the export's cases in its order, each added unless already here (the same
// attempt from the same origin); `key_map` learns each exported natural key's local id.
Status Exchange::import_cases_locked(const json& doc, const ImportOptions& options, ImportReport& report,
                                     std::unordered_map<std::string, int64_t>& key_map) {
  const json empty = json::array();
  const json& cases = doc.contains("cases") && doc["cases"].is_array() ? doc["cases"] : empty;
  for (const auto& jc : cases) {
    KOPE_ASSIGN(CaseRecord c, case_from_json(jc));
    const std::string exported_key = c.natural_key;
    if (c.origin.empty()) c.origin = report.origin;
    KOPE_ASSIGN(auto existing, m_cases.case_id_by_key_locked(c.natural_key));
    if (existing) {
      KOPE_ASSIGN(Stmt st, m_db->prepare("SELECT o.instance FROM cases c JOIN origin o ON o.id = c.origin_id "
                                         "WHERE c.id = ?"));
      st.bind(1, *existing);
      KOPE_ASSIGN(bool row, st.step());
      if (row && st.text(0) == c.origin) {
        key_map[exported_key] = *existing;
        ++report.cases_skipped;
        continue;
      }
      // Same key, different attempt from another database: keep both.
      c.natural_key = exported_key + "@" + c.origin.substr(0, 8);
      KOPE_ASSIGN(auto renamed, m_cases.case_id_by_key_locked(c.natural_key));
      if (renamed) {
        key_map[exported_key] = *renamed;
        ++report.cases_skipped;
        continue;
      }
      ++report.cases_renamed;
    }
    std::string parent_key = c.parent_key;
    c.parent_key.clear();
    c.parent_id.reset();
    if (!parent_key.empty()) {
      if (auto it = key_map.find(parent_key); it != key_map.end()) {
        c.parent_id = it->second;
      } else {
        KOPE_ASSIGN(auto local, m_cases.case_id_by_key_locked(parent_key));
        if (local) c.parent_id = local;
      }
    }
    KOPE_ASSIGN(int64_t origin_id, m_cases.ensure_origin_locked(c.origin));
    CaseStore::InsertSource src{origin_id, options.foreign || c.foreign_origin, c.created_at, std::nullopt, {}};
    src.quarantine_state = imported_quarantine(jc);
    if (!c.quarantine_reason.empty()) src.review_note = "imported: " + c.quarantine_reason;
    c.error_signature = c.error_signature;  // kept as exported
    KOPE_ASSIGN(RecordedCase recorded, m_cases.insert_case_locked(c, src));
    key_map[exported_key] = recorded.id;
    ++report.cases_added;
  }
  return {};
}

// import_json, step 2: the export's lessons, one by one through import_lesson_locked.
Status Exchange::import_lessons_locked(const json& doc, const std::string& source,
                                       const ImportOptions& options,
                                       const std::unordered_map<std::string, int64_t>& key_map,
                                       ImportReport& report) {
  const json empty = json::array();
  const json& lessons = doc.contains("lessons") && doc["lessons"].is_array() ? doc["lessons"] : empty;
  // Lessons that were merged away come after the lessons they were merged into.
  std::vector<const json*> order;
  for (const auto& jl : lessons) order.push_back(&jl);
  std::stable_sort(order.begin(), order.end(), [](const json* a, const json* b) {
    return (str_from(*a, "status") == "merged") < (str_from(*b, "status") == "merged");
  });
  for (const json* pj : order) {
    KOPE_TRY(import_lesson_locked(*pj, source, options, key_map, report));
  }
  return {};
}

// One lesson of an import: a lesson already here only takes over the provenance the export adds;
// an active or quarantined one that duplicates a lesson here (nearly) is merged into it; any
// other is inserted.
Status Exchange::import_lesson_locked(const json& jl, const std::string& source, const ImportOptions& options,
                                      const std::unordered_map<std::string, int64_t>& key_map,
                                      ImportReport& report) {
  std::string id = str_from(jl, "id");
  if (id.empty()) return fail(ErrorKind::config, "{}: a lesson has no id", source);
  KOPE_ASSIGN(auto known, m_lessons.resolve_lesson_locked(id));
  Lesson l;
  auto kind = parse_lesson_kind(str_from(jl, "kind"));
  auto status = parse_lesson_status(str_from(jl, "status"));
  if (!kind || !status) return fail(ErrorKind::config, "{}: lesson {} has an unknown kind or status", source, id);
  l.kind = *kind;
  l.status = *status;
  l.title = str_from(jl, "title");
  l.text = str_from(jl, "text");
  l.error_signature = str_from(jl, "error_signature");
  if (auto it = jl.find("scope"); it != jl.end() && it->is_object()) {
    l.scope = {str_from(*it, "category"), str_from(*it, "backend"), str_from(*it, "target"), str_from(*it, "toolchain")};
  }
  l.helpful = static_cast<int>(std::max<int64_t>(0, int_from(jl, "helpful")));
  l.harmful = static_cast<int>(std::max<int64_t>(0, int_from(jl, "harmful")));
  if (auto it = jl.find("value"); it != jl.end() && it->is_object()) {
    for (auto v = it->begin(); v != it->end(); ++v) {
      if (v.value().is_number()) l.value[v.key()] = v.value().get<double>();
    }
  }
  l.merged_into = str_from(jl, "merged_into");
  l.valid_from = str_from(jl, "valid_from");
  l.valid_to = str_from(jl, "valid_to");
  if (auto it = jl.find("source_keys"); it != jl.end() && it->is_array()) {
    for (const auto& k : *it) {
      if (!k.is_string()) continue;
      auto m = key_map.find(k.get<std::string>());
      if (m != key_map.end()) {
        l.source_cases.push_back(m->second);
      } else {
        KOPE_ASSIGN(auto local, m_cases.case_id_by_key_locked(k.get<std::string>()));
        if (local) l.source_cases.push_back(*local);
      }
    }
  }
  std::string lesson_origin = str_from(jl, "origin").empty() ? report.origin : str_from(jl, "origin");
  if (known) {
    // Already here (same content-addressed id, or imported before): only provenance the
    // other database adds is taken over, logged.
    std::vector<int64_t> fresh;
    for (int64_t cid : l.source_cases) {
      KOPE_ASSIGN(Stmt st, m_db->prepare("SELECT 1 FROM lesson_source WHERE lesson_id = ? AND case_id = ?"));
      st.bind(1, *known).bind(2, cid);
      KOPE_ASSIGN(bool row, st.step());
      if (!row) fresh.push_back(cid);
    }
    if (!fresh.empty()) {
      KOPE_TRY(m_lessons.add_lesson_sources_locked(*known, fresh));
      json payload{{"sources_added", fresh}, {"origin", lesson_origin}};
      KOPE_TRY(m_lessons.log_delta_locked(
          *known, "add", fmt::format("imported again from {} ({}): provenance added", report.origin, source),
          std::nullopt, payload.dump()));
    }
    ++report.lessons_skipped;
    return {};
  }
  bool foreign = options.foreign || jl.value("foreign_origin", false);
  if (l.status == LessonStatus::merged) {
    KOPE_ASSIGN(auto into, m_lessons.resolve_lesson_locked(l.merged_into));
    if (into) {
      l.merged_into = *into;
    } else {
      l.status = LessonStatus::deprecated;  // its target did not come along
      l.merged_into.clear();
    }
  }
  if (l.status == LessonStatus::active || l.status == LessonStatus::quarantined) {
    KOPE_ASSIGN(auto dup, m_lessons.find_duplicate_locked(l));
    if (dup) {
      KOPE_TRY(m_lessons.add_lesson_sources_locked(dup->first, l.source_cases));
      KOPE_ASSIGN(Stmt st, m_db->prepare("INSERT OR IGNORE INTO lesson_alias(alias, lesson_id) VALUES (?, ?)"));
      KOPE_TRY(st.bind(1, id).bind(2, dup->first).run());
      json payload{{"duplicate", dup->second >= 1.0 ? "exact" : "near"}, {"similarity", dup->second},
                   {"proposed_id", id}, {"title", l.title}, {"text", l.text}, {"origin", lesson_origin}};
      KOPE_TRY(m_lessons.log_delta_locked(
          dup->first, "add",
          fmt::format("imported from {} ({}) and merged as a duplicate (similarity {:.2f})", report.origin, source,
                      dup->second),
          std::nullopt, payload.dump()));
      ++report.lessons_merged;
      return {};
    }
  }
  KOPE_ASSIGN(int64_t origin_id, m_cases.ensure_origin_locked(lesson_origin));
  json payload{{"imported_from", report.origin}, {"source", source},
               {"history", jl.contains("history") ? jl["history"] : json::array()}};
  KOPE_TRY(m_lessons.insert_lesson_locked(l, id, origin_id, foreign,
                                          fmt::format("imported from {} ({}){}", report.origin, source,
                                                      foreign ? " as foreign" : ""),
                                          std::nullopt, payload.dump()));
  ++report.lessons_added;
  return {};
}

// import_json, step 3: the import log row, and the export's provenance beside it.
Status Exchange::log_import_locked(const std::string& source, const ImportOptions& options,
                                   const ImportReport& report) {
  KOPE_ASSIGN(Stmt st, m_db->prepare("INSERT INTO import_log(origin, source, foreign_origin, cases_added, "
                                     "lessons_added, imported_at) VALUES (?, ?, ?, ?, ?, ?)"));
  st.bind(1, report.origin).bind(2, source).bind(3, int64_t{options.foreign ? 1 : 0});
  st.bind(4, report.cases_added).bind(5, report.lessons_added).bind(6, util::now_iso8601());
  KOPE_TRY(st.run());
  if (report.provenance.empty()) return {};
  // Kept beside the import log row, so `kope memory stats` can say where the experience came from.
  KOPE_ASSIGN(Stmt pm, m_db->prepare("INSERT INTO meta(key, value) VALUES (?, ?) "
                                     "ON CONFLICT(key) DO UPDATE SET value = excluded.value"));
  return pm.bind(1, fmt::format("import_provenance:{}", m_db->last_insert_rowid())).bind(2, report.provenance).run();
}

Result<ImportReport> Exchange::import_json(std::string_view text, const ImportOptions& options) {
  json doc = json::parse(text, nullptr, false);
  std::string source = options.source.empty() ? std::string("input") : options.source;
  if (doc.is_discarded() || !doc.is_object()) {
    return fail(ErrorKind::config, "{}: not a JSON document (expected a `kope memory export`)", source);
  }
  if (str_from(doc, "format") != k_export_format) {
    return fail(ErrorKind::config, "{}: not a kope memory export (format '{}', expected '{}')", source,
                str_from(doc, "format"), k_export_format);
  }
  if (int_from(doc, "version") != k_export_version) {
    return fail(ErrorKind::config, "{}: export version {} is not supported (this kope reads version {})", source,
                int_from(doc, "version"), k_export_version);
  }
  ImportReport report;
  report.origin = str_from(doc, "origin");
  if (report.origin.empty()) return fail(ErrorKind::config, "{}: the export names no origin", source);
  if (auto it = doc.find("provenance"); it != doc.end()) {
    if (!it->is_object()) return fail(ErrorKind::config, "{}: \"provenance\" is not a JSON object", source);
    report.provenance = it->dump();
  }

  const ImportReport parsed = report;
  std::lock_guard lock(m_shared.mutex());
  // Idempotent by design (natural keys, lesson ids), so it is sent again after a lost connection.
  return m_shared.resending_locked(SharedDb::Resend::idempotent, [&]() -> Result<ImportReport> {
    KOPE_ASSIGN(Transaction tx, m_shared.begin_locked());
    report = parsed;  // an import sent again after a lost connection counts afresh
    auto body = [&]() -> Status {
      std::unordered_map<std::string, int64_t> key_map;  // exported natural key -> local id
      KOPE_TRY(import_cases_locked(doc, options, report, key_map));
      KOPE_TRY(import_lessons_locked(doc, source, options, key_map, report));
      return log_import_locked(source, options, report);
    };
    if (auto s = body(); !s) {  // the transaction rolls back (and resets the caches)
      return std::unexpected(std::move(s).error().with_context(fmt::format("importing {}", source)));
    }
    KOPE_TRY(m_shared.commit_locked(tx));
    return report;
  });
}

namespace {

// Copies the database at `from` into the new file `to` through the backup API (a consistent
// snapshot, WAL included); `from` is opened read-only.
Status backup_copy(const std::filesystem::path& from, const std::filesystem::path& to) {
  KOPE_ASSIGN(auto src, Db::open(from, /*read_only=*/true, /*create=*/false));
  KOPE_ASSIGN(auto dst, Db::open(to));
  sqlite3_backup* b = sqlite3_backup_init(dst->handle(), "main", src->handle(), "main");
  if (!b) return std::unexpected(dst->error(sqlite3_errcode(dst->handle()), "cannot copy the database"));
  int rc = sqlite3_backup_step(b, -1);
  sqlite3_backup_finish(b);
  if (rc != SQLITE_DONE) return std::unexpected(src->error(rc, "cannot read the database to copy"));
  return {};
}

}  // namespace

Status copy_database(const std::filesystem::path& from, const std::filesystem::path& to) {
  std::error_code ec;
  if (!std::filesystem::exists(from, ec)) return fail(ErrorKind::not_found, "copy: no database at {}", from.string());
  KOPE_TRY(check_file_header(from));
  // Into a temporary file beside `to`, renamed over it once complete: a copy interrupted midway
  // never leaves a partial database under the final name.
  std::filesystem::path tmp = to;
  tmp += ".copy-tmp";
  for (const char* suffix : {"", "-wal", "-shm", "-journal"}) std::filesystem::remove(tmp.string() + suffix, ec);
  KOPE_TRY(backup_copy(from, tmp));
  for (const char* suffix : {"-wal", "-shm"}) std::filesystem::remove(to.string() + suffix, ec);
  std::filesystem::rename(tmp, to, ec);
  if (ec) return fail(ErrorKind::io, "copy: cannot rename {} to {}: {}", tmp.string(), to.string(), ec.message());
  return {};
}

Result<ImportReport> Exchange::merge_from(const std::filesystem::path& other, const ImportOptions& options) {
  if (is_store_url(other.string())) return merge_from_server(other.string(), options);
  std::error_code ec;
  if (!std::filesystem::exists(other, ec)) return fail(ErrorKind::not_found, "merge: no database at {}", other.string());
  if (m_shared.path() != ":memory:" && std::filesystem::equivalent(other, m_shared.path(), ec)) {
    return fail(ErrorKind::usage, "merge: {} is this database", other.string());
  }
  KOPE_TRY(check_file_header(other));
  // Read the other database through a private copy, so it is never modified, even by a schema
  // migration.
  KOPE_ASSIGN(auto tmp, util::TempDir::create("kope-merge"));
  std::filesystem::path copy = tmp.path() / "other.db";
  KOPE_TRY(backup_copy(other, copy));
  KOPE_ASSIGN(auto other_store, SqliteStore::open(copy));
  return import_export_of(*other_store, other.string(), options);
}

Result<ImportReport> Exchange::merge_from_server(const std::string& url, const ImportOptions& options) {
  // A database on a server cannot be copied privately; it is read in one read-only snapshot
  // (export_json), after open_store refused a newer or foreign schema.
  KOPE_ASSIGN(auto other_store, SqliteStore::open_postgres(url));
  if (other_store->instance() == m_shared.instance()) return fail(ErrorKind::usage, "merge: {} is this database", url);
  return import_export_of(*other_store, redacted_url(url), options);
}

Result<ImportReport> Exchange::import_export_of(Database& other, const std::string& source,
                                                const ImportOptions& options) {
  std::ostringstream dump;
  KOPE_TRY(other.export_json(dump, {}));
  ImportOptions o = options;
  if (o.source.empty()) o.source = source;
  if (is_store_url(o.source)) o.source = redacted_url(o.source);  // the import log keeps no password
  return import_json(dump.str(), o);
}

}  // namespace kope::memory
