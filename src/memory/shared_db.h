// memory/shared_db.h — the one database handle that the small stores of a SqliteStore share
// (internal): the connection (SQLite or PostgreSQL, memory/db.h), the mutex that serialises every
// use of it, the store's identity, write transactions with their re-sending after a lost
// PostgreSQL connection, and the full-text search index that cases and lessons both feed.
//
// Locking: whoever calls a small store's `*_locked` function holds mutex(), and for a write has a
// transaction open (begin_locked/commit_locked, or write() which does all of it). A small store
// keeps its caches itself and registers their reset with on_reset(): they are dropped when a
// transaction rolls back and before a lost connection is re-opened, so no cache outlives the
// writes it assumed.
#pragma once

#include <array>
#include <filesystem>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "memory/db.h"

namespace kope::memory {

class SharedDb {
 public:
  SharedDb(std::unique_ptr<Db> db, std::filesystem::path path) : m_db(std::move(db)), m_path(std::move(path)) {}
  SharedDb(const SharedDb&) = delete;
  SharedDb& operator=(const SharedDb&) = delete;

  // Reads the instance id and the store's own origin row after opening. Fails with corrupt when
  // either is missing.
  Status load_identity();

  Db& db() { return *m_db; }
  std::mutex& mutex() { return m_mutex; }
  const std::filesystem::path& path() const { return m_path; }
  // This database's instance id (meta 'instance') and the id of its own origin row.
  const std::string& instance() const { return m_instance; }
  int64_t origin_id() const { return m_origin_id; }

  // Registers a cache reset, run whenever caches may have gone stale (reset_caches()).
  void on_reset(std::function<void()> reset) { m_resets.push_back(std::move(reset)); }
  // Drops the pending search-index counts and every registered cache.
  void reset_caches();

  // Whether a write may be sent again when a lost connection hid whether its COMMIT happened:
  // idempotent writes (cases on natural keys, meta values, a prompt's log and credit, imports)
  // may; lesson deltas and re-verifications may not (an upvote sent twice counts twice).
  enum class Resend { idempotent, only_unsent };
  // Runs the locked write `op`; after a lost PostgreSQL connection it reconnects (with backoff)
  // and runs it again, unless the COMMIT may have happened and `resend` forbids it (an io error
  // saying so). For SQLite it runs `op` once. The caller holds mutex().
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
  // Every write: begin (pending term counts cleared; caches reset if it rolls back) and commit
  // (pending term counts and counters flushed first).
  Result<Transaction> begin_locked();
  Status commit_locked(Transaction& tx);
  // One whole write: takes mutex(), opens a transaction, runs `op` (which returns a Status or a
  // Result) and commits when it succeeded, re-sent as resending_locked says. A failed `op` rolls
  // the transaction back.
  template <class Op>
  auto write(Resend resend, Op&& op) -> decltype(op()) {
    std::lock_guard lock(m_mutex);
    return resending_locked(resend, [&]() -> decltype(op()) {
      KOPE_ASSIGN(Transaction tx, begin_locked());
      auto result = op();
      if (!result) return result;
      KOPE_TRY(commit_locked(tx));
      return result;
    });
  }

  // --- the search index (journals: corpus 0, keyed by case id; lessons: corpus 1, keyed by seq)
  // Counts the distinct search terms of a document of `corpus` into the term statistics used to
  // weight lexical matches (added or removed by `delta`); written at commit.
  void note_terms_locked(int corpus, std::string_view text, int delta);
  void note_terms_locked(int corpus, const std::vector<std::string>& distinct_terms, int delta);
  // Adds (or with `remove` deletes) the search entry `rowid` of a corpus: FTS5 in SQLite; in
  // PostgreSQL a row with the tsvector of its tokens, counted into the corpus totals (counters
  // fts_docs:N, fts_tokens:N) that BM25 needs.
  Status index_search_locked(int corpus, int64_t rowid, const std::string& body, const std::string& tags, bool remove);
  // Adds `delta` to the counter `name` (table counters) at commit.
  void add_counter_locked(const std::string& name, int64_t delta) { m_pending_counters[name] += delta; }

 private:
  Status flush_terms_locked();
  // flush_terms_locked's upserts of one corpus on PostgreSQL: few statements for many terms.
  Status add_term_counts_postgres_locked(int corpus, const std::vector<std::pair<std::string, int64_t>>& rows);

  std::unique_ptr<Db> m_db;
  std::filesystem::path m_path;
  std::mutex m_mutex;
  std::string m_instance;
  int64_t m_origin_id = 0;
  std::vector<std::function<void()>> m_resets;
  std::array<std::unordered_map<std::string, int64_t>, 2> m_pending_terms;  // per corpus
  std::map<std::string, int64_t> m_pending_counters;                        // flushed with the terms
};

}  // namespace kope::memory
