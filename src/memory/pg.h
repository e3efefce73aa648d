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
// SharedDb::resending_locked); when the loss hid the outcome of COMMIT, commit_unconfirmed()
// says so, and only operations that are idempotent on their natural keys are re-sent.
//
// Pipelining: inside a transaction, a write whose result the store does not read (defer()) is
// only queued; the queue goes out with the next statement that returns a result, or with
// COMMIT, in one libpq pipeline (one round trip for all). A queued statement's failure is
// reported by the statement it went out with, and the transaction fails as it would have.
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

// PostgreSQL array literals, for one statement over many rows (`unnest(CAST(? AS TEXT[]), ...)`):
// each text quoted and escaped; numbers printed as a bound parameter is (doubles to round-trip).
std::string pg_text_array(const std::vector<std::string>& items);
std::string pg_int_array(const std::vector<int64_t>& items);
std::string pg_double_array(const std::vector<double>& items);

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
  // Queues the statement with its current bindings (see "Pipelining" above). Only inside a
  // transaction; outside one it runs at once.
  Status defer();

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
  // Statements queued by PgStatement::defer() and not yet sent.
  size_t deferred() const { return m_deferred.size(); }
  // Round trips to the server so far (a pipeline counts once), and statements executed.
  uint64_t round_trips() const { return m_round_trips; }
  uint64_t statements() const { return m_statements; }

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
  // A statement queued by PgStatement::defer(), with a copy of its bindings.
  struct Deferred {
    PgStatement* st;
    std::vector<std::optional<std::string>> params;
    std::vector<int> formats;
  };
  // Sends the queued statements and then `last` (a prepared statement, or else the text
  // `last_sql` when not empty) in one pipeline and reads their results: the first failure, or
  // last's result (nullptr when there is no last). Marks the connection lost as execute() does.
  Result<pg_result*> run_pipeline(PgStatement* last, const std::string& last_sql);
  // What one result of a pipeline answers: a statement's prepare or its execution (st nullptr:
  // the text `last_sql`).
  struct PipelineCommand {
    PgStatement* st;
    bool prepare;
  };
  // run_pipeline's halves: sending everything (false: the connection failed), then reading
  // each command's result and the final sync.
  bool send_pipeline(const std::vector<Deferred>& queued, PgStatement* last, const std::string& last_sql,
                     std::vector<PipelineCommand>& commands);
  Result<pg_result*> read_pipeline(const std::vector<PipelineCommand>& commands, bool keep_last,
                                   const std::string& last_sql);
  // A pipeline not sent or read to its end leaves the connection in an unknown state: it counts
  // as lost (the server rolls back the transaction when we reconnect).
  std::unexpected<Error> lose_pipeline(std::string_view during);
  static std::string_view command_sql(const PipelineCommand& c, const std::string& last_sql);
  // Sends the prepare of `st` when this connection has not seen it, then its execution.
  bool send_prepared(PgStatement& st, const std::vector<std::optional<std::string>>& params,
                     const std::vector<int>& formats, std::vector<PgStatement*>& prepared_here);
  // The error of a failed call; marks the connection lost when it is.
  Error failure(pg_result* res, std::string_view what);
  bool bad() const;

  std::string m_url;
  std::string m_display;
  pg_conn* m_conn;
  uint64_t m_generation = 1;
  std::unordered_map<std::string, std::unique_ptr<PgStatement>> m_cache;
  std::vector<Deferred> m_deferred;
  uint64_t m_round_trips = 0;
  uint64_t m_statements = 0;
  int64_t m_changes = 0;
  bool m_in_transaction = false;
  bool m_lost = false;
  bool m_commit_unconfirmed = false;
};

}  // namespace kope::memory
