#include "memory/pg.h"

#include <libpq-fe.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <thread>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace kope::memory {

namespace {

// Reconnection: up to this many attempts, waiting 50 ms, 100 ms, ... (about 13 s in all), so a
// server restart or a network blip is ridden out and a server that is gone is reported.
constexpr int k_reconnect_attempts = 8;
constexpr auto k_first_backoff = std::chrono::milliseconds(50);
// A statement outside a transaction is re-run at most this many times after a lost connection.
constexpr int k_autocommit_retries = 3;
// Deferred statements are sent once this many are queued, so a pipeline's results (a few dozen
// bytes each) always fit the socket buffers: libpq sends in blocking mode, and a server that
// could not write its results would stop reading ours.
constexpr size_t k_max_deferred = 64;

std::string head_of(std::string_view sql) {
  std::string head(sql.substr(0, 100));
  if (auto nl = head.find('\n'); nl != std::string::npos) head.resize(nl);
  return head;
}

bool starts_with_nocase(std::string_view s, std::string_view prefix) {
  if (s.size() < prefix.size()) return false;
  for (size_t i = 0; i < prefix.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(s[i])) != std::tolower(static_cast<unsigned char>(prefix[i]))) {
      return false;
    }
  }
  return true;
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return 0;
}

// SQLSTATE class 08 (connection exception) and 57P0x (the server shutting down or crashed).
bool connection_state(const char* state) {
  if (!state) return false;
  std::string_view s(state);
  return s.starts_with("08") || s.starts_with("57P");
}

}  // namespace

std::string pg_text_array(const std::vector<std::string>& items) {
  std::string out = "{";
  for (const auto& item : items) {
    if (out.size() > 1) out += ',';
    out += '"';
    for (char c : item) {
      if (c == '"' || c == '\\') out += '\\';
      out += c;
    }
    out += '"';
  }
  return out + "}";
}

std::string pg_int_array(const std::vector<int64_t>& items) { return fmt::format("{{{}}}", fmt::join(items, ",")); }

std::string pg_double_array(const std::vector<double>& items) {
  return fmt::format("{{{:.17g}}}", fmt::join(items, ","));
}

bool is_postgres_url(std::string_view location) {
  return location.starts_with("postgresql://") || location.starts_with("postgres://");
}

std::string redacted_url(std::string_view url) {
  size_t scheme = url.find("://");
  size_t at = url.find('@');
  if (scheme == std::string_view::npos || at == std::string_view::npos || at < scheme) return std::string(url);
  std::string_view userinfo = url.substr(scheme + 3, at - scheme - 3);
  size_t colon = userinfo.find(':');
  if (colon == std::string_view::npos) return std::string(url);
  return fmt::format("{}{}:***{}", url.substr(0, scheme + 3), userinfo.substr(0, colon), url.substr(at));
}

std::string postgres_sql(std::string_view sql, int* params) {
  std::string out;
  out.reserve(sql.size() + 32);
  int max_index = 0;
  bool ignore = false;
  size_t i = 0;
  if (starts_with_nocase(sql, "INSERT OR IGNORE ")) {
    out += "INSERT ";
    i = std::string_view("INSERT OR IGNORE ").size();
    ignore = true;
  }
  char quote = 0;
  for (; i < sql.size(); ++i) {
    char c = sql[i];
    if (quote) {
      out += c;
      if (c == quote) quote = 0;
      continue;
    }
    if (c == '\'' || c == '"') {
      quote = c;
      out += c;
      continue;
    }
    if (c != '?') {
      out += c;
      continue;
    }
    size_t j = i + 1;
    while (j < sql.size() && std::isdigit(static_cast<unsigned char>(sql[j]))) ++j;
    int index = j > i + 1 ? std::atoi(std::string(sql.substr(i + 1, j - i - 1)).c_str()) : max_index + 1;
    max_index = std::max(max_index, index);
    out += fmt::format("${}", index);
    i = j - 1;
  }
  if (ignore) out += " ON CONFLICT DO NOTHING";
  if (params) *params = max_index;
  return out;
}

// ----------------------------------------------------------------------------------------------

PgStatement::PgStatement(PgConnection* conn, std::string name, std::string sql, int n_params)
    : m_conn(conn), m_name(std::move(name)), m_sql(std::move(sql)),
      m_params(static_cast<size_t>(n_params)), m_formats(static_cast<size_t>(n_params), 0) {}

PgStatement::~PgStatement() { clear_result(); }

