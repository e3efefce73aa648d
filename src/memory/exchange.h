// memory/exchange.h — sharing a SqliteStore's experience (internal): export as JSON (one read
// snapshot, cases then lessons with their history) or Graphviz, import (idempotent by natural
// keys and lesson ids, provenance kept, foreign experience marked) and merge from another
// database file or server (read through a private copy or one read snapshot, never modified).
//
// Owns the SQL of the export queries and of the tables import_log and the meta keys
// import_provenance:N; cases and lessons are added through CaseStore and LessonStore, in the
// import's one transaction. Every function takes the shared mutex itself.
#pragma once

#include <filesystem>
#include <ostream>
#include <string>
#include <string_view>
#include <unordered_map>

#include <nlohmann/json_fwd.hpp>

#include "kope/memory.h"
#include "memory/shared_db.h"

namespace kope::memory {

class CaseStore;
class LessonStore;

class Exchange {
 public:
  Exchange(SharedDb& shared, CaseStore& cases, LessonStore& lessons)
      : m_shared(shared), m_db(&shared.db()), m_cases(cases), m_lessons(lessons) {}
  Exchange(const Exchange&) = delete;
  Exchange& operator=(const Exchange&) = delete;

  // StoreAdmin's calls (kope/memory.h says what each returns).
  Status export_json(std::ostream& out, const ExportOptions& options);
  Status export_dot(std::ostream& out, const ExportOptions& options);
  Result<ImportReport> import_json(std::string_view json, const ImportOptions& options);
  Result<ImportReport> merge_from(const std::filesystem::path& other, const ImportOptions& options);

 private:
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
  Result<ImportReport> import_export_of(Database& other, const std::string& source, const ImportOptions& options);

  SharedDb& m_shared;
  Db* const m_db;
  CaseStore& m_cases;
  LessonStore& m_lessons;
};

}  // namespace kope::memory
