#include "memory/case_store.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <thread>

#include <nlohmann/json.hpp>

#include "memory/codec.h"
#include "memory/pg.h"
#include "memory/schema.h"
#include "memory/text.h"
#include "util/hash.h"
#include "util/time.h"

namespace kope::memory {

namespace {

using nlohmann::json;

constexpr size_t k_max_message_bytes = 2048;
constexpr size_t k_max_diagnostics_bytes = 8192;
constexpr size_t k_max_journal_bytes = 16384;
constexpr size_t k_max_optimisation_bytes = 1024;
constexpr double k_downstream_epsilon = 1e-13;  // stop propagating smaller changes

std::string bin_to_hex(std::string_view bin) {
  static constexpr char k_digits[] = "0123456789abcdef";
  std::string out;
  out.reserve(bin.size() * 2);
  for (unsigned char c : bin) {
    out += k_digits[c >> 4];
    out += k_digits[c & 15];
  }
  return out;
}

// A key that travels through JSON unchanged (other bytes may not be valid UTF-8).
bool plain_ascii(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char ch) { return static_cast<unsigned char>(ch) < 0x80; });
}

bool finite_positive(std::optional<double> v) { return v && std::isfinite(*v) && *v > 0; }

// The column list shared by every case query; indices below.
std::string case_select_sql(bool with_code) {
  return std::string(
             "SELECT c.id, c.natural_key, c.run_id, t.op, t.spec_hash, t.category, t.level, t.signature, "
             "t.timed_dims, t.arithmetic_intensity, t.log2_flops, t.log2_bytes, h.target, h.cpu_model, h.cores, "
             "h.peak_gflops, h.peak_gbps, tc.name, tc.backend, c.parent_id, c.stage, c.optimisation, "
             "c.verdict, c.message, c.diagnostics, c.error_signature, c.timings, c.speedup_parent, "
             "c.speedup_ref, c.speedup_lib, c.roofline, c.ratio, c.outcome, c.tokens_prompt, "
             "c.tokens_completion, c.wall_seconds, c.created_at, c.quarantine_reason, d.downstream, "
             "d.quarantine, o.instance, c.foreign_origin, j.text, b.hash, b.raw_size, ") +
         (with_code ? "b.data" : "NULL") + ", t.signature_shape" +
         " FROM cases c JOIN task t ON t.id = c.task_id JOIN hardware h ON h.id = c.hardware_id "
         "JOIN toolchain tc ON tc.id = c.toolchain_id JOIN case_derived d ON d.case_id = c.id "
         "JOIN origin o ON o.id = c.origin_id LEFT JOIN journal j ON j.case_id = c.id "
         "LEFT JOIN blob b ON b.id = c.code_id ";
}

Result<CaseRecord> case_from_row(const Stmt& st, bool with_code) {
  CaseRecord c;
  int i = 0;
  c.id = st.int64(i++);
  c.natural_key = st.text(i++);
  c.run_id = st.text(i++);
  c.task.op = st.text(i++);
  c.task.spec_hash = st.text(i++);
  c.task.category = st.text(i++);
  c.task.level = static_cast<int>(st.int64(i++));
  c.task.signature = st.text(i++);
  c.task.timed_dims = st.text(i++);
  c.task.arithmetic_intensity = st.real(i++);
  c.task.log2_flops = st.real(i++);
  c.task.log2_bytes = st.real(i++);
  c.hardware.target = st.text(i++);
  c.hardware.cpu_model = st.text(i++);
  c.hardware.cores = static_cast<int>(st.int64(i++));
  c.hardware.peak_gflops = st.real(i++);
  c.hardware.peak_gbps = st.real(i++);
  c.toolchain.id = st.text(i++);
  c.toolchain.backend = st.text(i++);
  c.parent_id = st.opt_int64(i++);
  c.stage = static_cast<Stage>(std::clamp<int64_t>(st.int64(i++), 0, 2));
  c.optimisation = st.text(i++);
  KOPE_ASSIGN(c.verdict, stored_verdict(st.text(i++)));
  c.message = st.text(i++);
  c.diagnostics = st.text(i++);
  c.error_signature = st.text(i++);
  c.timings = timings_from_json(st.text(i++));
  c.speedup_vs_parent = st.opt_real(i++);
  c.speedup_vs_reference = st.opt_real(i++);
  c.speedup_vs_library = st.opt_real(i++);
  c.fraction_of_roofline = st.opt_real(i++);
  c.ratio = st.real(i++);
  c.outcome = static_cast<Outcome>(std::clamp<int64_t>(st.int64(i++), 0, 3));
  c.tokens_prompt = st.int64(i++);
  c.tokens_completion = st.int64(i++);
  c.wall_seconds = st.real(i++);
  c.created_at = st.text(i++);
  c.quarantine_reason = st.text(i++);
  c.downstream = st.real(i++);
  c.quarantine_status = stored_quarantine(st.int64(i++)).value_or(QuarantineStatus::none);
  c.quarantined = quarantine_holds_back(c.quarantine_status);
  c.origin = st.text(i++);
  c.foreign_origin = st.int64(i++) != 0;
  c.journal = st.text(i++);
  std::string hash = st.blob(i++);
  int64_t raw_size = st.int64(i++);
  c.code_hash = bin_to_hex(hash);
  if (with_code && !st.is_null(i)) {
    auto code = decompress(st.blob(i), static_cast<size_t>(raw_size));
    if (!code) {
      return fail(ErrorKind::corrupt, "case {}: code blob {}: {}", c.id, c.code_hash, code.error().message);
    }
    c.code = std::move(*code);
  }
  ++i;
  // A shape this kope cannot read (a newer kope's dtype) counts as absent: the text is read.
  if (!st.is_null(i)) {
    if (auto shape = spec::SignatureShape::parse(st.text(i))) c.task.signature_shape = std::move(*shape);
  }
  return c;
}

}  // namespace

