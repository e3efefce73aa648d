// memory/sqlite_store.h — the SQL implementation of kope::memory::Database (internal): the
// agent's Store and the StoreAdmin interface, over an SQLite file or, through the same code and a
// PostgreSQL Db (memory/db.h, memory/pg.h), a PostgreSQL database.
//
// SqliteStore is the composition of small stores, each owning its SQL and all sharing one
// database handle (SharedDb, memory/shared_db.h: the connection, its mutex, write transactions,
// the search index):
//   CaseStore      (case_store.h)      cases, their lineage, outcomes and quarantine/re-verification
//   LessonStore    (lesson_store.h)    lessons through logged deltas, the retrieval log and credit
//   RetrievalStore (retrieval_store.h) retrieve (retrieve.cpp) and the lesson text ranking
//   Exchange       (exchange.h)        export, import, merge, Graphviz
//   MetaStore      (meta_store.h)      meta values and statistics
//   check_store    (check.h)           `kope memory check`
// Each Store call goes to the one store that owns it; a call that changes two (verify_case: the
// case and the lessons drawn from it) runs their parts here in one transaction.
//
// The Store is thread-safe: every call takes the shared mutex; every write runs in one write
// transaction (SQLite: BEGIN IMMEDIATE; PostgreSQL: BEGIN plus the advisory write lock,
// Db::begin_write), so a crash leaves either all of a write or none of it, and writers in other
// processes or on other machines take turns. A PostgreSQL write whose connection is lost is run
// again after reconnecting (SharedDb::resending_locked).
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "kope/memory.h"
#include "memory/case_store.h"
#include "memory/db.h"
#include "memory/exchange.h"
#include "memory/lesson_store.h"
#include "memory/meta_store.h"
#include "memory/retrieval_store.h"
#include "memory/shared_db.h"

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
  std::filesystem::path path() const override { return m_shared->path(); }

  // This database's instance id (meta 'instance').
  const std::string& instance() const { return m_shared->instance(); }
  // Internal, for tests: the connection (callers must not hold it across store calls).
  Db& db() { return m_shared->db(); }

 private:
  explicit SqliteStore(std::unique_ptr<SharedDb> shared);

  std::unique_ptr<SharedDb> m_shared;  // first: the stores below hold references to it
  CaseStore m_cases;
  LessonStore m_lessons;
  RetrievalStore m_retrieval;
  Exchange m_exchange;
  MetaStore m_meta;
};

}  // namespace kope::memory