void PgStatement::clear_result() {
  if (m_result) PQclear(m_result);
  m_result = nullptr;
  m_rows = 0;
  m_row = -1;
  m_executed = false;
}

void PgStatement::reset() {
  clear_result();
  for (auto& p : m_params) p.reset();
  std::fill(m_formats.begin(), m_formats.end(), 0);
}

void PgStatement::bind_text(int i, std::string value) {
  if (i < 1) return;
  auto k = static_cast<size_t>(i - 1);
  if (k >= m_params.size()) {
    m_params.resize(k + 1);
    m_formats.resize(k + 1, 0);
  }
  m_params[k] = std::move(value);
  m_formats[k] = 0;
}

void PgStatement::bind_binary(int i, std::string value) {
  bind_text(i, std::move(value));
  if (i >= 1) m_formats[static_cast<size_t>(i - 1)] = 1;
}

void PgStatement::bind_null(int i) {
  bind_text(i, {});
  if (i >= 1) m_params[static_cast<size_t>(i - 1)].reset();
}

Result<bool> PgStatement::step() {
  if (!m_executed) {
    KOPE_ASSIGN(m_result, m_conn->execute(*this));
    m_executed = true;
    m_rows = PQntuples(m_result);
    m_row = -1;
  }
  if (m_row + 1 < m_rows) {
    ++m_row;
    return true;
  }
  m_row = m_rows;
  return false;
}

Status PgStatement::defer() {
  if (!m_conn->m_in_transaction) {
    KOPE_ASSIGN(bool row, step());
    (void)row;
    return {};
  }
  m_conn->m_deferred.push_back({this, m_params, m_formats});
  if (m_conn->m_deferred.size() >= k_max_deferred) {
    KOPE_ASSIGN(pg_result * none, m_conn->run_pipeline(nullptr, {}));
    (void)none;
  }
  return {};
}

const char* PgStatement::value(int col) const {
  if (!m_result || m_row < 0 || m_row >= m_rows || col < 0 || col >= PQnfields(m_result)) return nullptr;
  if (PQgetisnull(m_result, m_row, col)) return nullptr;
  return PQgetvalue(m_result, m_row, col);
}

bool PgStatement::is_null(int col) const { return value(col) == nullptr; }

int64_t PgStatement::int64(int col) const {
  const char* v = value(col);
  if (!v) return 0;
  if (v[0] == 't' && v[1] == 0) return 1;  // booleans
  if (v[0] == 'f' && v[1] == 0) return 0;
  return std::strtoll(v, nullptr, 10);
}

double PgStatement::real(int col) const {
  const char* v = value(col);
  if (!v) return 0;
  if (v[0] == 't' && v[1] == 0) return 1;
  if (v[0] == 'f' && v[1] == 0) return 0;
  return std::strtod(v, nullptr);
}

std::string PgStatement::text(int col) const {
  const char* v = value(col);
  if (!v) return {};
  return std::string(v, static_cast<size_t>(PQgetlength(m_result, m_row, col)));
}

std::string PgStatement::blob(int col) const {
  const char* v = value(col);
  if (!v) return {};
  std::string_view s(v, static_cast<size_t>(PQgetlength(m_result, m_row, col)));
  if (!s.starts_with("\\x")) return std::string(s);  // not bytea: the text itself
  std::string out;
  out.reserve((s.size() - 2) / 2);
  for (size_t i = 2; i + 1 < s.size(); i += 2) {
    out += static_cast<char>((hex_value(s[i]) << 4) | hex_value(s[i + 1]));
  }
  return out;
}

// ----------------------------------------------------------------------------------------------

PgConnection::PgConnection(std::string url, pg_conn* conn)
    : m_url(std::move(url)), m_display(redacted_url(m_url)), m_conn(conn) {}

PgConnection::~PgConnection() {
  m_cache.clear();
  if (m_conn) PQfinish(m_conn);
}

Result<std::unique_ptr<PgConnection>> PgConnection::connect(const std::string& url) {
  pg_conn* conn = PQconnectdb(url.c_str());
  if (!conn || PQstatus(conn) != CONNECTION_OK) {
    std::string detail = conn ? PQerrorMessage(conn) : "out of memory";
    while (!detail.empty() && (detail.back() == '\n' || detail.back() == ' ')) detail.pop_back();
    if (conn) PQfinish(conn);
    return fail(ErrorKind::io, "memory database {}: cannot connect: {}", redacted_url(url), detail);
  }
  auto out = std::unique_ptr<PgConnection>(new PgConnection(url, conn));
  // Quiet notices (e.g. "relation already exists, skipping") and a fixed, exact float format.
  PQsetNoticeProcessor(conn, [](void*, const char*) {}, nullptr);
  KOPE_TRY(out->exec("SET client_min_messages = warning; SET extra_float_digits = 3; SET TIME ZONE 'UTC'"));
  return out;
}