std::string timings_to_json(const std::vector<CaseTimingRecord>& ts) {
  json arr = json::array();
  for (const auto& t : ts) {
    json row = json::array({t.case_index, t.median_us, t.ci95_us, t.reference_us});
    row.push_back(t.library_us ? json(*t.library_us) : json(nullptr));
    // Appended (rows written before have five elements): disturbed, contention, then the floor.
    if (t.disturbed || t.contention > 0 || t.floor_us) {
      row.push_back(t.disturbed);
      row.push_back(t.contention);
    }
    if (t.floor_us) row.push_back(*t.floor_us);
    arr.push_back(std::move(row));
  }
  return arr.dump();
}

std::vector<CaseTimingRecord> timings_from_json(const std::string& text) {
  std::vector<CaseTimingRecord> out;
  json arr = json::parse(text, nullptr, false);
  if (!arr.is_array()) return out;
  for (const auto& row : arr) {
    if (!row.is_array() || row.size() < 5) continue;
    CaseTimingRecord t;
    t.case_index = row[0].get<int>();
    t.median_us = row[1].get<double>();
    t.ci95_us = row[2].get<double>();
    t.reference_us = row[3].get<double>();
    if (!row[4].is_null()) t.library_us = row[4].get<double>();
    if (row.size() >= 7 && row[5].is_boolean() && row[6].is_number()) {
      t.disturbed = row[5].get<bool>();
      t.contention = row[6].get<double>();
    }
    if (row.size() >= 8 && row[7].is_number()) t.floor_us = row[7].get<double>();
    out.push_back(t);
  }
  return out;
}

CaseStore::CaseStore(SharedDb& shared) : m_shared(shared), m_db(&shared.db()) {
  m_shared.on_reset([this] { reset_caches(); });
}

void CaseStore::reset_caches() {
  m_parent_of.clear();
  m_recent_ids.clear();
  m_recent_facts.clear();
  m_task_ids.clear();
  m_hardware_ids.clear();
  m_toolchain_ids.clear();
  m_origin_ids.clear();
}

// ----------------------------------------------------------------------------------------------
// Entities

Result<int64_t> CaseStore::ensure_task_locked(const TaskInfo& t) {
  // A task with a typed shape has a key of its own, so the first one after a task cached
  // without reaches the row and fills the shape in.
  std::string key = t.op + '\n' + t.spec_hash + (t.signature_shape ? "\n+shape" : "");
  if (auto it = m_task_ids.find(key); it != m_task_ids.end()) return it->second;
  {
    KOPE_ASSIGN(Stmt st, m_db->prepare("SELECT id, CASE WHEN signature_shape IS NULL THEN 1 ELSE 0 END FROM task "
                                       "WHERE op = ? AND spec_hash = ?"));
    st.bind(1, t.op).bind(2, t.spec_hash);
    KOPE_ASSIGN(bool row, st.step());
    if (row) {
      int64_t id = st.int64(0);
      if (st.int64(1) != 0) KOPE_TRY(add_task_shape_locked(id, t));
      return m_task_ids[key] = id;
    }
  }
  KOPE_ASSIGN(Stmt ins, m_db->prepare(
                            "INSERT INTO task(op, spec_hash, category, level, signature, timed_dims, "
                            "arithmetic_intensity, log2_flops, log2_bytes, signature_shape) "
                            "VALUES (?,?,?,?,?,?,?,?,?,?)"));
  ins.bind(1, t.op).bind(2, t.spec_hash).bind(3, t.category).bind(4, t.level).bind(5, t.signature);
  ins.bind(6, t.timed_dims).bind(7, t.arithmetic_intensity).bind(8, t.log2_flops).bind(9, t.log2_bytes);
  if (t.signature_shape) {
    ins.bind(10, t.signature_shape->str());
  } else {
    ins.bind_null(10);
  }
  KOPE_TRY(ins.run());
  return m_task_ids[key] = m_db->last_insert_rowid();
}

Status CaseStore::add_task_shape_locked(int64_t id, const TaskInfo& t) {
  // The same op and spec hash is the same spec, so its typed shape belongs to the row an older
  // kope (or an import without one) wrote without it.
  if (!t.signature_shape) return {};
  KOPE_ASSIGN(Stmt up, m_db->prepare("UPDATE task SET signature_shape = ? WHERE id = ? AND signature_shape IS NULL"));
  KOPE_TRY(up.bind(1, t.signature_shape->str()).bind(2, id).run());
  // Retrieval's task cache reads new rows only: drop the caches so it reads this one again
  // (once per task an older kope recorded).
  m_shared.reset_caches();
  return {};
}

Result<int64_t> CaseStore::ensure_hardware_locked(const HardwareInfo& h) {
  std::string key = h.target + '\n' + h.cpu_model;
  if (auto it = m_hardware_ids.find(key); it != m_hardware_ids.end()) return it->second;
  {
    KOPE_ASSIGN(Stmt st, m_db->prepare("SELECT id FROM hardware WHERE target = ? AND cpu_model = ?"));
    st.bind(1, h.target).bind(2, h.cpu_model);
    KOPE_ASSIGN(bool row, st.step());
    if (row) return m_hardware_ids[key] = st.int64(0);
  }
  KOPE_ASSIGN(Stmt ins, m_db->prepare("INSERT INTO hardware(target, cpu_model, cores, peak_gflops, peak_gbps) "
                                      "VALUES (?,?,?,?,?)"));
  ins.bind(1, h.target).bind(2, h.cpu_model).bind(3, h.cores).bind(4, h.peak_gflops).bind(5, h.peak_gbps);
  KOPE_TRY(ins.run());
  return m_hardware_ids[key] = m_db->last_insert_rowid();
}

Result<int64_t> CaseStore::ensure_toolchain_locked(const ToolchainInfo& t) {
  if (auto it = m_toolchain_ids.find(t.id); it != m_toolchain_ids.end()) return it->second;
  {
    KOPE_ASSIGN(Stmt st, m_db->prepare("SELECT id FROM toolchain WHERE name = ?"));
    st.bind(1, t.id);
    KOPE_ASSIGN(bool row, st.step());
    if (row) return m_toolchain_ids[t.id] = st.int64(0);
  }
  KOPE_ASSIGN(Stmt ins, m_db->prepare("INSERT INTO toolchain(name, backend) VALUES (?, ?)"));
  KOPE_TRY(ins.bind(1, t.id).bind(2, t.backend).run());
  return m_toolchain_ids[t.id] = m_db->last_insert_rowid();
}

