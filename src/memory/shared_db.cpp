#include "memory/shared_db.h"

#include <algorithm>

#include <fmt/format.h>

#include "memory/pg.h"
#include "memory/text.h"

namespace kope::memory {

namespace {

// The tsvector literal of a search entry: each distinct token of body and tags, quoted.
std::string tsvector_literal(const std::string& body, const std::string& tags) {
  std::vector<std::string> tokens = fts_tokens(body + " " + tags);
  std::sort(tokens.begin(), tokens.end());
  tokens.erase(std::unique(tokens.begin(), tokens.end()), tokens.end());
  std::string out;
  for (const auto& t : tokens) {
    out += out.empty() ? "'" : " '";
    for (char ch : t) {
      if (ch == '\'' || ch == '\\') out += ch;
      out += ch;
    }
    out += '\'';
  }
  return out;
}

}  // namespace

Status SharedDb::load_identity() {
  const std::string where = m_db->path().string();
  {
    KOPE_ASSIGN(Stmt st, m_db->prepare("SELECT value FROM meta WHERE key = 'instance'"));
    KOPE_ASSIGN(bool row, st.step());
    if (!row) return fail(ErrorKind::corrupt, "memory database {}: no instance id in meta", where);
    m_instance = st.text(0);
  }
  KOPE_ASSIGN(auto origin, m_db->query_int(fmt::format("SELECT id FROM origin WHERE instance = '{}'", m_instance)));
  if (!origin) return fail(ErrorKind::corrupt, "memory database {}: its own origin row is missing", where);
  m_origin_id = *origin;
  return {};
}

Result<Transaction> SharedDb::begin_locked() {
  for (auto& m : m_pending_terms) m.clear();
  m_pending_counters.clear();
  return Transaction::begin(*m_db, [this] { reset_caches(); });
}

Status SharedDb::commit_locked(Transaction& tx) {
  KOPE_TRY(flush_terms_locked());
  return tx.commit();
}

void SharedDb::note_terms_locked(int corpus, std::string_view text, int delta) {
  std::vector<std::string> tokens = text_tokens(text);
  std::sort(tokens.begin(), tokens.end());
  tokens.erase(std::unique(tokens.begin(), tokens.end()), tokens.end());
  note_terms_locked(corpus, tokens, delta);
}

void SharedDb::note_terms_locked(int corpus, const std::vector<std::string>& distinct_terms, int delta) {
  auto& pending = m_pending_terms[static_cast<size_t>(corpus)];
  for (const auto& t : distinct_terms) pending[t] += delta;
}

Status SharedDb::flush_terms_locked() {
  if (!m_pending_counters.empty()) {
    KOPE_ASSIGN(Stmt st, m_db->prepare("INSERT INTO counters(name, value) VALUES (?1, ?2) "
                                       "ON CONFLICT(name) DO UPDATE SET value = counters.value + ?2"));
    for (const auto& [name, delta] : m_pending_counters) KOPE_TRY(st.reset().bind(1, name).bind(2, delta).run_later());
    m_pending_counters.clear();
  }
  for (int corpus = 0; corpus < 2; ++corpus) {
    auto& pending = m_pending_terms[static_cast<size_t>(corpus)];
    if (pending.empty()) continue;
    // In key order, so the upserts walk the index once.
    std::vector<std::pair<std::string, int64_t>> rows(pending.begin(), pending.end());
    std::sort(rows.begin(), rows.end());
    if (m_db->postgres()) {
      KOPE_TRY(add_term_counts_postgres_locked(corpus, rows));
    } else {
      KOPE_ASSIGN(Stmt st, m_db->prepare("INSERT INTO term_df(corpus, term, df) VALUES (?1, ?2, max(?3, 0)) "
                                         "ON CONFLICT DO UPDATE SET df = max(df + ?3, 0)"));
      for (const auto& [term, delta] : rows) {
        if (delta == 0) continue;
        KOPE_TRY(st.reset().bind(1, corpus).bind(2, term).bind(3, delta).run());
      }
    }
    pending.clear();
  }
  return {};
}

Status SharedDb::add_term_counts_postgres_locked(int corpus, const std::vector<std::pair<std::string, int64_t>>& rows) {
  // Additions (every new case: the bulk) in one statement over arrays of terms and deltas; a
  // term seen for the first time starts at its delta. Removals (rare: a lesson replaced or
  // deleted) one by one, since a count never goes below zero.
  std::vector<std::string> added_terms;
  std::vector<int64_t> added_deltas;
  std::vector<std::pair<std::string, int64_t>> removals;
  for (const auto& [term, delta] : rows) {
    if (delta > 0) {
      added_terms.push_back(term);
      added_deltas.push_back(delta);
    } else if (delta < 0) {
      removals.emplace_back(term, delta);
    }
  }
  if (!added_terms.empty()) {
    KOPE_ASSIGN(Stmt st, m_db->prepare("INSERT INTO term_df(corpus, term, df) SELECT ?1, u.term, u.delta "
                                       "FROM unnest(CAST(?2 AS TEXT[]), CAST(?3 AS BIGINT[])) AS u(term, delta) "
                                       "ON CONFLICT(corpus, term) DO UPDATE SET df = term_df.df + excluded.df"));
    KOPE_TRY(st.bind(1, corpus).bind(2, pg_text_array(added_terms)).bind(3, pg_int_array(added_deltas)).run_later());
  }
  if (removals.empty()) return {};
  KOPE_ASSIGN(Stmt st, m_db->prepare("INSERT INTO term_df(corpus, term, df) VALUES (?1, ?2, 0) "
                                     "ON CONFLICT(corpus, term) DO UPDATE SET df = greatest(term_df.df + ?3, 0)"));
  for (const auto& [term, delta] : removals) KOPE_TRY(st.reset().bind(1, corpus).bind(2, term).bind(3, delta).run_later());
  return {};
}

Status SharedDb::index_search_locked(int corpus, int64_t rowid, const std::string& body, const std::string& tags,
                                     bool remove) {
  const char* table = corpus == 0 ? "journal_fts" : "lesson_fts";
  if (!m_db->postgres()) {
    KOPE_ASSIGN(Stmt st, m_db->prepare(remove ? fmt::format("INSERT INTO {0}({0}, rowid, body, tags) VALUES "
                                                            "('delete', ?, ?, ?)", table)
                                              : fmt::format("INSERT INTO {}(rowid, body, tags) VALUES (?, ?, ?)", table)));
    return st.bind(1, rowid).bind(2, body).bind(3, tags).run();
  }
  int sign = remove ? -1 : +1;
  m_pending_counters[fmt::format("fts_docs:{}", corpus)] += sign;
  m_pending_counters[fmt::format("fts_tokens:{}", corpus)] += sign * static_cast<int64_t>(fts_tokens(body).size());
  if (remove) {
    KOPE_ASSIGN(Stmt st, m_db->prepare(fmt::format("DELETE FROM {} WHERE rowid = ?", table)));
    return st.bind(1, rowid).run();
  }
  KOPE_ASSIGN(Stmt st, m_db->prepare(fmt::format("INSERT INTO {}(rowid, body, tags, terms) VALUES "
                                                 "(?, ?, ?, CAST(? AS tsvector))", table)));
  return st.bind(1, rowid).bind(2, body).bind(3, tags).bind(4, tsvector_literal(body, tags)).run_later();
}

void SharedDb::reset_caches() {
  for (auto& m : m_pending_terms) m.clear();
  m_pending_counters.clear();
  for (const auto& reset : m_resets) reset();
}

}  // namespace kope::memory
