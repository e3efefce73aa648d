// memory/sqlite_store.h — the SQL implementation of kope::memory::Database (internal): the
// agent's Store and the StoreAdmin interface, over an SQLite file or, through the same code and a
// PostgreSQL Db (memory/db.h, memory/pg.h), a PostgreSQL database.
//
// One connection per store, guarded by a mutex (the Store is thread-safe); every write runs in
// one write transaction (SQLite: BEGIN IMMEDIATE; PostgreSQL: BEGIN plus the advisory write lock,
// Db::begin_write), so a crash leaves either all of a write or none of it, and writers in other
// processes or on other machines take turns. A PostgreSQL write whose connection is lost is run
// again after reconnecting (resending_locked).
// The implementation is split by concern: sqlite_store.cpp (open, cases, lineage, stats),
// lessons.cpp (lesson deltas, values, retrieval log, credit), retrieve.cpp, exchange.cpp
// (export/import/merge, dot), check.cpp.
#pragma once

#include <array>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "kope/memory.h"
#include "memory/db.h"

namespace kope::memory {

class SqliteStore final : public Database {
 public:
  static Result<std::unique_ptr<SqliteStore>> open(const std::filesystem::path& path);
  // The store in the PostgreSQL database at `url` (created and migrated as needed).
  static Result<std::unique_ptr<SqliteStore>> open_postgres(const std::string& url);

  // Store
  Result<RecordedCase> record_attempt(const CaseRecord& c) override;
  Result<CaseAssessment> assess_attempt(const CaseRecord& c) override;
  Result<std::optional<CaseRecord>> get_case(int64_t id) override;
  Result<std::optional<CaseRecord>> find_case(const std::string& natural_key) override;
  Result<std::vector<CaseRecord>> best_cases(const std::string& op, const std::string& target, int limit) override;
  Result<std::string> apply(const LessonDelta& delta) override;
  Result<std::vector<Lesson>> lessons(const LessonScope& filter) override;
  Result<std::vector<RetrievedItem>> retrieve(const RetrievalQuery& q) override;
  Status log_retrieval(const RetrievalLogEntry& entry) override;
  Status credit(const std::string& prompt_id, double reward) override;
  Result<std::vector<CaseRecord>> cases(const CaseFilter& filter) override;

  // StoreAdmin
  Result<Stats> stats() override;
  Result<std::vector<int64_t>> record_cases(const std::vector<CaseRecord>& cs) override;
  Result<std::vector<std::string>> apply_all(const std::vector<LessonDelta>& deltas) override;
  Result<std::vector<LineageNode>> lineage(const std::string& op, const std::string& target) override;
  Status verify_case(int64_t id, bool confirmed, const std::string& note) override;
  Result<std::optional<Lesson>> get_lesson(const std::string& id) override;
  Result<std::vector<Lesson>> find_lessons(const LessonFilter& filter) override;
  Result<std::vector<LessonLogEntry>> lesson_history(const std::string& id) override;
  Result<std::optional<RetrievalLogEntry>> retrieval_entry(const std::string& prompt_id) override;
  Status export_json(std::ostream& out, const ExportOptions& options) override;
  Status export_dot(std::ostream& out, const ExportOptions& options) override;
  Result<ImportReport> import_json(std::string_view json, const ImportOptions& options) override;
  Result<ImportReport> merge_from(const std::filesystem::path& other, const ImportOptions& options) override;
  Result<CheckReport> check() override;
  Result<std::optional<std::string>> get_meta(const std::string& key) override;
  Status set_meta(const std::string& key, const std::string& value) override;
  Result<std::map<std::string, std::string>> meta_with_prefix(const std::string& prefix) override;
  std::filesystem::path path() const override { return m_path; }

  // Internal, for tests: the connection (callers must not hold it across store calls).
  Db& db() { return *m_db; }

  // A task's features, cached for similarity scoring.
  struct TaskRow {
    int64_t id = 0;
    TaskInfo info;
    spec::SignatureShape shape;  // task_shape(info)
  };

 private:
  SqliteStore(std::unique_ptr<Db> db, std::filesystem::path path) : m_db(std::move(db)), m_path(std::move(path)) {}
  // Reads the instance id and the store's own origin row after opening.
  Status load_identity();

