// memory/db.h — a thin RAII layer over the SQLite C API used by the memory store, and over
// libpq for a PostgreSQL database (memory/pg.h) behind the same two classes.
//
// Db owns one connection and a cache of prepared statements; Stmt is a borrowed, reset-on-scope
// statement handle. SQLite result codes are converted to kope::Error here, once: CORRUPT and
// NOTADB become ErrorKind::corrupt, FULL/IOERR/CANTOPEN/BUSY become io, and every message names
// the database file. Not thread-safe: the store serialises access with its own mutex.
//
// The store writes its SQL once, in what both dialects accept (a PostgreSQL Db rewrites the
// placeholders, pg.h); the few statements that differ ask dialect().
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <variant>
#include <vector>

#include "kope/error.h"

struct sqlite3;
struct sqlite3_stmt;

namespace kope::memory {

class Db;
class PgConnection;
class PgStatement;

enum class Dialect { sqlite, postgres };

// A value bound to a dynamically built query.
using SqlValue = std::variant<int64_t, double, std::string>;

// A prepared statement borrowed from Db's cache. Binding is 1-based as in SQLite. The statement
// is reset and its bindings cleared when the Stmt goes out of scope, so it can be reused.
class Stmt {
 public:
  Stmt(Db* db, sqlite3_stmt* stmt) : m_db(db), m_stmt(stmt) {}
  Stmt(Db* db, PgStatement* pg) : m_db(db), m_stmt(nullptr), m_pg(pg) {}
  Stmt(Stmt&& other) noexcept : m_db(other.m_db), m_stmt(other.m_stmt), m_pg(other.m_pg) {
    other.m_stmt = nullptr;
    other.m_pg = nullptr;
  }
  Stmt(const Stmt&) = delete;
  Stmt& operator=(const Stmt&) = delete;
  Stmt& operator=(Stmt&&) = delete;
  ~Stmt();

  // Resets the statement and clears its bindings, for the next execution.
  Stmt& reset();
  Stmt& bind(int i, int64_t v);
  Stmt& bind(int i, int v) { return bind(i, static_cast<int64_t>(v)); }
  Stmt& bind(int i, double v);
  Stmt& bind(int i, std::string_view v);  // bound as TEXT (copied)
  Stmt& bind(int i, const std::string& v) { return bind(i, std::string_view(v)); }
  Stmt& bind(int i, const char* v) { return bind(i, std::string_view(v)); }
  Stmt& bind_blob(int i, std::string_view v);
  Stmt& bind_null(int i);
  Stmt& bind(int i, std::optional<double> v) { return v ? bind(i, *v) : bind_null(i); }
  Stmt& bind(int i, std::optional<int64_t> v) { return v ? bind(i, *v) : bind_null(i); }
  Stmt& bind(int i, const SqlValue& v);
  // Binds values to parameters 1..n.
  Stmt& bind_all(const std::vector<SqlValue>& values);

  // Steps once: true when a row is available, false when done. Errors name the database.
  Result<bool> step();
  // Steps to completion, ignoring rows.
  Status run();
  // Runs a write whose rows and change count are not needed. On PostgreSQL inside a transaction
  // it is only queued, and goes out with the next statement that needs a result (or COMMIT), in
  // one round trip for all (pg.h, "Pipelining"): a failure surfaces from that statement and the
  // transaction fails as it would have. SQLite runs it at once.
  Status run_later();
  // Runs an INSERT prepared by Db::prepare_insert: the id of the row it added, or nullopt when
  // it added none (ON CONFLICT DO NOTHING).
  Result<std::optional<int64_t>> run_insert();

  bool is_null(int col) const;
  int64_t int64(int col) const;
  double real(int col) const;
  std::optional<double> opt_real(int col) const;
  std::optional<int64_t> opt_int64(int col) const;
  std::string text(int col) const;
  std::string blob(int col) const;

 private:
  Db* m_db;
  sqlite3_stmt* m_stmt;
  PgStatement* m_pg = nullptr;  // instead of m_stmt, on a PostgreSQL Db
};

class Db {
 public:
  // Opens (creating when allowed) the database at `path` (":memory:" for a private in-memory
  // one). Sets extended result codes and the busy timeout. Fails with io or corrupt.
  static Result<std::unique_ptr<Db>> open(const std::filesystem::path& path, bool read_only = false,
                                          bool create = true);
  // Connects to the PostgreSQL database at `url` (postgresql://user@host[:port]/db). Fails with io.
  static Result<std::unique_ptr<Db>> open_postgres(const std::string& url);
  ~Db();
  Db(const Db&) = delete;
  Db& operator=(const Db&) = delete;

