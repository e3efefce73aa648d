// memory/schema.h — the memory database's schema, its versions and migrations, and the checks
// that tell a kope database from a damaged or foreign file.
//
// Versions (SQLite: PRAGMA user_version, PRAGMA application_id is k_application_id; PostgreSQL:
// the kope_schema table, whose databases are created at version 2 with the same tables):
//   1  facts: origins, hardware, toolchains, tasks, code blobs, cases, journals, lessons with
//      their sources, aliases and delta log, learned values, the retrieval log, the import log;
//      derived per-case state (d(v), quarantine)
//   2  retrieval accelerators, backfilled from version 1 data: error->fix links, per-task
//      summaries (counts, best and first correct case per hardware/toolchain), FTS5 indexes
//      over journals and lessons with their term statistics, per-run counts, code counters
//   3  task.signature_shape: the typed shape of the kernel signature (nullable; NULL for tasks
//      recorded before it, or imported without one)
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

#include "kope/error.h"
#include "memory/db.h"

namespace kope::memory {

inline constexpr int k_schema_version = 3;
inline constexpr int32_t k_application_id = 0x6B6F7065;  // "kope"

// Checks the first bytes of an existing, non-empty file before SQLite sees it: the SQLite magic
// and, for a database at rest (no WAL beside it), that the file holds as many pages as its
// header claims (a truncated copy fails here).
// Fails with corrupt naming the file.
Status check_file_header(const std::filesystem::path& path);

// Registers the SQL functions the schema uses (kope_case_tags, kope_lesson_tags) on `db`.
Status register_functions(Db& db);

// Sets WAL, synchronous=FULL, foreign keys and a 64 MiB page cache (WAL is skipped for
// in-memory databases).
Status configure_connection(Db& db, bool in_memory);

// The schema version the database holds (0 for an empty one).
Result<int> stored_schema_version(Db& db);

// Brings the database to `target_version`, creating it when empty (SQLite or PostgreSQL). Fails with corrupt when the
// file is not a kope database or was written by a newer schema, naming the file. Safe against
// several processes opening the same new file at once (runs under BEGIN IMMEDIATE).
Status migrate(Db& db, int target_version = k_schema_version);

// The tags indexed with a case's journal and a lesson (shared by inserts and the migration).
std::string case_search_tags(std::string_view op, std::string_view category, std::string_view target,
                             int stage, std::string_view verdict, int outcome);
std::string lesson_search_tags(int kind, std::string_view category, std::string_view backend,
                               std::string_view target);

}  // namespace kope::memory