Result<int64_t> CaseStore::ensure_origin_locked(const std::string& instance) {
  if (auto it = m_origin_ids.find(instance); it != m_origin_ids.end()) return it->second;
  {
    KOPE_ASSIGN(Stmt st, m_db->prepare("SELECT id FROM origin WHERE instance = ?"));
    st.bind(1, instance);
    KOPE_ASSIGN(bool row, st.step());
    if (row) return m_origin_ids[instance] = st.int64(0);
  }
  KOPE_ASSIGN(Stmt ins, m_db->prepare("INSERT INTO origin(instance) VALUES (?)"));
  KOPE_TRY(ins.bind(1, instance).run());
  return m_origin_ids[instance] = m_db->last_insert_rowid();
}

Result<std::optional<int64_t>> CaseStore::ensure_blob_locked(const PreparedCase& p, size_t raw_size) {
  if (p.code_hash.empty()) return std::optional<int64_t>{};
  if (!p.error.empty()) return fail(ErrorKind::internal, "{}", p.error);
  {
    KOPE_ASSIGN(Stmt ins, m_db->prepare_insert("INSERT INTO blob(hash, raw_size, data) VALUES (?, ?, ?) "
                                               "ON CONFLICT(hash) DO NOTHING"));
    ins.bind_blob(1, p.code_hash).bind(2, static_cast<int64_t>(raw_size)).bind_blob(3, p.code_frame);
    KOPE_ASSIGN(std::optional<int64_t> added, ins.run_insert());
    if (added) {
      m_shared.add_counter_locked("blobs", 1);
      m_shared.add_counter_locked("code_bytes_raw", static_cast<int64_t>(raw_size));
      m_shared.add_counter_locked("code_bytes_stored", static_cast<int64_t>(p.code_frame.size()));
      return added;
    }
  }
  KOPE_ASSIGN(Stmt st, m_db->prepare("SELECT id FROM blob WHERE hash = ?"));
  st.bind_blob(1, p.code_hash);
  KOPE_ASSIGN(bool row, st.step());
  if (!row) return fail(ErrorKind::internal, "code blob vanished during insert");
  return std::optional<int64_t>{st.int64(0)};
}

CaseStore::PreparedCase CaseStore::prepare_case(const CaseRecord& c) {
  PreparedCase p;
  if (!c.code.empty()) {
    p.code_hash = content_hash(c.code);
    auto frame = compress(c.code);
    if (frame) {
      p.code_frame = std::move(*frame);
    } else {
      p.error = frame.error().message;
    }
  }
  p.signature = c.error_signature.empty() ? error_signature(c.verdict, c.message, c.diagnostics) : c.error_signature;
  p.optimisation = clip_text(c.optimisation, k_max_optimisation_bytes);
  p.journal = clip_text(c.journal, k_max_journal_bytes);
  p.body = p.optimisation + " " + p.signature + " " + p.journal;
  p.terms = text_tokens(p.body);
  std::sort(p.terms.begin(), p.terms.end());
  p.terms.erase(std::unique(p.terms.begin(), p.terms.end()), p.terms.end());
  return p;
}

std::vector<CaseStore::PreparedCase> CaseStore::prepare_cases(const std::vector<CaseRecord>& cs) {
  std::vector<PreparedCase> out(cs.size());
  size_t threads = std::min<size_t>(std::max(1u, std::thread::hardware_concurrency()), 8);
  if (cs.size() < 64 || threads < 2) {
    for (size_t i = 0; i < cs.size(); ++i) out[i] = prepare_case(cs[i]);
    return out;
  }
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i = next++; i < cs.size(); i = next++) out[i] = prepare_case(cs[i]);
  };
  std::vector<std::thread> pool;
  for (size_t t = 1; t < threads; ++t) pool.emplace_back(work);
  work();
  for (auto& th : pool) th.join();
  return out;
}

Result<std::optional<int64_t>> CaseStore::case_id_by_key_locked(const std::string& key) {
  KOPE_ASSIGN(Stmt st, m_db->prepare("SELECT id FROM cases WHERE natural_key = ?"));
  st.bind(1, key);
  KOPE_ASSIGN(bool row, st.step());
  if (!row) return std::optional<int64_t>{};
  return std::optional<int64_t>{st.int64(0)};
}

Result<bool> CaseStore::exists_locked(int64_t id) {
  KOPE_ASSIGN(Stmt st, m_db->prepare("SELECT 1 FROM cases WHERE id = ?"));
  st.bind(1, id);
  return st.step();
}

Result<std::optional<QuarantineStatus>> CaseStore::quarantine_of_locked(int64_t id) {
  KOPE_ASSIGN(Stmt st, m_db->prepare("SELECT quarantine FROM case_derived WHERE case_id = ?"));
  st.bind(1, id);
  KOPE_ASSIGN(bool row, st.step());
  if (!row) return std::optional<QuarantineStatus>{};
  return stored_quarantine(st.int64(0));
}

Result<std::unordered_map<std::string, int64_t>> CaseStore::case_ids_by_keys_locked(const std::vector<CaseRecord>& cs) {
  json keys = json::array();
  for (const auto& c : cs) {
    if (plain_ascii(c.natural_key)) keys.push_back(c.natural_key);
  }
  KOPE_ASSIGN(Stmt st, m_db->prepare("SELECT natural_key, id FROM cases WHERE natural_key IN (" + m_db->json_texts("?") + ")"));
  st.bind(1, keys.dump());
  std::unordered_map<std::string, int64_t> out;
  for (;;) {
    KOPE_ASSIGN(bool row, st.step());
    if (!row) return out;
    out.emplace(st.text(0), st.int64(1));
  }
}

// ----------------------------------------------------------------------------------------------
// Recording cases

