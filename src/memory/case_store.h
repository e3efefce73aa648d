// memory/case_store.h — the cases of a SqliteStore (internal): recording attempts (natural-key
// idempotent, code content-addressed and compressed, r/outcome/quarantine from assess_case, d(v)
// propagated up the ancestor chain, per-run and per-task summaries and error->fix links kept
// current), reading them back (by id, key, filter, best per op), their lineage, and the case side
// of re-verifying a quarantined case.
//
// Owns the SQL of the tables cases, task, hardware, toolchain, origin, blob, journal,
// case_derived, fix_link, runs and task_summary, and the caches of their ids and of lineage. Its
// search entries go through SharedDb's index (corpus 0).
//
// Functions without `_locked` take the shared mutex (and a transaction for writes) themselves;
// `*_locked` ones expect the caller to hold it, inside a transaction where they write.
#pragma once

#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "kope/memory.h"
#include "memory/shared_db.h"

namespace kope::memory {

// The cases.timings column: one JSON array per timed case (rows written by older versions have
// fewer elements; they read back with the defaults).
std::string timings_to_json(const std::vector<CaseTimingRecord>& ts);
std::vector<CaseTimingRecord> timings_from_json(const std::string& text);

class CaseStore {
 public:
  explicit CaseStore(SharedDb& shared);
  CaseStore(const CaseStore&) = delete;
  CaseStore& operator=(const CaseStore&) = delete;

  // Store and StoreAdmin's calls on cases (kope/memory.h says what each returns).
  Result<RecordedCase> record_attempt(const CaseRecord& c);
  Result<CaseAssessment> assess_attempt(const CaseRecord& c);
  Result<std::vector<int64_t>> record_cases(const std::vector<CaseRecord>& cs);
  Result<std::optional<CaseRecord>> get_case(int64_t id);
  Result<std::optional<CaseRecord>> find_case(const std::string& natural_key);
  Result<std::vector<CaseRecord>> best_cases(const std::string& op, const std::string& target, int limit);
  Result<std::vector<CaseRecord>> cases(const CaseFilter& filter);
  Result<std::vector<LineageNode>> lineage(const std::string& op, const std::string& target);

  // The case side of a re-verification: moves quarantined case `id` to verified (`confirmed`) or
  // refuted and, when confirmed, counts its r into d(v) and the task summary again. Fails with
  // not_found for an unknown case, usage for one that is not quarantined or already refuted.
  // The lessons drawn from it are LessonStore's (release_quarantined_locked).
  Status verify_case_locked(int64_t id, bool confirmed, const std::string& note);

  // Where an inserted case came from (local or imported).
  struct InsertSource {
    int64_t origin_id = 0;
    bool foreign = false;
    std::string created_at;                            // empty: now
    std::optional<QuarantineStatus> quarantine_state;  // imported review state
    std::string review_note;
  };
  // Records `c` in the open transaction unless its natural key is recorded already (then returns
  // that case unchanged).
  Result<RecordedCase> insert_case_locked(const CaseRecord& c, const InsertSource& src);
  Result<std::optional<int64_t>> case_id_by_key_locked(const std::string& key);
  // The cases matching `where_sql` (over the aliases of the case query: c cases, t task,
  // h hardware, tc toolchain, d case_derived, o origin) with `params` bound as ?1.., then
  // `order_limit`; with their code when `with_code`. Fails with corrupt for an unreadable blob.
  Result<std::vector<CaseRecord>> select_cases_locked(const std::string& where_sql,
                                                      const std::vector<SqlValue>& params, bool with_code,
                                                      const std::string& order_limit);
  // The id of the origin row of `instance`, added when new.
  Result<int64_t> ensure_origin_locked(const std::string& instance);
  // Whether case `id` exists.
  Result<bool> exists_locked(int64_t id);
  // The quarantine state of case `id`; nullopt for an unknown case or a code this kope does not know.
  Result<std::optional<QuarantineStatus>> quarantine_of_locked(int64_t id);