// A connection marked lost counts as bad even while libpq still reports it fine (a pipeline that
// could not be read to its end), so the next statement outside a transaction reconnects.
bool PgConnection::bad() const { return m_lost || !m_conn || PQstatus(m_conn) != CONNECTION_OK; }

Error PgConnection::failure(pg_result* res, std::string_view what) {
  const char* state = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : nullptr;
  std::string detail = res ? PQresultErrorMessage(res) : "";
  if (detail.empty() && m_conn) detail = PQerrorMessage(m_conn);
  while (!detail.empty() && (detail.back() == '\n' || detail.back() == ' ')) detail.pop_back();
  if (bad() || connection_state(state)) {
    m_lost = true;
    m_in_transaction = false;
    m_deferred.clear();
    return Error{ErrorKind::io, fmt::format("memory database {}: connection lost: {} (while running `{}`)", m_display,
                                            detail, head_of(what))};
  }
  std::string_view s = state ? state : "";
  // Serialization failures, deadlocks and lock timeouts are transient (io); constraint and
  // syntax errors are kope's bugs or a foreign schema (internal).
  ErrorKind kind = s.starts_with("40") || s.starts_with("55P03") || s.starts_with("53") ? ErrorKind::io
                                                                                        : ErrorKind::internal;
  return Error{kind, fmt::format("memory database {}: {} (SQLSTATE {}, while running `{}`)", m_display, detail, s,
                                 head_of(what))};
}

Status PgConnection::reconnect() {
  auto wait = k_first_backoff;
  std::string last;
  for (int attempt = 0; attempt < k_reconnect_attempts; ++attempt) {
    if (attempt > 0) {
      std::this_thread::sleep_for(wait);
      wait *= 2;
    }
    if (m_conn) PQreset(m_conn);
    if (m_conn && PQstatus(m_conn) == CONNECTION_OK) {
      ++m_generation;  // the server forgot our prepared statements
      m_lost = false;
      m_commit_unconfirmed = false;
      m_in_transaction = false;
      m_deferred.clear();
      PQsetNoticeProcessor(m_conn, [](void*, const char*) {}, nullptr);
      return exec("SET client_min_messages = warning; SET extra_float_digits = 3; SET TIME ZONE 'UTC'");
    }
    last = m_conn ? PQerrorMessage(m_conn) : "no connection";
  }
  while (!last.empty() && (last.back() == '\n' || last.back() == ' ')) last.pop_back();
  return fail(ErrorKind::io, "memory database {}: cannot reconnect after {} attempts: {}", m_display,
              k_reconnect_attempts, last);
}

Status PgConnection::exec(std::string_view sql) {
  std::string text(sql);
  const bool is_commit = starts_with_nocase(text, "COMMIT");
  const bool is_rollback = starts_with_nocase(text, "ROLLBACK");
  const bool is_begin = starts_with_nocase(text, "BEGIN");
  if (!m_deferred.empty()) {
    if (is_rollback) {
      m_deferred.clear();  // never sent: nothing to undo
    } else if (is_commit) {
      // The queued writes and COMMIT in one round trip.
      auto done = run_pipeline(nullptr, "COMMIT");
      if (!done && m_lost) m_commit_unconfirmed = true;  // it may or may not have committed
      if (!done) return std::unexpected(std::move(done).error());
      return {};
    } else {
      KOPE_ASSIGN(pg_result * none, run_pipeline(nullptr, {}));
      (void)none;
    }
  }
  for (int attempt = 0;; ++attempt) {
    if (bad() && !m_in_transaction && !is_commit && !is_rollback && attempt < k_autocommit_retries) {
      KOPE_TRY(reconnect());
    }
    ++m_round_trips;
    ++m_statements;
    pg_result* res = PQexec(m_conn, text.c_str());
    ExecStatusType status = res ? PQresultStatus(res) : PGRES_FATAL_ERROR;
    if (status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK) {
      PQclear(res);
      if (is_begin) m_in_transaction = true;
      if (is_commit || is_rollback) m_in_transaction = false;
      return {};
    }
    const bool was_in_transaction = m_in_transaction;
    Error e = failure(res, text);
    PQclear(res);
    if (!m_lost) {
      if (is_commit || is_rollback) m_in_transaction = false;
      return std::unexpected(std::move(e));
    }
    if (is_commit) m_commit_unconfirmed = true;  // it may or may not have committed
    if (is_rollback) return {};                 // the server rolls back a lost session itself
    if (was_in_transaction || is_commit || attempt + 1 >= k_autocommit_retries) return std::unexpected(std::move(e));
  }
}