Status CaseStore::validate_case(const CaseRecord& c) {
  if (c.task.op.empty()) return fail(ErrorKind::usage, "case {}: no op", c.natural_key);
  if (c.hardware.target.empty()) return fail(ErrorKind::usage, "case {}: no hardware target", c.natural_key);
  for (auto v : {c.speedup_vs_reference, c.speedup_vs_parent, c.speedup_vs_library, c.fraction_of_roofline}) {
    if (v && (!std::isfinite(*v) || *v < 0)) {
      return fail(ErrorKind::usage, "case {}: speedups and roofline fractions must be finite and >= 0",
                  c.natural_key);
    }
  }
  return {};
}

Result<CaseStore::ParentOfCase> CaseStore::parent_locked(const CaseRecord& c) {
  ParentOfCase out;
  out.id = c.parent_id;
  if (!out.id && !c.parent_key.empty()) {
    if (auto it = m_recent_ids.find(c.parent_key); it != m_recent_ids.end()) {
      out.id = it->second;
    } else {
      KOPE_ASSIGN(auto pid, case_id_by_key_locked(c.parent_key));
      if (!pid) return fail(ErrorKind::not_found, "case {}: parent case '{}' does not exist", c.natural_key, c.parent_key);
      out.id = pid;
    }
  }
  if (!out.id) return out;
  if (auto it = m_recent_facts.find(*out.id); it != m_recent_facts.end()) {
    out.facts = it->second;
    return out;
  }
  KOPE_ASSIGN(Stmt st, m_db->prepare("SELECT c.verdict, c.speedup_ref, c.error_signature, d.quarantine "
                                     "FROM cases c JOIN case_derived d ON d.case_id = c.id WHERE c.id = ?"));
  st.bind(1, *out.id);
  KOPE_ASSIGN(bool row, st.step());
  if (!row) return fail(ErrorKind::not_found, "case {}: parent case {} does not exist", c.natural_key, *out.id);
  KOPE_ASSIGN(eval::Verdict verdict, stored_verdict(st.text(0)));
  out.facts = ParentFacts{verdict, st.opt_real(1), st.text(2)};
  return out;
}

void CaseStore::remember_case_locked(const std::string& natural_key, int64_t id, ParentFacts facts) {
  if (m_recent_facts.size() >= k_max_recent_cases) {
    m_recent_facts.clear();
    m_recent_ids.clear();
  }
  m_recent_ids.emplace(natural_key, id);
  m_recent_facts.emplace(id, std::move(facts));
}

namespace {

// The values the rows of one new case share: its ids, r, the outcome and quarantine, the
// prepared texts (CaseStore::PreparedCase) and where it comes from (CaseStore::InsertSource).
struct NewCaseRow {
  std::string_view optimisation, signature, body, journal;
  int64_t origin_id = 0;
  bool foreign = false;
  std::string created_at;
  int64_t id = 0;
  int64_t task_id = 0, hw_id = 0, tc_id = 0;
  std::optional<int64_t> code_id;
  std::optional<int64_t> parent_id;
  bool correct = false;
  double r = 0;
  Outcome outcome = Outcome::negative;
  QuarantineStatus quarantine = QuarantineStatus::none;
  std::string quarantine_reason;
  std::optional<double> speedup_parent;
};

// The case row itself; sets row.id.
Status insert_case_row(Db& db, const CaseRecord& c, NewCaseRow& row) {
  KOPE_ASSIGN(Stmt ins, db.prepare_insert(
                            "INSERT INTO cases(natural_key, run_id, task_id, hardware_id, toolchain_id, "
                            "parent_id, origin_id, foreign_origin, stage, optimisation, code_id, verdict, message, "
                            "diagnostics, error_signature, timings, speedup_parent, speedup_ref, speedup_lib, "
                            "roofline, ratio, outcome, quarantine_reason, tokens_prompt, tokens_completion, "
                            "wall_seconds, created_at) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)"));
  ins.bind(1, c.natural_key).bind(2, c.run_id).bind(3, row.task_id).bind(4, row.hw_id).bind(5, row.tc_id);
  ins.bind(6, row.parent_id).bind(7, row.origin_id).bind(8, static_cast<int64_t>(row.foreign));
  ins.bind(9, static_cast<int>(c.stage)).bind(10, row.optimisation).bind(11, row.code_id).bind(12, eval::verdict_name(c.verdict));
  ins.bind(13, clip_text(c.message, k_max_message_bytes)).bind(14, clip_text(c.diagnostics, k_max_diagnostics_bytes));
  ins.bind(15, row.signature).bind(16, timings_to_json(c.timings)).bind(17, row.speedup_parent);
  ins.bind(18, row.correct ? c.speedup_vs_reference : std::nullopt).bind(19, row.correct ? c.speedup_vs_library : std::nullopt);
  ins.bind(20, c.fraction_of_roofline).bind(21, row.r).bind(22, static_cast<int>(row.outcome)).bind(23, row.quarantine_reason);
  ins.bind(24, c.tokens_prompt).bind(25, c.tokens_completion).bind(26, c.wall_seconds).bind(27, row.created_at);
  KOPE_ASSIGN(std::optional<int64_t> id, ins.run_insert());
  if (!id) return fail(ErrorKind::internal, "case {}: the insert added no row", c.natural_key);
  row.id = *id;
  return {};
}

// The journal row (when there is a journal).
Status insert_case_journal(Db& db, const NewCaseRow& row) {
  if (row.journal.empty()) return {};
  KOPE_ASSIGN(Stmt st, db.prepare("INSERT INTO journal(case_id, text) VALUES (?, ?)"));
  return st.bind(1, row.id).bind(2, row.journal).run_later();
}

// The run's case count, and the per-task summary: counts always; best and first correct only
// from evidence.
Status update_run_and_task_summary(Db& db, const CaseRecord& c, const NewCaseRow& row) {
  {
    KOPE_ASSIGN(Stmt st, db.prepare("INSERT INTO runs(run_id, cases, first_case, last_case) VALUES (?1, 1, ?2, ?2) "
                                    "ON CONFLICT(run_id) DO UPDATE SET cases = runs.cases + 1, last_case = ?2"));
    KOPE_TRY(st.bind(1, c.run_id).bind(2, row.id).run_later());
  }
  KOPE_ASSIGN(Stmt st, db.prepare(
                           "INSERT INTO task_summary(task_id, hardware_id, toolchain_id, foreign_origin, n_cases, "
                           "n_correct, best_case, best_speedup, first_correct) VALUES (?1, ?2, ?3, ?4, 1, ?5, ?6, ?7, ?8) "
                           "ON CONFLICT(task_id, hardware_id, toolchain_id, foreign_origin) DO UPDATE SET "
                           "n_cases = task_summary.n_cases + 1, n_correct = task_summary.n_correct + ?5, "
                           "best_case = CASE WHEN ?7 IS NOT NULL AND (task_summary.best_speedup IS NULL OR "
                           "?7 > task_summary.best_speedup) THEN ?6 ELSE task_summary.best_case END, "
                           "best_speedup = CASE WHEN ?7 IS NOT NULL AND (task_summary.best_speedup IS NULL OR "
                           "?7 > task_summary.best_speedup) THEN ?7 ELSE task_summary.best_speedup END, "
                           "first_correct = coalesce(task_summary.first_correct, ?8)"));
  bool evidence = row.correct && !quarantine_holds_back(row.quarantine) && finite_positive(c.speedup_vs_reference);
  st.bind(1, row.task_id).bind(2, row.hw_id).bind(3, row.tc_id).bind(4, static_cast<int64_t>(row.foreign));
  st.bind(5, static_cast<int64_t>(row.correct));
  if (evidence) {
    st.bind(6, row.id).bind(7, *c.speedup_vs_reference);
  } else {
    st.bind_null(6).bind_null(7);
  }
  if (row.correct) {
    st.bind(8, row.id);
  } else {
    st.bind_null(8);
  }
  return st.run_later();
}

}  // namespace