 private:
  // The pure, CPU-heavy part of recording a case (hashing and compressing the code, the error
  // signature, the search text and its terms), computed before the write transaction, in
  // parallel for batches.
  struct PreparedCase {
    std::string code_hash;  // raw SHA-256, empty without code
    std::string code_frame; // compress() output
    std::string error;      // a compression failure
    std::string signature;
    std::string optimisation;
    std::string journal;
    std::string body;       // indexed text: optimisation, signature, journal
    std::vector<std::string> terms;  // distinct tokens of body
  };
  static PreparedCase prepare_case(const CaseRecord& c);
  static std::vector<PreparedCase> prepare_cases(const std::vector<CaseRecord>& cs);

  Result<RecordedCase> insert_case_locked(const CaseRecord& c, const InsertSource& src, const PreparedCase* prepared);
  // insert_case_locked for a case whose natural key is known not to be recorded yet.
  Result<RecordedCase> insert_new_case_locked(const CaseRecord& c, const InsertSource& src,
                                              const PreparedCase* prepared);
  // The ids of those of `cs` already recorded, by natural key (only plain ASCII keys are looked
  // up; the others are left to insert_case_locked's own check).
  Result<std::unordered_map<std::string, int64_t>> case_ids_by_keys_locked(const std::vector<CaseRecord>& cs);
  // Fails with usage for a case the store cannot record (no op or target,
  // non-finite or negative speedups).
  static Status validate_case(const CaseRecord& c);
  // The parent a case names (by id or natural key) with its facts; nothing for a root. Fails
  // with not_found when the named parent does not exist.
  struct ParentOfCase {
    std::optional<int64_t> id;
    std::optional<ParentFacts> facts;
  };
  Result<ParentOfCase> parent_locked(const CaseRecord& c);
  // Keeps a case this store just recorded for parent_locked (a case's key, verdict, speedup and
  // signature never change), so a batch's children need no query for their parents.
  void remember_case_locked(const std::string& natural_key, int64_t id, ParentFacts facts);
  // A recorded case's id and the assessment it was recorded with.
  Result<RecordedCase> recorded_case_locked(int64_t id);
  Result<int64_t> ensure_task_locked(const TaskInfo& t);
  // Stores t's typed signature shape with task row `id`, which has none.
  Status add_task_shape_locked(int64_t id, const TaskInfo& t);
  Result<int64_t> ensure_hardware_locked(const HardwareInfo& h);
  Result<int64_t> ensure_toolchain_locked(const ToolchainInfo& t);
  Result<std::optional<int64_t>> ensure_blob_locked(const PreparedCase& p, size_t raw_size);
  Status propagate_downstream_locked(std::optional<int64_t> start, double delta);
  // The parent of case `id` (lineage never changes, so it is cached).
  Result<std::optional<int64_t>> parent_of_locked(int64_t id);
  Status update_summary_locked(int64_t task_id, int64_t hardware_id, int64_t toolchain_id, bool foreign);
  Result<std::optional<CaseRecord>> get_case_locked(int64_t id, bool with_code);
  void reset_caches();

  SharedDb& m_shared;
  Db* const m_db;
  std::unordered_map<std::string, int64_t> m_task_ids;      // op + '\n' + spec_hash [+ "\n+shape"]
  std::unordered_map<std::string, int64_t> m_hardware_ids;  // target + '\n' + cpu_model
  std::unordered_map<std::string, int64_t> m_toolchain_ids;
  std::unordered_map<std::string, int64_t> m_origin_ids;
  std::unordered_map<int64_t, std::optional<int64_t>> m_parent_of;  // lineage never changes
  static constexpr size_t k_max_recent_cases = 100'000;
  std::unordered_map<std::string, int64_t> m_recent_ids;            // remember_case_locked
  std::unordered_map<int64_t, ParentFacts> m_recent_facts;
};

}  // namespace kope::memory
