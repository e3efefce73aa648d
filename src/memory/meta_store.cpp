#include "memory/meta_store.h"

#include <algorithm>

#include "memory/schema.h"
#include "memory/text.h"

namespace kope::memory {

Result<Stats> MetaStore::stats() {
  std::lock_guard lock(m_shared.mutex());
  Stats s;
  auto count = [&](const char* sql) -> Result<int64_t> {
    KOPE_ASSIGN(auto v, m_db->query_int(sql));
    return v.value_or(0);
  };
  KOPE_ASSIGN(s.tasks, count("SELECT count(*) FROM task"));
  KOPE_ASSIGN(s.cases, count("SELECT count(*) FROM cases"));
  KOPE_ASSIGN(s.lessons, count("SELECT count(*) FROM lessons"));
  KOPE_ASSIGN(s.targets, count("SELECT count(DISTINCT target) FROM hardware"));
  KOPE_ASSIGN(s.toolchains, count("SELECT count(*) FROM toolchain"));
  KOPE_ASSIGN(s.runs, count("SELECT count(*) FROM runs"));
  KOPE_ASSIGN(s.quarantined, count("SELECT count(*) FROM case_derived WHERE quarantine = 1"));
  KOPE_ASSIGN(s.foreign_cases, count("SELECT count(*) FROM cases WHERE foreign_origin = 1"));
  KOPE_ASSIGN(s.lessons_active, count("SELECT count(*) FROM lessons WHERE status = 0"));
  KOPE_ASSIGN(s.lesson_deltas, count("SELECT count(*) FROM lesson_delta"));
  KOPE_ASSIGN(s.prompts, count("SELECT count(*) FROM prompt"));
  KOPE_ASSIGN(s.prompts_credited, count("SELECT count(*) FROM prompt WHERE credited_at IS NOT NULL"));
  // Kept as counters: summing a million blobs would read the whole blob table.
  KOPE_ASSIGN(s.code_blobs, count("SELECT coalesce(max(value), 0) FROM counters WHERE name = 'blobs'"));
  KOPE_ASSIGN(s.code_bytes_raw, count("SELECT coalesce(max(value), 0) FROM counters WHERE name = 'code_bytes_raw'"));
  KOPE_ASSIGN(s.code_bytes_stored, count("SELECT coalesce(max(value), 0) FROM counters WHERE name = 'code_bytes_stored'"));
  KOPE_ASSIGN(s.schema_version, stored_schema_version(*m_db));
  s.instance = m_shared.instance();
  auto group = [&](const char* sql, std::map<std::string, int64_t>& into, auto name_of) -> Status {
    KOPE_ASSIGN(Stmt st, m_db->prepare(sql));
    for (;;) {
      KOPE_ASSIGN(bool row, st.step());
      if (!row) break;
      into[name_of(st)] = st.int64(1);
    }
    return {};
  };
  KOPE_TRY(group("SELECT verdict, count(*) FROM cases GROUP BY verdict", s.by_verdict,
                 [](const Stmt& st) { return st.text(0); }));
  KOPE_TRY(group("SELECT outcome, count(*) FROM cases GROUP BY outcome", s.by_outcome, [](const Stmt& st) {
    return std::string(outcome_name(static_cast<Outcome>(std::clamp<int64_t>(st.int64(0), 0, 3))));
  }));
  KOPE_TRY(group("SELECT stage, count(*) FROM cases GROUP BY stage", s.by_stage, [](const Stmt& st) {
    return std::string(stage_name(static_cast<Stage>(std::clamp<int64_t>(st.int64(0), 0, 2))));
  }));
  KOPE_TRY(group("SELECT status, count(*) FROM lessons GROUP BY status", s.lessons_by_status, [](const Stmt& st) {
    return std::string(lesson_status_name(static_cast<LessonStatus>(std::clamp<int64_t>(st.int64(0), 0, 3))));
  }));
  {
    KOPE_ASSIGN(Stmt st, m_db->prepare("SELECT l.id, l.origin, l.source, l.foreign_origin, l.cases_added, l.lessons_added, "
                                       "l.imported_at, m.value FROM import_log l LEFT JOIN meta m "
                                       "ON m.key = 'import_provenance:' || l.id ORDER BY l.id"));
    for (;;) {
      KOPE_ASSIGN(bool row, st.step());
      if (!row) break;
      s.imports.push_back({st.int64(0), st.text(1), st.text(2), st.int64(3) != 0, st.int64(4), st.int64(5), st.text(6),
                           st.is_null(7) ? std::string() : st.text(7)});
    }
  }
  if (m_db->postgres()) {
    KOPE_ASSIGN(auto size, m_db->query_int("SELECT pg_database_size(current_database())"));
    s.bytes = size.value_or(0);
  } else if (m_shared.path() != ":memory:") {
    std::error_code ec;
    for (const char* suffix : {"", "-wal"}) {
      auto size = std::filesystem::file_size(m_shared.path().string() + suffix, ec);
      if (!ec) s.bytes += static_cast<int64_t>(size);
    }
  } else {
    KOPE_ASSIGN(auto pages, m_db->query_int("PRAGMA page_count"));
    KOPE_ASSIGN(auto page_size, m_db->query_int("PRAGMA page_size"));
    s.bytes = pages.value_or(0) * page_size.value_or(0);
  }
  return s;
}

namespace {
bool reserved_meta_key(std::string_view key) {
  return key == "instance" || key == "created_at" || key == "created_by";
}
}  // namespace

Result<std::optional<std::string>> MetaStore::get_meta(const std::string& key) {
  std::lock_guard lock(m_shared.mutex());
  KOPE_ASSIGN(Stmt st, m_db->prepare("SELECT value FROM meta WHERE key = ?"));
  st.bind(1, key);
  KOPE_ASSIGN(bool row, st.step());
  if (!row) return std::optional<std::string>{};
  return std::optional<std::string>{st.text(0)};
}

Status MetaStore::set_meta(const std::string& key, const std::string& value) {
  if (key.empty() || reserved_meta_key(key)) {
    return fail(ErrorKind::usage, "memory meta key '{}' is reserved (or empty)", key);
  }
  return m_shared.write(SharedDb::Resend::idempotent, [&]() -> Status {
    KOPE_ASSIGN(Stmt st, m_db->prepare("INSERT INTO meta(key, value) VALUES (?, ?) "
                                       "ON CONFLICT(key) DO UPDATE SET value = excluded.value"));
    return st.bind(1, key).bind(2, value).run();
  });
}

Result<std::map<std::string, std::string>> MetaStore::meta_with_prefix(const std::string& prefix) {
  std::lock_guard lock(m_shared.mutex());
  KOPE_ASSIGN(Stmt st, m_db->prepare("SELECT key, value FROM meta WHERE substr(key, 1, length(CAST(?1 AS TEXT))) = CAST(?1 AS TEXT) "
                                     "ORDER BY key"));
  st.bind(1, prefix);
  std::map<std::string, std::string> out;
  for (;;) {
    KOPE_ASSIGN(bool row, st.step());
    if (!row) break;
    out[st.text(0)] = st.text(1);
  }
  return out;
}


}  // namespace kope::memory