Result<RecordedCase> CaseStore::insert_case_locked(const CaseRecord& c, const InsertSource& src) {
  return insert_case_locked(c, src, nullptr);
}

// The writes of one new case, in one open transaction: the case row, its journal and search
// entry, its derived row with d(v) up the ancestor chain, the error->fix link it completes, the
// run's and the task summary's counts, in that order.
Result<RecordedCase> CaseStore::insert_case_locked(const CaseRecord& c, const InsertSource& src,
                                                   const PreparedCase* prepared) {
  KOPE_ASSIGN(auto existing, case_id_by_key_locked(c.natural_key));  // "" finds none: insert_new_case_locked refuses it
  if (existing) return recorded_case_locked(*existing);  // idempotent: a retried write changes nothing
  return insert_new_case_locked(c, src, prepared);
}

Result<RecordedCase> CaseStore::insert_new_case_locked(const CaseRecord& c, const InsertSource& src,
                                                       const PreparedCase* prepared) {
  if (c.natural_key.empty()) return fail(ErrorKind::usage, "case has no natural key");
  PreparedCase local;
  if (!prepared) {
    local = prepare_case(c);
    prepared = &local;
  }
  const PreparedCase& p = *prepared;

  KOPE_TRY(validate_case(c));
  // The parent's facts, for r, plausibility and error->fix links.
  KOPE_ASSIGN(ParentOfCase found, parent_locked(c));
  const std::optional<ParentFacts>& parent = found.facts;
  const bool parent_failed = parent && parent->verdict != eval::Verdict::correct;
  const std::string parent_signature = parent ? parent->error_signature : std::string();

  NewCaseRow row;
  row.optimisation = p.optimisation;
  row.signature = p.signature;
  row.body = p.body;
  row.journal = p.journal;
  row.origin_id = src.origin_id;
  row.foreign = src.foreign;
  row.created_at = src.created_at.empty() ? util::now_iso8601() : src.created_at;
  row.parent_id = found.id;
  row.correct = c.verdict == eval::Verdict::correct;
  RecordedCase recorded;
  recorded.assessment = assess_case(c, parent ? &*parent : nullptr);
  row.r = recorded.assessment.ratio;
  row.outcome = recorded.assessment.outcome;
  row.speedup_parent = c.speedup_vs_parent;
  if (row.correct && !row.speedup_parent && row.parent_id && finite_positive(c.speedup_vs_reference)) row.speedup_parent = row.r;

  row.quarantine_reason = recorded.assessment.quarantine_reason;
  row.quarantine = row.quarantine_reason.empty() ? QuarantineStatus::none : QuarantineStatus::quarantined;
  if (src.quarantine_state) row.quarantine = *src.quarantine_state;
  if (row.quarantine != QuarantineStatus::none && row.quarantine_reason.empty()) row.quarantine_reason = "quarantined in the source database";
  recorded.assessment.quarantine_reason = row.quarantine_reason;

  KOPE_ASSIGN(row.task_id, ensure_task_locked(c.task));
  KOPE_ASSIGN(row.hw_id, ensure_hardware_locked(c.hardware));
  KOPE_ASSIGN(row.tc_id, ensure_toolchain_locked(c.toolchain));
  KOPE_ASSIGN(row.code_id, ensure_blob_locked(p, c.code.size()));

  KOPE_TRY(insert_case_row(*m_db, c, row));
  if (m_parent_of.size() > 1'000'000) m_parent_of.clear();
  m_parent_of.emplace(row.id, row.parent_id);
  remember_case_locked(c.natural_key, row.id,
                       ParentFacts{c.verdict, row.correct ? c.speedup_vs_reference : std::nullopt, p.signature});
  m_shared.note_terms_locked(0, p.terms, +1);
  KOPE_TRY(insert_case_journal(*m_db, row));
  KOPE_TRY(m_shared.index_search_locked(0, row.id, std::string(row.body),
                                        case_search_tags(c.task.op, c.task.category, c.hardware.target,
                                                static_cast<int>(c.stage), eval::verdict_name(c.verdict),
                                                static_cast<int>(row.outcome)),
                                        false));
  double d = k_downstream_self * (quarantine_holds_back(row.quarantine) ? 0.0 : row.r);
  {
    KOPE_ASSIGN(Stmt st, m_db->prepare("INSERT INTO case_derived(case_id, task_id, downstream, quarantine, "
                                       "review_note) VALUES (?, ?, ?, ?, ?)"));
    KOPE_TRY(st.bind(1, row.id).bind(2, row.task_id).bind(3, d).bind(4, quarantine_code(row.quarantine)).bind(5, src.review_note).run_later());
  }
  KOPE_TRY(propagate_downstream_locked(row.parent_id, k_downstream_self * k_downstream_decay * d));
  if (row.correct && row.parent_id && parent_failed && !parent_signature.empty()) {
    KOPE_ASSIGN(Stmt st, m_db->prepare("INSERT OR IGNORE INTO fix_link(error_signature, fix_case, failed_case, "
                                       "task_id, hardware_id) VALUES (?, ?, ?, ?, ?)"));
    KOPE_TRY(st.bind(1, parent_signature).bind(2, row.id).bind(3, *row.parent_id).bind(4, row.task_id).bind(5, row.hw_id).run_later());
  }
  KOPE_TRY(update_run_and_task_summary(*m_db, c, row));
  recorded.id = row.id;
  return recorded;
}

