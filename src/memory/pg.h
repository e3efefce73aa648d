// memory/pg.h — the PostgreSQL side of memory/db.h (internal): one libpq connection with its
// server-side prepared statements, the SQL rewriting that lets the store's SQLite-flavoured
// statements run unchanged, and the connection-loss rules.
//
// Statements are written once, in the subset both dialects accept; `?N` and `?` placeholders
// become `$N`, and `INSERT OR IGNORE` becomes `INSERT ... ON CONFLICT DO NOTHING`. Parameters
// travel as text of unknown type (the server infers it from the statement), blobs as binary
// bytea; results come back as text and are parsed by PgStatement's accessors.
//
// Connection loss: a statement outside a transaction (every read) is re-run after reconnecting
// with backoff. Inside a transaction the transaction is gone: the statement fails with io and
// connection_lost() tells the store, which re-runs its whole operation (see
// SqliteStore::resending_locked); when the loss hid the outcome of COMMIT, commit_unconfirmed()
// says so, and only operations that are idempotent on their natural keys are re-sent.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "kope/error.h"

struct pg_conn;
struct pg_result;

namespace kope::memory {

class PgConnection;

// `sql` with `?N`/`?` placeholders as `$N` and INSERT OR IGNORE as ON CONFLICT DO NOTHING;
// `params` receives the number of parameters. String literals and quoted names are kept as is.
std::string postgres_sql(std::string_view sql, int* params = nullptr);

// True for a memory location that names a PostgreSQL database (postgresql://, postgres://).
bool is_postgres_url(std::string_view location);
// The URL without its password (for messages).
std::string redacted_url(std::string_view url);

class PgStatement {
 public:
  PgStatement(PgConnection* conn, std::string name, std::string sql, int n_params);
  ~PgStatement();
  PgStatement(const PgStatement&) = delete;
  PgStatement& operator=(const PgStatement&) = delete;

  void reset();
  void bind_text(int i, std::string value);
  void bind_binary(int i, std::string value);
  void bind_null(int i);
  Result<bool> step();

  bool is_null(int col) const;
  int64_t int64(int col) const;
  double real(int col) const;
  std::string text(int col) const;
  std::string blob(int col) const;  // bytea, decoded

 private:
  friend class PgConnection;
  void clear_result();
  const char* value(int col) const;

  PgConnection* m_conn;
  std::string m_name;  // server-side statement name
  std::string m_sql;   // rewritten text
  std::vector<std::optional<std::string>> m_params;
  std::vector<int> m_formats;  // 0 text, 1 binary
  uint64_t m_prepared_generation = 0;  // the connection generation it was prepared on (0: never)
  pg_result* m_result = nullptr;
  int m_rows = 0;
  int m_row = -1;
  bool m_executed = false;
};

class PgConnection {
 public:
  // Connects to `url` (libpq URL syntax). Fails with io naming the redacted URL.
  static Result<std::unique_ptr<PgConnection>> connect(const std::string& url);
  ~PgConnection();
  PgConnection(const PgConnection&) = delete;
  PgConnection& operator=(const PgConnection&) = delete;

  // Runs one or more statements without parameters or results (BEGIN, COMMIT, DDL).
  Status exec(std::string_view sql);
  // A cached statement for `sql` (the store's dialect; rewritten by postgres_sql).
  Result<PgStatement*> prepare(std::string_view sql);

  int64_t changes() const { return m_changes; }
  bool in_transaction() const { return m_in_transaction; }
  bool connection_lost() const { return m_lost; }
  bool commit_unconfirmed() const { return m_commit_unconfirmed; }
  // Reconnects with backoff (the statements are prepared again on first use).
  Status reconnect();
  const std::string& display() const { return m_display; }
  pg_conn* handle() const { return m_conn; }

 private:
  friend class PgStatement;
  PgConnection(std::string url, pg_conn* conn);
  Result<pg_result*> execute(PgStatement& st);
  // The error of a failed call; marks the connection lost when it is.
  Error failure(pg_result* res, std::string_view what);
  bool bad() const;

  std::string m_url;
  std::string m_display;
  pg_conn* m_conn;
  uint64_t m_generation = 1;
  std::unordered_map<std::string, std::unique_ptr<PgStatement>> m_cache;
  int64_t m_changes = 0;
  bool m_in_transaction = false;
  bool m_lost = false;
  bool m_commit_unconfirmed = false;
};

}  // namespace kope::memory