  // Whether a write may be sent again when a lost connection hid whether its COMMIT happened:
  // idempotent writes (cases on natural keys, meta values, a prompt's log and credit, imports)
  // may; lesson deltas and re-verifications may not (an upvote sent twice counts twice).
  enum class Resend { idempotent, only_unsent };
  // Runs the locked write `op`; after a lost PostgreSQL connection it reconnects (with backoff)
  // and runs it again, unless the COMMIT may have happened and `resend` forbids it (an io error
  // saying so). For SQLite it runs `op` once.
  template <class Op>
  auto resending_locked(Resend resend, Op&& op) -> decltype(op()) {
    constexpr int k_attempts = 4;
    for (int attempt = 1;; ++attempt) {
      auto result = op();
      if (result || !m_db->connection_lost() || attempt >= k_attempts) return result;
      if (m_db->commit_unconfirmed() && resend == Resend::only_unsent) {
        return fail(ErrorKind::io, "{}: the connection was lost while committing, so this write may or may not "
                    "have been applied; it is not sent again (not idempotent): check with `kope memory`",
                    result.error().message);
      }
      reset_caches();
      if (auto s = m_db->reconnect(); !s) return std::unexpected(std::move(s).error());
    }
  }

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

  // Where an inserted case came from (local or imported).
  struct InsertSource {
    int64_t origin_id = 0;
    bool foreign = false;
    std::string created_at;               // empty: now
    std::optional<QuarantineStatus> quarantine_state;  // imported review state
    std::string review_note;
  };

  // --- cases (sqlite_store.cpp); all *_locked functions expect m_mutex held and a transaction
  // open where they write.
  Result<RecordedCase> insert_case_locked(const CaseRecord& c, const InsertSource& src,
                                          const PreparedCase* prepared = nullptr);
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
  Result<std::optional<int64_t>> case_id_by_key_locked(const std::string& key);
  Result<int64_t> ensure_task_locked(const TaskInfo& t);
  // Stores t's typed signature shape with task row `id`, which has none.
  Status add_task_shape_locked(int64_t id, const TaskInfo& t);
  Result<int64_t> ensure_hardware_locked(const HardwareInfo& h);
  Result<int64_t> ensure_toolchain_locked(const ToolchainInfo& t);
  Result<int64_t> ensure_origin_locked(const std::string& instance);
  Result<std::optional<int64_t>> ensure_blob_locked(const PreparedCase& p, size_t raw_size);
  Status propagate_downstream_locked(std::optional<int64_t> start, double delta);
  // The parent of case `id` (lineage never changes, so it is cached).
  Result<std::optional<int64_t>> parent_of_locked(int64_t id);
  Status verify_case_locked(int64_t id, bool confirmed, const std::string& note);
  Status update_summary_locked(int64_t task_id, int64_t hardware_id, int64_t toolchain_id, bool foreign);
  Result<std::vector<CaseRecord>> select_cases_locked(const std::string& where_sql,
                                                      const std::vector<SqlValue>& params, bool with_code,
                                                      const std::string& order_limit);
  Result<std::optional<CaseRecord>> get_case_locked(int64_t id, bool with_code);
  void reset_caches();
  // Every write: begin (pending term counts cleared; caches reset if it rolls back) and commit
  // (pending term counts flushed first).
  Result<Transaction> begin_locked();
  Status commit_locked(Transaction& tx);
  // Counts the distinct search terms of a document of `corpus` (0 journals, 1 lessons) into the
  // term statistics used to weight lexical matches (added or removed by `delta`).
  void note_terms_locked(int corpus, std::string_view text, int delta);
  void note_terms_locked(int corpus, const std::vector<std::string>& distinct_terms, int delta);
  Status flush_terms_locked();
  // flush_terms_locked's upserts of one corpus on PostgreSQL: few statements for many terms.
  Status add_term_counts_postgres_locked(int corpus, const std::vector<std::pair<std::string, int64_t>>& rows);
  // Adds (or with `remove` deletes) the search entry `rowid` of a corpus (0: a case's journal,
  // keyed by case id; 1: a lesson, keyed by seq): FTS5 in SQLite; in PostgreSQL a row with the
  // tsvector of its tokens, counted into the corpus totals (counters fts_docs:N, fts_tokens:N)
  // that BM25 needs.
  Status index_search_locked(int corpus, int64_t rowid, const std::string& body, const std::string& tags, bool remove);