Status CaseStore::propagate_downstream_locked(std::optional<int64_t> start, double delta) {
  // d(v) = 0.5·r_v + 0.35·Σ d(children): a change Δ of d(u) changes d(parent(u)) by 0.35·Δ, and so
  // on up the chain, so only the ancestors are touched.
  std::vector<std::pair<int64_t, double>> changes;  // (ancestor, change of its d), nearest first
  std::optional<int64_t> cur = start;
  while (cur && std::abs(delta) > k_downstream_epsilon) {
    changes.emplace_back(*cur, delta);
    KOPE_ASSIGN(cur, parent_of_locked(*cur));
    delta *= k_downstream_self * k_downstream_decay;
  }
  if (changes.empty()) return {};
  if (m_db->postgres()) {
    // The whole chain in one statement, over arrays of ids and changes.
    std::vector<int64_t> ids;
    std::vector<double> deltas;
    for (const auto& [id, change] : changes) {
      ids.push_back(id);
      deltas.push_back(change);
    }
    KOPE_ASSIGN(Stmt up, m_db->prepare("UPDATE case_derived SET downstream = case_derived.downstream + u.delta "
                                       "FROM unnest(CAST(? AS BIGINT[]), CAST(? AS DOUBLE PRECISION[])) AS u(id, delta) "
                                       "WHERE case_derived.case_id = u.id"));
    return up.bind(1, pg_int_array(ids)).bind(2, pg_double_array(deltas)).run_later();
  }
  KOPE_ASSIGN(Stmt up, m_db->prepare("UPDATE case_derived SET downstream = downstream + ? WHERE case_id = ?"));
  for (const auto& [id, change] : changes) KOPE_TRY(up.reset().bind(1, change).bind(2, id).run());
  return {};
}

Result<std::optional<int64_t>> CaseStore::parent_of_locked(int64_t id) {
  if (auto it = m_parent_of.find(id); it != m_parent_of.end()) return it->second;
  KOPE_ASSIGN(Stmt st, m_db->prepare("SELECT parent_id FROM cases WHERE id = ?"));
  st.bind(1, id);
  KOPE_ASSIGN(bool row, st.step());
  std::optional<int64_t> parent = row ? st.opt_int64(0) : std::nullopt;
  if (m_parent_of.size() > 1'000'000) m_parent_of.clear();
  m_parent_of.emplace(id, parent);
  return parent;
}

Result<RecordedCase> CaseStore::record_attempt(const CaseRecord& c) {
  PreparedCase prepared = prepare_case(c);  // pure work, outside the lock
  std::lock_guard lock(m_shared.mutex());
  // Sent again after a lost connection: the natural key makes a write that did commit return
  // the recorded case, never a second one.
  return m_shared.resending_locked(SharedDb::Resend::idempotent, [&]() -> Result<RecordedCase> {
    KOPE_ASSIGN(auto existing, case_id_by_key_locked(c.natural_key));  // a retry needs no write
    if (existing) return recorded_case_locked(*existing);
    KOPE_ASSIGN(Transaction tx, m_shared.begin_locked());  // a rollback resets the caches
    KOPE_ASSIGN(RecordedCase recorded,
                insert_case_locked(c, InsertSource{m_shared.origin_id(), false, {}, std::nullopt, {}}, &prepared));
    KOPE_TRY(m_shared.commit_locked(tx));
    return recorded;
  });
}

Result<RecordedCase> CaseStore::recorded_case_locked(int64_t id) {
  KOPE_ASSIGN(Stmt st, m_db->prepare("SELECT c.ratio, c.outcome, c.error_signature, c.quarantine_reason "
                                     "FROM cases c WHERE c.id = ?"));
  st.bind(1, id);
  KOPE_ASSIGN(bool row, st.step());
  if (!row) return fail(ErrorKind::not_found, "case {} does not exist", id);
  RecordedCase out;
  out.id = id;
  out.assessment.ratio = st.real(0);
  out.assessment.outcome = static_cast<Outcome>(std::clamp<int64_t>(st.int64(1), 0, 3));
  out.assessment.error_signature = st.text(2);
  out.assessment.quarantine_reason = st.text(3);
  return out;
}

Result<CaseAssessment> CaseStore::assess_attempt(const CaseRecord& c) {
  std::lock_guard lock(m_shared.mutex());
  KOPE_ASSIGN(ParentOfCase parent, parent_locked(c));
  return assess_case(c, parent.facts ? &*parent.facts : nullptr);
}

