// memory/meta_store.h — a SqliteStore's meta values and statistics (internal): the key/value
// table meta (its reserved keys instance, created_at and created_by are never written here) and
// the counts, groupings, imports and size that `kope memory stats` shows, read over every table.
//
// Owns the SQL of meta (except the import_provenance:N keys an import writes, Exchange's) and of
// the statistics queries. Every function takes the shared mutex itself.
#pragma once

#include <map>
#include <optional>
#include <string>

#include "kope/memory.h"
#include "memory/shared_db.h"

namespace kope::memory {

class MetaStore {
 public:
  explicit MetaStore(SharedDb& shared) : m_shared(shared), m_db(&shared.db()) {}
  MetaStore(const MetaStore&) = delete;
  MetaStore& operator=(const MetaStore&) = delete;

  // StoreAdmin's calls (kope/memory.h says what each returns).
  Result<Stats> stats();
  Result<std::optional<std::string>> get_meta(const std::string& key);
  Status set_meta(const std::string& key, const std::string& value);
  Result<std::map<std::string, std::string>> meta_with_prefix(const std::string& prefix);

 private:
  SharedDb& m_shared;
  Db* const m_db;
};

}  // namespace kope::memory
