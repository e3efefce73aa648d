// memory/check.h — `kope memory check` over a SqliteStore's database (internal): the database's
// own checks (SQLite: integrity, foreign keys, the FTS5 indexes; PostgreSQL: the search tables'
// totals and the identity sequences), then kope's invariants: lineage (parents exist and are
// older), per-run counts, code blobs that decompress to their size and hash and the blob
// counters, d(v) recomputed, per-task summaries and fix links, lessons' logs and their search
// index. Reads only; owns its SQL.
#pragma once

#include "kope/memory.h"
#include "memory/shared_db.h"

namespace kope::memory {

// The problems found (each kind capped, with a count of the rest) and the figures checked.
// Takes the shared mutex. Fails only when the database cannot be read.
Result<CheckReport> check_store(SharedDb& shared);

}  // namespace kope::memory