Result<std::vector<int64_t>> CaseStore::record_cases(const std::vector<CaseRecord>& cs) {
  std::vector<PreparedCase> prepared = prepare_cases(cs);  // pure work, outside the lock
  std::lock_guard lock(m_shared.mutex());
  return m_shared.resending_locked(SharedDb::Resend::idempotent, [&]() -> Result<std::vector<int64_t>> {
    std::vector<int64_t> ids;
    ids.reserve(cs.size());
    KOPE_ASSIGN(Transaction tx, m_shared.begin_locked());
    // Which cases are already recorded, in one query (a key twice in the batch: its second
    // occurrence finds the first).
    KOPE_ASSIGN(auto recorded_ids, case_ids_by_keys_locked(cs));
    for (size_t i = 0; i < cs.size(); ++i) {
      if (auto it = recorded_ids.find(cs[i].natural_key); it != recorded_ids.end()) {
        ids.push_back(it->second);
        continue;
      }
      const InsertSource src{m_shared.origin_id(), false, {}, std::nullopt, {}};
      KOPE_ASSIGN(RecordedCase recorded, plain_ascii(cs[i].natural_key)
                                             ? insert_new_case_locked(cs[i], src, &prepared[i])
                                             : insert_case_locked(cs[i], src, &prepared[i]));
      recorded_ids.emplace(cs[i].natural_key, recorded.id);
      ids.push_back(recorded.id);
    }
    KOPE_TRY(m_shared.commit_locked(tx));
    return ids;
  });
}

// ----------------------------------------------------------------------------------------------
// Reading cases

Result<std::vector<CaseRecord>> CaseStore::select_cases_locked(const std::string& where_sql,
                                                               const std::vector<SqlValue>& params,
                                                               bool with_code, const std::string& order_limit) {
  std::string sql = case_select_sql(with_code) + where_sql + " " + order_limit;
  KOPE_ASSIGN(Stmt st, m_db->prepare(sql));
  st.bind_all(params);
  std::vector<CaseRecord> out;
  for (;;) {
    KOPE_ASSIGN(bool row, st.step());
    if (!row) break;
    KOPE_ASSIGN(CaseRecord c, case_from_row(st, with_code));
    out.push_back(std::move(c));
  }
  return out;
}

Result<std::optional<CaseRecord>> CaseStore::get_case_locked(int64_t id, bool with_code) {
  KOPE_ASSIGN(auto rows, select_cases_locked("WHERE c.id = ?1", {SqlValue{id}}, with_code, ""));
  if (rows.empty()) return std::optional<CaseRecord>{};
  return std::optional<CaseRecord>{std::move(rows.front())};
}

Result<std::optional<CaseRecord>> CaseStore::get_case(int64_t id) {
  std::lock_guard lock(m_shared.mutex());
  return get_case_locked(id, true);
}

Result<std::optional<CaseRecord>> CaseStore::find_case(const std::string& natural_key) {
  std::lock_guard lock(m_shared.mutex());
  KOPE_ASSIGN(auto id, case_id_by_key_locked(natural_key));
  if (!id) return std::optional<CaseRecord>{};
  return get_case_locked(*id, true);
}

Result<std::vector<CaseRecord>> CaseStore::best_cases(const std::string& op, const std::string& target, int limit) {
  std::lock_guard lock(m_shared.mutex());
  std::string where =
      "WHERE c.task_id IN (SELECT id FROM task WHERE op = ?1) AND c.verdict = 'correct' "
      "AND c.speedup_ref IS NOT NULL AND d.quarantine IN (0, 2) AND c.foreign_origin = 0 "
      "AND (?2 = '' OR h.target = ?2)";
  return select_cases_locked(where, {SqlValue{op}, SqlValue{target}}, true,
                             fmt::format("ORDER BY c.speedup_ref DESC, c.id LIMIT {}", std::max(limit, 0)));
}

Result<std::vector<CaseRecord>> CaseStore::cases(const CaseFilter& f) {
  std::lock_guard lock(m_shared.mutex());
  std::vector<std::string> where;
  std::vector<SqlValue> params;
  auto add = [&](const std::string& clause, SqlValue value) {
    params.push_back(std::move(value));
    where.push_back(fmt::format(fmt::runtime(clause), params.size()));
  };
  if (!f.op.empty()) add("t.op = ?{}", f.op);
  if (!f.target.empty()) add("h.target = ?{}", f.target);
  if (!f.toolchain.empty()) add("tc.name = ?{}", f.toolchain);
  if (!f.spec_hash.empty()) add("t.spec_hash = ?{}", f.spec_hash);
  if (!f.run_id.empty()) add("c.run_id = ?{}", f.run_id);
  if (!f.not_run_id.empty()) add("c.run_id <> ?{}", f.not_run_id);
  if (f.stage) add("c.stage = ?{}", int64_t{static_cast<int>(*f.stage)});
  if (f.verdict) add("c.verdict = ?{}", std::string(eval::verdict_name(*f.verdict)));
  if (f.outcome) add("c.outcome = ?{}", int64_t{static_cast<int>(*f.outcome)});
  if (!f.error_signature.empty()) add("c.error_signature = ?{}", f.error_signature);
  if (f.before_id > 0) add("c.id < ?{}", f.before_id);
  if (f.quarantined) where.push_back(*f.quarantined ? "d.quarantine IN (1, 3)" : "d.quarantine IN (0, 2)");
  if (f.foreign_origin) where.push_back(*f.foreign_origin ? "c.foreign_origin = 1" : "c.foreign_origin = 0");
  std::string w;
  for (const auto& clause : where) w += (w.empty() ? "WHERE " : " AND ") + clause;
  return select_cases_locked(w, params, f.with_code,
                             f.limit > 0 ? fmt::format("ORDER BY c.id DESC LIMIT {}", f.limit) : "ORDER BY c.id DESC");
}