Result<PgStatement*> PgConnection::prepare(std::string_view sql) {
  std::string key(sql);
  if (auto it = m_cache.find(key); it != m_cache.end()) {
    it->second->reset();
    return it->second.get();
  }
  int n = 0;
  std::string text = postgres_sql(sql, &n);
  auto st = std::make_unique<PgStatement>(this, fmt::format("k{}", m_cache.size() + 1), std::move(text), n);
  PgStatement* raw = st.get();
  m_cache.emplace(std::move(key), std::move(st));
  return raw;
}

Result<pg_result*> PgConnection::execute(PgStatement& st) {
  if (!m_deferred.empty()) return run_pipeline(&st, {});
  for (int attempt = 0;; ++attempt) {
    if (bad() && !m_in_transaction && attempt < k_autocommit_retries) KOPE_TRY(reconnect());
    if (st.m_prepared_generation != m_generation) {
      ++m_round_trips;
      pg_result* res = PQprepare(m_conn, st.m_name.c_str(), st.m_sql.c_str(), 0, nullptr);
      if (!res || PQresultStatus(res) != PGRES_COMMAND_OK) {
        const bool was_in_transaction = m_in_transaction;
        Error e = failure(res, st.m_sql);
        PQclear(res);
        if (m_lost && !was_in_transaction && attempt + 1 < k_autocommit_retries) continue;
        return std::unexpected(std::move(e));
      }
      PQclear(res);
      st.m_prepared_generation = m_generation;
    }
    std::vector<const char*> values(st.m_params.size());
    std::vector<int> lengths(st.m_params.size());
    for (size_t i = 0; i < st.m_params.size(); ++i) {
      values[i] = st.m_params[i] ? st.m_params[i]->data() : nullptr;
      lengths[i] = st.m_params[i] ? static_cast<int>(st.m_params[i]->size()) : 0;
    }
    ++m_round_trips;
    ++m_statements;
    pg_result* res = PQexecPrepared(m_conn, st.m_name.c_str(), static_cast<int>(values.size()), values.data(),
                                    lengths.data(), st.m_formats.data(), 0);
    ExecStatusType status = res ? PQresultStatus(res) : PGRES_FATAL_ERROR;
    if (status == PGRES_TUPLES_OK || status == PGRES_COMMAND_OK) {
      const char* n = PQcmdTuples(res);
      m_changes = (n && *n) ? std::strtoll(n, nullptr, 10) : 0;
      return res;
    }
    const bool was_in_transaction = m_in_transaction;
    Error e = failure(res, st.m_sql);
    PQclear(res);
    // A statement outside a transaction is a read (or a single idempotent write): run it again.
    if (m_lost && !was_in_transaction && attempt + 1 < k_autocommit_retries) continue;
    return std::unexpected(std::move(e));
  }
}

bool PgConnection::send_prepared(PgStatement& st, const std::vector<std::optional<std::string>>& params,
                                 const std::vector<int>& formats, std::vector<PgStatement*>& prepared_here) {
  if (st.m_prepared_generation != m_generation &&
      std::find(prepared_here.begin(), prepared_here.end(), &st) == prepared_here.end()) {
    if (!PQsendPrepare(m_conn, st.m_name.c_str(), st.m_sql.c_str(), 0, nullptr)) return false;
    prepared_here.push_back(&st);
  }
  std::vector<const char*> values(params.size());
  std::vector<int> lengths(params.size());
  for (size_t i = 0; i < params.size(); ++i) {
    values[i] = params[i] ? params[i]->data() : nullptr;
    lengths[i] = params[i] ? static_cast<int>(params[i]->size()) : 0;
  }
  return PQsendQueryPrepared(m_conn, st.m_name.c_str(), static_cast<int>(values.size()), values.data(),
                             lengths.data(), formats.data(), 0) == 1;
}

