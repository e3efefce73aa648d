#include "memory/db.h"

#include <sqlite3.h>

#include "memory/pg.h"

namespace kope::memory {

namespace {

constexpr int k_busy_timeout_ms = 15000;

}  // namespace

ErrorKind error_kind_for_sqlite(int rc) {
  switch (rc & 0xff) {
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB:
    case SQLITE_FORMAT:
      return ErrorKind::corrupt;
    case SQLITE_FULL:
    case SQLITE_IOERR:
    case SQLITE_CANTOPEN:
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
    case SQLITE_READONLY:
    case SQLITE_PERM:
    case SQLITE_NOMEM:
    case SQLITE_PROTOCOL:
      return ErrorKind::io;
    case SQLITE_CONSTRAINT:
    case SQLITE_MISMATCH:
    case SQLITE_RANGE:
      return ErrorKind::internal;
    default:
      return ErrorKind::internal;
  }
}

Error Db::error(int rc, std::string_view what) const {
  std::string detail = m_db ? sqlite3_errmsg(m_db) : sqlite3_errstr(rc);
  ErrorKind kind = error_kind_for_sqlite(rc);
  std::string hint;
  if (kind == ErrorKind::corrupt) {
    hint = " (the file is damaged or is not a kope memory database; `kope memory check` reports details)";
  } else if ((rc & 0xff) == SQLITE_BUSY || (rc & 0xff) == SQLITE_LOCKED) {
    hint = " (another process holds the database lock)";
  }
  return Error{kind, fmt::format("memory database {}: {}: {}{}", m_path.string(), what, detail, hint)};
}

Result<std::unique_ptr<Db>> Db::open(const std::filesystem::path& path, bool read_only, bool create) {
  sqlite3* raw = nullptr;
  int flags = SQLITE_OPEN_NOMUTEX;
  flags |= read_only ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE;
  if (create && !read_only) flags |= SQLITE_OPEN_CREATE;
  int rc = sqlite3_open_v2(path.c_str(), &raw, flags, nullptr);
  if (rc != SQLITE_OK) {
    std::string detail = raw ? sqlite3_errmsg(raw) : sqlite3_errstr(rc);
    sqlite3_close_v2(raw);
    return std::unexpected(Error{error_kind_for_sqlite(rc),
                                 fmt::format("memory database {}: cannot open: {}", path.string(), detail)});
  }
  sqlite3_extended_result_codes(raw, 1);
  sqlite3_busy_timeout(raw, k_busy_timeout_ms);
  return std::unique_ptr<Db>(new Db(raw, path));
}

Db::Db(sqlite3* db, std::filesystem::path path) : m_db(db), m_path(std::move(path)) {}

Db::Db(std::unique_ptr<PgConnection> pg, std::filesystem::path path)
    : m_db(nullptr), m_path(std::move(path)), m_pg(std::move(pg)) {}

Result<std::unique_ptr<Db>> Db::open_postgres(const std::string& url) {
  KOPE_ASSIGN(auto conn, PgConnection::connect(url));
  std::filesystem::path shown = conn->display();
  return std::unique_ptr<Db>(new Db(std::move(conn), std::move(shown)));
}

Db::~Db() {
  for (auto& [sql, stmt] : m_cache) sqlite3_finalize(stmt);
  m_cache.clear();
  if (m_db) sqlite3_close_v2(m_db);
}

Status Db::begin_write() {
  if (!m_pg) return exec("BEGIN IMMEDIATE");
  // One lock per schema (a test or a deployment may keep several kope memories in one
  // database); 0x6B6F7065 is "kope", as SQLite's application_id.
  return m_pg->exec("BEGIN; SELECT pg_advisory_xact_lock(1802465381, hashtext(current_schema()))");
}

Status Db::begin_read() {
  return exec(m_pg ? "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY" : "BEGIN");
}

uint64_t Db::round_trips() const { return m_pg ? m_pg->round_trips() : 0; }
uint64_t Db::statements() const { return m_pg ? m_pg->statements() : 0; }

bool Db::connection_lost() const { return m_pg && m_pg->connection_lost(); }
bool Db::commit_unconfirmed() const { return m_pg && m_pg->commit_unconfirmed(); }

Status Db::reconnect() {
  if (!m_pg) return {};
  return m_pg->reconnect();
}

std::string Db::json_ints(std::string_view param) const {
  if (!m_pg) return fmt::format("SELECT value FROM json_each({})", param);
  return fmt::format("SELECT CAST(jsonb_array_elements_text(CAST({} AS jsonb)) AS BIGINT)", param);
}

std::string Db::json_texts(std::string_view param) const {
  if (!m_pg) return fmt::format("SELECT value FROM json_each({})", param);
  return fmt::format("SELECT jsonb_array_elements_text(CAST({} AS jsonb))", param);
}

Status Db::exec(std::string_view sql) {
  if (m_pg) return m_pg->exec(sql);
  std::string text(sql);
  char* err = nullptr;
  int rc = sqlite3_exec(m_db, text.c_str(), nullptr, nullptr, &err);
  if (rc != SQLITE_OK) {
    std::string detail = err ? err : sqlite3_errstr(rc);
    sqlite3_free(err);
    ErrorKind kind = error_kind_for_sqlite(rc);
    std::string head = text.substr(0, text.find('\n'));
    if (head.size() > 80) head = head.substr(0, 80) + "...";
    return fail(kind, "memory database {}: {} (while running `{}`)", m_path.string(), detail, head);
  }
  return {};
}

Result<Stmt> Db::prepare(std::string_view sql) {
  if (m_pg) {
    KOPE_ASSIGN(PgStatement * st, m_pg->prepare(sql));
    return Stmt(this, st);
  }
  std::string key(sql);
  auto it = m_cache.find(key);
  if (it != m_cache.end()) return Stmt(this, it->second);
  sqlite3_stmt* stmt = nullptr;
  int rc = sqlite3_prepare_v3(m_db, key.c_str(), static_cast<int>(key.size()), SQLITE_PREPARE_PERSISTENT,
                              &stmt, nullptr);
  if (rc != SQLITE_OK) {
    sqlite3_finalize(stmt);
    std::string head = key.substr(0, 100);
    return std::unexpected(error(rc, fmt::format("cannot prepare `{}`", head)));
  }
  m_cache.emplace(std::move(key), stmt);
  return Stmt(this, stmt);
}

Result<Stmt> Db::prepare_insert(std::string_view sql) {
  if (!m_pg) return prepare(sql);
  return prepare(std::string(sql) + " RETURNING id");
}

Result<std::optional<int64_t>> Db::query_int(std::string_view sql) {
  KOPE_ASSIGN(Stmt st, prepare(sql));
  KOPE_ASSIGN(bool row, st.step());
  if (!row || st.is_null(0)) return std::optional<int64_t>{};
  return std::optional<int64_t>{st.int64(0)};
}

int64_t Db::last_insert_rowid() const {
  if (!m_pg) return sqlite3_last_insert_rowid(m_db);
  auto st = m_pg->prepare("SELECT lastval()");
  if (!st) return 0;
  auto row = (*st)->step();
  return row && *row ? (*st)->int64(0) : 0;
}
int Db::changes() const { return m_pg ? static_cast<int>(m_pg->changes()) : sqlite3_changes(m_db); }
bool Db::in_transaction() const { return m_pg ? m_pg->in_transaction() : sqlite3_get_autocommit(m_db) == 0; }

Stmt::~Stmt() {
  if (m_pg) m_pg->reset();
  if (m_stmt) {
    sqlite3_reset(m_stmt);
    sqlite3_clear_bindings(m_stmt);
  }
}

Stmt& Stmt::reset() {
  if (m_pg) {
    m_pg->reset();
    return *this;
  }
  sqlite3_reset(m_stmt);
  sqlite3_clear_bindings(m_stmt);
  return *this;
}

Stmt& Stmt::bind(int i, int64_t v) {
  if (m_pg) {
    m_pg->bind_text(i, std::to_string(v));
    return *this;
  }
  sqlite3_bind_int64(m_stmt, i, v);
  return *this;
}

Stmt& Stmt::bind(int i, double v) {
  if (m_pg) {
    m_pg->bind_text(i, fmt::format("{:.17g}", v));
    return *this;
  }
  sqlite3_bind_double(m_stmt, i, v);
  return *this;
}

Stmt& Stmt::bind(int i, std::string_view v) {
  if (m_pg) {
    m_pg->bind_text(i, std::string(v));
    return *this;
  }
  sqlite3_bind_text64(m_stmt, i, v.data(), v.size(), SQLITE_TRANSIENT, SQLITE_UTF8);
  return *this;
}

Stmt& Stmt::bind_blob(int i, std::string_view v) {
  if (m_pg) {
    m_pg->bind_binary(i, std::string(v));
    return *this;
  }
  sqlite3_bind_blob64(m_stmt, i, v.data(), v.size(), SQLITE_TRANSIENT);
  return *this;
}

Stmt& Stmt::bind(int i, const SqlValue& v) {
  std::visit([&](const auto& x) { bind(i, x); }, v);
  return *this;
}

Stmt& Stmt::bind_all(const std::vector<SqlValue>& values) {
  for (size_t i = 0; i < values.size(); ++i) bind(static_cast<int>(i + 1), values[i]);
  return *this;
}

Stmt& Stmt::bind_null(int i) {
  if (m_pg) {
    m_pg->bind_null(i);
    return *this;
  }
  sqlite3_bind_null(m_stmt, i);
  return *this;
}

Result<bool> Stmt::step() {
  if (m_pg) return m_pg->step();
  int rc = sqlite3_step(m_stmt);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  const char* sql = sqlite3_sql(m_stmt);
  std::string head = sql ? std::string(sql).substr(0, 100) : std::string();
  Error e = m_db->error(rc, fmt::format("`{}`", head));
  sqlite3_reset(m_stmt);
  return std::unexpected(std::move(e));
}

Status Stmt::run() {
  for (;;) {
    KOPE_ASSIGN(bool row, step());
    if (!row) return {};
  }
}

Status Stmt::run_later() {
  if (m_pg) return m_pg->defer();
  return run();
}

Result<std::optional<int64_t>> Stmt::run_insert() {
  if (m_pg) {
    KOPE_ASSIGN(bool row, step());
    if (!row) return std::optional<int64_t>{};
    return std::optional<int64_t>{int64(0)};
  }
  KOPE_TRY(run());
  if (m_db->changes() == 0) return std::optional<int64_t>{};
  return std::optional<int64_t>{m_db->last_insert_rowid()};
}

bool Stmt::is_null(int col) const {
  return m_pg ? m_pg->is_null(col) : sqlite3_column_type(m_stmt, col) == SQLITE_NULL;
}
int64_t Stmt::int64(int col) const { return m_pg ? m_pg->int64(col) : sqlite3_column_int64(m_stmt, col); }
double Stmt::real(int col) const { return m_pg ? m_pg->real(col) : sqlite3_column_double(m_stmt, col); }

std::optional<double> Stmt::opt_real(int col) const {
  if (is_null(col)) return std::nullopt;
  return real(col);
}

std::optional<int64_t> Stmt::opt_int64(int col) const {
  if (is_null(col)) return std::nullopt;
  return int64(col);
}

std::string Stmt::text(int col) const {
  if (m_pg) return m_pg->text(col);
  const unsigned char* p = sqlite3_column_text(m_stmt, col);
  int n = sqlite3_column_bytes(m_stmt, col);
  if (!p) return {};
  return std::string(reinterpret_cast<const char*>(p), static_cast<size_t>(n));
}

std::string Stmt::blob(int col) const {
  if (m_pg) return m_pg->blob(col);
  const void* p = sqlite3_column_blob(m_stmt, col);
  int n = sqlite3_column_bytes(m_stmt, col);
  if (!p) return {};
  return std::string(static_cast<const char*>(p), static_cast<size_t>(n));
}

Result<Transaction> Transaction::begin(Db& db, std::function<void()> on_rollback) {
  KOPE_TRY(db.begin_write());
  return Transaction(&db, std::move(on_rollback));
}

Transaction::~Transaction() {
  if (!m_db) return;
  if (m_db->in_transaction()) (void)m_db->exec("ROLLBACK");
  if (m_on_rollback) m_on_rollback();
}

Status Transaction::commit() {
  if (!m_db) return fail(ErrorKind::internal, "transaction already finished");
  Status s = m_db->exec("COMMIT");
  if (!s) return s;  // the destructor rolls back
  m_db = nullptr;
  return {};
}

}  // namespace kope::memory