Result<std::vector<LineageNode>> CaseStore::lineage(const std::string& op, const std::string& target) {
  std::lock_guard lock(m_shared.mutex());
  KOPE_ASSIGN(Stmt st, m_db->prepare(
                           "SELECT c.id, c.parent_id, h.target, c.run_id, c.stage, c.verdict, c.outcome, c.ratio, "
                           "c.speedup_ref, d.downstream, c.optimisation, d.quarantine FROM cases c "
                           "JOIN task t ON t.id = c.task_id JOIN hardware h ON h.id = c.hardware_id "
                           "JOIN case_derived d ON d.case_id = c.id "
                           "WHERE t.op = ?1 AND (?2 = '' OR h.target = ?2) ORDER BY c.id"));
  st.bind(1, op).bind(2, target);
  std::vector<LineageNode> nodes;
  std::unordered_map<int64_t, size_t> index;
  for (;;) {
    KOPE_ASSIGN(bool row, st.step());
    if (!row) break;
    LineageNode n;
    n.id = st.int64(0);
    n.parent_id = st.opt_int64(1);
    n.target = st.text(2);
    n.run_id = st.text(3);
    n.stage = static_cast<Stage>(std::clamp<int64_t>(st.int64(4), 0, 2));
    KOPE_ASSIGN(n.verdict, stored_verdict(st.text(5)));
    n.outcome = static_cast<Outcome>(std::clamp<int64_t>(st.int64(6), 0, 3));
    n.ratio = st.real(7);
    n.speedup_vs_reference = st.opt_real(8);
    n.downstream = st.real(9);
    n.optimisation = st.text(10);
    n.quarantine_status = stored_quarantine(st.int64(11)).value_or(QuarantineStatus::none);
    index[n.id] = nodes.size();
    nodes.push_back(std::move(n));
  }
  // Depth-first order: roots (or cases whose parent is outside the selection) in id order, each
  // followed by its subtree, children in id order.
  std::unordered_map<int64_t, std::vector<size_t>> children;
  std::vector<size_t> roots;
  for (size_t i = 0; i < nodes.size(); ++i) {
    auto p = nodes[i].parent_id;
    if (p && index.count(*p)) {
      children[*p].push_back(i);
    } else {
      roots.push_back(i);
    }
  }
  std::vector<LineageNode> out;
  out.reserve(nodes.size());
  std::vector<std::pair<size_t, int>> stack;
  for (auto it = roots.rbegin(); it != roots.rend(); ++it) stack.emplace_back(*it, 0);
  while (!stack.empty()) {
    auto [i, depth] = stack.back();
    stack.pop_back();
    nodes[i].depth = depth;
    out.push_back(nodes[i]);
    auto ch = children.find(nodes[i].id);
    if (ch == children.end()) continue;
    for (auto it = ch->second.rbegin(); it != ch->second.rend(); ++it) stack.emplace_back(*it, depth + 1);
  }
  return out;
}

Status CaseStore::verify_case_locked(int64_t id, bool confirmed, const std::string& note) {
  std::optional<QuarantineStatus> q;  // nullopt: a code this kope does not know
  int64_t task_id = 0, hw_id = 0, tc_id = 0, foreign = 0;
  double ratio = 0;
  std::optional<int64_t> parent;
  {
    KOPE_ASSIGN(Stmt st, m_db->prepare("SELECT d.quarantine, c.ratio, c.parent_id, c.task_id, c.hardware_id, "
                                       "c.toolchain_id, c.foreign_origin FROM cases c JOIN case_derived d "
                                       "ON d.case_id = c.id WHERE c.id = ?"));
    st.bind(1, id);
    KOPE_ASSIGN(bool row, st.step());
    if (!row) return fail(ErrorKind::not_found, "case {} does not exist", id);
    q = stored_quarantine(st.int64(0));
    ratio = st.real(1);
    parent = st.opt_int64(2);
    task_id = st.int64(3);
    hw_id = st.int64(4);
    tc_id = st.int64(5);
    foreign = st.int64(6);
  }
  if (q == QuarantineStatus::none || q == QuarantineStatus::verified) {
    return fail(ErrorKind::usage, "case {} is not quarantined ({})", id,
                q == QuarantineStatus::none ? "never was" : "already verified");
  }
  if (q == QuarantineStatus::refuted && confirmed) {
    return fail(ErrorKind::usage, "case {} was refuted by an earlier re-verification; record a new case instead", id);
  }
  int64_t next = quarantine_code(confirmed ? QuarantineStatus::verified : QuarantineStatus::refuted);
  {
    KOPE_ASSIGN(Stmt st, m_db->prepare("UPDATE case_derived SET quarantine = ?, review_note = ?, reviewed_at = ? "
                                       "WHERE case_id = ?"));
    KOPE_TRY(st.bind(1, next).bind(2, note).bind(3, util::now_iso8601()).bind(4, id).run());
  }
  if (confirmed) {
    double delta = k_downstream_self * ratio;
    {
      KOPE_ASSIGN(Stmt up, m_db->prepare("UPDATE case_derived SET downstream = downstream + ? WHERE case_id = ?"));
      KOPE_TRY(up.bind(1, delta).bind(2, id).run());
    }
    KOPE_TRY(propagate_downstream_locked(parent, k_downstream_self * k_downstream_decay * delta));
    KOPE_TRY(update_summary_locked(task_id, hw_id, tc_id, foreign != 0));
  }
  return {};
}

Status CaseStore::update_summary_locked(int64_t task_id, int64_t hardware_id, int64_t toolchain_id, bool foreign) {
  KOPE_ASSIGN(Stmt st, m_db->prepare(
                           "UPDATE task_summary SET (best_case, best_speedup) = ("
                           "SELECT c.id, c.speedup_ref FROM cases c JOIN case_derived d ON d.case_id = c.id "
                           "WHERE c.task_id = ?1 AND c.hardware_id = ?2 AND c.toolchain_id = ?3 AND c.foreign_origin = ?4 "
                           "AND c.verdict = 'correct' AND c.speedup_ref IS NOT NULL AND d.quarantine IN (0, 2) "
                           "ORDER BY c.speedup_ref DESC, c.id LIMIT 1) "
                           "WHERE task_id = ?1 AND hardware_id = ?2 AND toolchain_id = ?3 AND foreign_origin = ?4"));
  st.bind(1, task_id).bind(2, hardware_id).bind(3, toolchain_id).bind(4, static_cast<int64_t>(foreign));
  return st.run();
}

}  // namespace kope::memory