Result<pg_result*> PgConnection::run_pipeline(PgStatement* last, const std::string& last_sql) {
  std::vector<Deferred> queued = std::move(m_deferred);
  m_deferred.clear();
  std::vector<PipelineCommand> commands;
  const bool sent = send_pipeline(queued, last, last_sql, commands);
  ++m_round_trips;
  m_statements += queued.size() + (last || !last_sql.empty() ? 1 : 0);
  if (!sent) return lose_pipeline(commands.empty() ? "a pipeline" : command_sql(commands.back(), last_sql));
  return read_pipeline(commands, last != nullptr, last_sql);
}

bool PgConnection::send_pipeline(const std::vector<Deferred>& queued, PgStatement* last, const std::string& last_sql,
                                 std::vector<PipelineCommand>& commands) {
  std::vector<PgStatement*> prepared_here;
  auto send = [&](PgStatement& st, const std::vector<std::optional<std::string>>& params,
                  const std::vector<int>& formats) {
    size_t before = prepared_here.size();
    if (!send_prepared(st, params, formats, prepared_here)) return false;
    if (prepared_here.size() > before) commands.push_back({&st, true});
    commands.push_back({&st, false});
    return true;
  };
  if (PQenterPipelineMode(m_conn) != 1) return false;
  for (const Deferred& d : queued) {
    if (!send(*d.st, d.params, d.formats)) return false;
  }
  if (last && !send(*last, last->m_params, last->m_formats)) return false;
  if (!last && !last_sql.empty()) {
    commands.push_back({nullptr, false});
    if (PQsendQueryParams(m_conn, last_sql.c_str(), 0, nullptr, nullptr, nullptr, nullptr, 0) != 1) return false;
  }
  return PQpipelineSync(m_conn) == 1;
}

Result<pg_result*> PgConnection::read_pipeline(const std::vector<PipelineCommand>& commands, bool keep_last,
                                               const std::string& last_sql) {
  pg_result* last_result = nullptr;
  std::optional<Error> first_error;
  auto give_up = [&](auto error) {
    if (last_result) PQclear(last_result);
    return error;
  };
  for (const PipelineCommand& c : commands) {
    pg_result* res = PQgetResult(m_conn);
    if (!res) return give_up(lose_pipeline(command_sql(c, last_sql)));
    ExecStatusType status = PQresultStatus(res);
    const bool ok = status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK;
    if (ok && c.prepare) c.st->m_prepared_generation = m_generation;
    // After a failure the server skips the rest (PIPELINE_ABORTED): the first failure is the one.
    if (!ok && status != PGRES_PIPELINE_ABORTED && !first_error) first_error = failure(res, command_sql(c, last_sql));
    if (ok && keep_last && &c == &commands.back()) {
      last_result = res;
      const char* n = PQcmdTuples(res);
      m_changes = (n && *n) ? std::strtoll(n, nullptr, 10) : 0;
    } else {
      PQclear(res);
    }
    if (m_lost) {  // failure() saw the connection go
      return give_up(first_error ? std::unexpected(std::move(*first_error)) : lose_pipeline(command_sql(c, last_sql)));
    }
    while ((res = PQgetResult(m_conn)) != nullptr) PQclear(res);  // each command's results end with a null
  }
  pg_result* sync = PQgetResult(m_conn);
  const bool synced = sync && PQresultStatus(sync) == PGRES_PIPELINE_SYNC;
  if (sync) PQclear(sync);
  if (!synced || PQexitPipelineMode(m_conn) != 1) return give_up(lose_pipeline("the end of a pipeline"));
  // After a failure the transaction stays open (aborted) unless the failing statement ended it.
  m_in_transaction = PQtransactionStatus(m_conn) != PQTRANS_IDLE;
  if (first_error) return give_up(std::unexpected(std::move(*first_error)));
  return last_result;
}

std::unexpected<Error> PgConnection::lose_pipeline(std::string_view during) {
  std::string detail = PQerrorMessage(m_conn);
  while (!detail.empty() && (detail.back() == '\n' || detail.back() == ' ')) detail.pop_back();
  m_lost = true;
  m_in_transaction = false;
  m_deferred.clear();
  return std::unexpected(Error{ErrorKind::io, fmt::format("memory database {}: connection lost: {} (while running `{}`)",
                                                          m_display, detail, head_of(during))});
}

std::string_view PgConnection::command_sql(const PipelineCommand& c, const std::string& last_sql) {
  return c.st ? std::string_view(c.st->m_sql) : std::string_view(last_sql);
}

}  // namespace kope::memory
