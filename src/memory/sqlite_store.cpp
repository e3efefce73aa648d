#include "memory/sqlite_store.h"

#include "memory/check.h"
#include "memory/pg.h"
#include "memory/schema.h"
#include "util/fs.h"

namespace kope::memory {

// ----------------------------------------------------------------------------------------------
// Opening

Result<std::unique_ptr<Database>> open_store(const std::filesystem::path& path) {
  if (is_store_url(path.string())) {
    KOPE_ASSIGN(auto store, SqliteStore::open_postgres(path.string()));
    return std::unique_ptr<Database>(std::move(store));
  }
  KOPE_ASSIGN(auto store, SqliteStore::open(path));
  return std::unique_ptr<Database>(std::move(store));
}

bool is_store_url(std::string_view location) { return is_postgres_url(location); }

std::filesystem::path default_store_path() {
  if (auto v = util::get_env("KOPE_MEMORY")) return std::filesystem::path(*v);
  return util::data_dir() / "memory.db";
}

int store_schema_version() { return k_schema_version; }

Result<std::unique_ptr<SqliteStore>> SqliteStore::open(const std::filesystem::path& path) {
  bool in_memory = path == ":memory:";
  if (!in_memory) {
    if (path.has_parent_path()) {
      KOPE_TRY(util::make_dirs(path.parent_path()));
    }
    std::error_code ec;
    if (std::filesystem::is_directory(path, ec)) {
      return fail(ErrorKind::io, "memory database {}: is a directory", path.string());
    }
    KOPE_TRY(check_file_header(path));
  }
  KOPE_ASSIGN(auto db, Db::open(path));
  KOPE_TRY(register_functions(*db));
  KOPE_TRY(configure_connection(*db, in_memory));
  KOPE_TRY(migrate(*db));
  auto shared = std::make_unique<SharedDb>(std::move(db), path);
  KOPE_TRY(shared->load_identity());
  return std::unique_ptr<SqliteStore>(new SqliteStore(std::move(shared)));
}

Result<std::unique_ptr<SqliteStore>> SqliteStore::open_postgres(const std::string& url) {
  KOPE_ASSIGN(auto db, Db::open_postgres(url));
  KOPE_TRY(migrate(*db));
  std::filesystem::path where = db->path();
  auto shared = std::make_unique<SharedDb>(std::move(db), where);
  KOPE_TRY(shared->load_identity());
  return std::unique_ptr<SqliteStore>(new SqliteStore(std::move(shared)));
}

SqliteStore::SqliteStore(std::unique_ptr<SharedDb> shared)
    : m_shared(std::move(shared)),
      m_cases(*m_shared),
      m_lessons(*m_shared, m_cases),
      m_retrieval(*m_shared),
      m_exchange(*m_shared, m_cases, m_lessons),
      m_meta(*m_shared) {}

// ----------------------------------------------------------------------------------------------
// Store

Result<RecordedCase> SqliteStore::record_attempt(const CaseRecord& c) { return m_cases.record_attempt(c); }
Result<CaseAssessment> SqliteStore::assess_attempt(const CaseRecord& c) { return m_cases.assess_attempt(c); }
Result<std::optional<CaseRecord>> SqliteStore::get_case(int64_t id) { return m_cases.get_case(id); }
Result<std::optional<CaseRecord>> SqliteStore::find_case(const std::string& natural_key) {
  return m_cases.find_case(natural_key);
}
Result<std::vector<CaseRecord>> SqliteStore::best_cases(const std::string& op, const std::string& target, int limit) {
  return m_cases.best_cases(op, target, limit);
}
Result<std::string> SqliteStore::apply(const LessonDelta& delta) { return m_lessons.apply(delta); }
Result<std::vector<Lesson>> SqliteStore::lessons(const LessonScope& filter) { return m_lessons.lessons(filter); }
Result<std::vector<RetrievedItem>> SqliteStore::retrieve(const RetrievalQuery& q) { return m_retrieval.retrieve(q); }
Status SqliteStore::log_retrieval(const RetrievalLogEntry& entry) { return m_lessons.log_retrieval(entry); }
Status SqliteStore::credit(const std::string& prompt_id, double reward) { return m_lessons.credit(prompt_id, reward); }
Result<std::vector<CaseRecord>> SqliteStore::cases(const CaseFilter& filter) { return m_cases.cases(filter); }

// ----------------------------------------------------------------------------------------------
// StoreAdmin

Result<Stats> SqliteStore::stats() { return m_meta.stats(); }
Result<std::vector<int64_t>> SqliteStore::record_cases(const std::vector<CaseRecord>& cs) {
  return m_cases.record_cases(cs);
}
Result<std::vector<std::string>> SqliteStore::apply_all(const std::vector<LessonDelta>& deltas) {
  return m_lessons.apply_all(deltas);
}
Result<std::vector<LineageNode>> SqliteStore::lineage(const std::string& op, const std::string& target) {
  return m_cases.lineage(op, target);
}

Status SqliteStore::verify_case(int64_t id, bool confirmed, const std::string& note) {
  // The case and the lessons drawn from it change in one transaction; not re-sent after a lost
  // COMMIT (its lesson deltas would be logged twice).
  return m_shared->write(SharedDb::Resend::only_unsent, [&]() -> Status {
    KOPE_TRY(m_cases.verify_case_locked(id, confirmed, note));
    if (!confirmed) return {};
    return m_lessons.release_quarantined_locked(id, note);
  });
}

Result<std::optional<Lesson>> SqliteStore::get_lesson(const std::string& id) { return m_lessons.get_lesson(id); }
Result<std::vector<Lesson>> SqliteStore::find_lessons(const LessonFilter& filter) {
  return m_lessons.find_lessons(filter);
}
Result<std::vector<LessonLogEntry>> SqliteStore::lesson_history(const std::string& id) {
  return m_lessons.lesson_history(id);
}
Result<std::optional<RetrievalLogEntry>> SqliteStore::retrieval_entry(const std::string& prompt_id) {
  return m_lessons.retrieval_entry(prompt_id);
}
Status SqliteStore::export_json(std::ostream& out, const ExportOptions& options) {
  return m_exchange.export_json(out, options);
}
Status SqliteStore::export_dot(std::ostream& out, const ExportOptions& options) {
  return m_exchange.export_dot(out, options);
}
Result<ImportReport> SqliteStore::import_json(std::string_view json, const ImportOptions& options) {
  return m_exchange.import_json(json, options);
}
Result<ImportReport> SqliteStore::merge_from(const std::filesystem::path& other, const ImportOptions& options) {
  return m_exchange.merge_from(other, options);
}
Result<CheckReport> SqliteStore::check() { return check_store(*m_shared); }
Result<std::optional<std::string>> SqliteStore::get_meta(const std::string& key) { return m_meta.get_meta(key); }
Status SqliteStore::set_meta(const std::string& key, const std::string& value) { return m_meta.set_meta(key, value); }
Result<std::map<std::string, std::string>> SqliteStore::meta_with_prefix(const std::string& prefix) {
  return m_meta.meta_with_prefix(prefix);
}

// ----------------------------------------------------------------------------------------------

Result<int64_t> Store::record_case(const CaseRecord& c) {
  KOPE_ASSIGN(RecordedCase recorded, record_attempt(c));
  return recorded.id;
}

}  // namespace kope::memory