  // --- lessons (lessons.cpp)
  Result<std::string> apply_locked(const LessonDelta& delta);
  Result<std::optional<std::string>> resolve_lesson_locked(const std::string& id);
  Result<std::optional<Lesson>> get_lesson_locked(const std::string& id);
  Result<std::vector<Lesson>> select_lessons_locked(const std::string& where_sql,
                                                    const std::vector<SqlValue>& params,
                                                    const std::string& order_limit);
  Status log_delta_locked(const std::string& lesson_id, std::string_view op, const std::string& reason,
                          std::optional<int64_t> source_case, const std::string& payload);
  Result<std::map<std::string, double>> item_values_locked(const std::string& item_id);
  Result<std::pair<double, double>> update_value_locked(const std::string& item_id, Stage stage, double reward);
  Status index_lesson_locked(int64_t seq, bool remove, const Lesson& l);
  Status add_lesson_sources_locked(const std::string& lesson_id, const std::vector<int64_t>& case_ids);
  // The best active/quarantined lesson of the same kind, scope and error signature whose text is
  // equal or near (Jaccard >= k_lesson_near_duplicate), with its similarity.
  Result<std::optional<std::pair<std::string, double>>> find_duplicate_locked(const Lesson& l);
  // Inserts a lesson row as given (status, counts, values), indexes it and logs its `add`.
  // A proposed id that is already known returns that lesson's id unchanged.
  Result<std::string> insert_lesson_locked(const Lesson& l, const std::string& proposed_id, int64_t origin_id,
                                           bool foreign, const std::string& reason,
                                           std::optional<int64_t> source_case, const std::string& payload);
  Status maybe_deprecate_locked(const std::string& id);

  // --- exchange (exchange.cpp)
  // import_json's steps, inside its transaction: the cases (mapping each exported natural key to
  // its local case id in `key_map`), the lessons (one by one), then the import log row.
  Status import_cases_locked(const nlohmann::json& doc, const ImportOptions& options, ImportReport& report,
                             std::unordered_map<std::string, int64_t>& key_map);
  Status import_lessons_locked(const nlohmann::json& doc, const std::string& source, const ImportOptions& options,
                               const std::unordered_map<std::string, int64_t>& key_map, ImportReport& report);
  Status import_lesson_locked(const nlohmann::json& jl, const std::string& source, const ImportOptions& options,
                              const std::unordered_map<std::string, int64_t>& key_map, ImportReport& report);
  Status log_import_locked(const std::string& source, const ImportOptions& options, const ImportReport& report);
  Result<ImportReport> merge_from_server(const std::string& url, const ImportOptions& options);
  // Imports everything `other` exports, as from `source`.
  Result<ImportReport> import_export_of(SqliteStore& other, const std::string& source, const ImportOptions& options);

  // --- retrieval helpers (retrieve.cpp)
  Status refresh_tasks_locked();
  // Lesson seqs whose text matches any token of `text`, best BM25 first (at most 1000).
  Result<std::vector<int64_t>> ranked_lessons_locked(const std::string& text);

  std::unique_ptr<Db> m_db;
  std::filesystem::path m_path;
  std::mutex m_mutex;
  std::string m_instance;
  int64_t m_origin_id = 0;

  std::unordered_map<std::string, int64_t> m_task_ids;      // op + '\n' + spec_hash [+ "\n+shape"]
  std::unordered_map<std::string, int64_t> m_hardware_ids;  // target + '\n' + cpu_model
  std::unordered_map<std::string, int64_t> m_toolchain_ids;
  std::unordered_map<std::string, int64_t> m_origin_ids;
  std::vector<TaskRow> m_tasks;                             // for similarity
  int64_t m_tasks_max_id = 0;
  std::unordered_map<int64_t, std::string> m_hardware_targets;
  std::array<std::unordered_map<std::string, int64_t>, 2> m_pending_terms;  // per corpus
  std::unordered_map<int64_t, std::optional<int64_t>> m_parent_of;          // lineage never changes
  static constexpr size_t k_max_recent_cases = 100'000;
  std::unordered_map<std::string, int64_t> m_recent_ids;                    // remember_case_locked
  std::unordered_map<int64_t, ParentFacts> m_recent_facts;
  std::map<std::string, int64_t> m_pending_counters;                        // flushed with the terms

  friend class RetrievalEngine;
  friend class Exchange;
};

// Similarity of two operators' features in [0, 1] (category, level, arithmetic intensity,
// problem size, signature shape).
double task_similarity(const TaskInfo& a, const TaskInfo& b);
double task_similarity(const TaskInfo& a, const spec::SignatureShape& sa, const TaskInfo& b,
                       const spec::SignatureShape& sb);
// Whether b computes something structurally close to a: the same op or category, or the same
// parameter shape (tensors, dtypes, about as many dims and attributes) and an arithmetic
// intensity within a factor of 2. Derived from the specs alone, never from op names.
bool task_structurally_close(const TaskInfo& a, const spec::SignatureShape& sa, const TaskInfo& b,
                             const spec::SignatureShape& sb);

}  // namespace kope::memory