  // Runs one or more statements without results.
  Status exec(std::string_view sql);
  // A cached prepared statement for `sql` (the text is the cache key).
  Result<Stmt> prepare(std::string_view sql);
  // An INSERT (not INSERT OR IGNORE) whose new row's id is wanted, for Stmt::run_insert(): on
  // PostgreSQL it gains RETURNING id, one round trip where lastval() would take a second.
  Result<Stmt> prepare_insert(std::string_view sql);
  // A single integer from a query returning one row (nullopt when no row or NULL).
  Result<std::optional<int64_t>> query_int(std::string_view sql);

  // The id of the row the last INSERT added (PostgreSQL: lastval(), one more round trip; see
  // prepare_insert). Only right after that INSERT's run(): on PostgreSQL a statement queued by
  // run_later() in between could have drawn from another sequence.
  int64_t last_insert_rowid() const;
  int changes() const;
  bool in_transaction() const;

  Dialect dialect() const { return m_pg ? Dialect::postgres : Dialect::sqlite; }
  // PostgreSQL: the round trips to the server so far (a pipeline of statements counts once)
  // and the statements executed; 0 for SQLite, which has none.
  uint64_t round_trips() const;
  uint64_t statements() const;
  bool postgres() const { return m_pg != nullptr; }
  // Opens a write transaction that serialises with every other writer of the database: SQLite's
  // BEGIN IMMEDIATE; on PostgreSQL, BEGIN and a transaction-level advisory lock keyed by the
  // schema, so writers on any machine take turns as SQLite's do.
  Status begin_write();
  // Opens a read transaction that sees one snapshot (SQLite: BEGIN; PostgreSQL: REPEATABLE READ,
  // READ ONLY), for reads of many statements that must agree (exports).
  Status begin_read();
  // PostgreSQL only (false for SQLite): the connection was lost during a transaction, and
  // whether that hid the outcome of its COMMIT. reconnect() clears both.
  bool connection_lost() const;
  bool commit_unconfirmed() const;
  Status reconnect();
  // The subquery listing the values of a JSON array bound to `param` ("?" or "?3"), as
  // integers (json_ints) or text (json_texts), for `x IN (...)`.
  std::string json_ints(std::string_view param) const;
  std::string json_texts(std::string_view param) const;

  // Converts the connection's current error (after a failed call that returned `rc`).
  Error error(int rc, std::string_view what) const;

  const std::filesystem::path& path() const { return m_path; }
  sqlite3* handle() const { return m_db; }

 private:
  Db(sqlite3* db, std::filesystem::path path);
  Db(std::unique_ptr<PgConnection> pg, std::filesystem::path path);
  sqlite3* m_db;
  std::filesystem::path m_path;
  std::unordered_map<std::string, sqlite3_stmt*> m_cache;
  std::unique_ptr<PgConnection> m_pg;  // set instead of m_db for PostgreSQL
};

// BEGIN IMMEDIATE ... COMMIT, rolled back on scope exit unless commit() succeeded. Nested use
// is not supported (the store never nests).
class Transaction {
 public:
  // `on_rollback` runs when the transaction is rolled back (failed commit or scope exit), so
  // callers can drop caches that assumed the writes would stay.
  static Result<Transaction> begin(Db& db, std::function<void()> on_rollback = {});
  Transaction(Transaction&& other) noexcept : m_db(other.m_db), m_on_rollback(std::move(other.m_on_rollback)) {
    other.m_db = nullptr;
  }
  Transaction(const Transaction&) = delete;
  Transaction& operator=(const Transaction&) = delete;
  Transaction& operator=(Transaction&&) = delete;
  ~Transaction();
  Status commit();

 private:
  Transaction(Db* db, std::function<void()> on_rollback) : m_db(db), m_on_rollback(std::move(on_rollback)) {}
  Db* m_db;
  std::function<void()> m_on_rollback;
};

// Maps an SQLite result code to an error kind.
ErrorKind error_kind_for_sqlite(int rc);

}  // namespace kope::memory
