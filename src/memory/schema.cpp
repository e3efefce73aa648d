#include "memory/schema.h"

#include <sqlite3.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <fstream>
#include <random>

#include "kope/memory.h"
#include "memory/text.h"
#include "util/time.h"

namespace kope::memory {

namespace {

constexpr const char* k_schema_v1 = R"sql(
CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;
CREATE TABLE origin(id INTEGER PRIMARY KEY, instance TEXT NOT NULL UNIQUE);
CREATE TABLE hardware(
  id INTEGER PRIMARY KEY, target TEXT NOT NULL, cpu_model TEXT NOT NULL, cores INTEGER NOT NULL,
  peak_gflops REAL NOT NULL, peak_gbps REAL NOT NULL, UNIQUE(target, cpu_model));
CREATE TABLE toolchain(id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE, backend TEXT NOT NULL);
CREATE TABLE task(
  id INTEGER PRIMARY KEY, op TEXT NOT NULL, spec_hash TEXT NOT NULL, category TEXT NOT NULL,
  level INTEGER NOT NULL, signature TEXT NOT NULL, timed_dims TEXT NOT NULL,
  arithmetic_intensity REAL NOT NULL, log2_flops REAL NOT NULL, log2_bytes REAL NOT NULL,
  UNIQUE(op, spec_hash));
CREATE TABLE blob(id INTEGER PRIMARY KEY, hash BLOB NOT NULL UNIQUE, raw_size INTEGER NOT NULL,
                  data BLOB NOT NULL);
CREATE TABLE cases(
  id INTEGER PRIMARY KEY,
  natural_key TEXT NOT NULL UNIQUE,
  run_id TEXT NOT NULL,
  task_id INTEGER NOT NULL REFERENCES task(id),
  hardware_id INTEGER NOT NULL REFERENCES hardware(id),
  toolchain_id INTEGER NOT NULL REFERENCES toolchain(id),
  parent_id INTEGER REFERENCES cases(id),
  origin_id INTEGER NOT NULL REFERENCES origin(id),
  foreign_origin INTEGER NOT NULL,
  stage INTEGER NOT NULL,
  optimisation TEXT NOT NULL,
  code_id INTEGER REFERENCES blob(id),
  verdict TEXT NOT NULL,
  message TEXT NOT NULL,
  diagnostics TEXT NOT NULL,
  error_signature TEXT NOT NULL,
  timings TEXT NOT NULL,
  speedup_parent REAL, speedup_ref REAL, speedup_lib REAL, roofline REAL,
  ratio REAL NOT NULL,
  outcome INTEGER NOT NULL,
  quarantine_reason TEXT NOT NULL,
  tokens_prompt INTEGER NOT NULL, tokens_completion INTEGER NOT NULL, wall_seconds REAL NOT NULL,
  created_at TEXT NOT NULL);
CREATE INDEX cases_parent ON cases(parent_id) WHERE parent_id IS NOT NULL;
CREATE INDEX cases_task_speed ON cases(task_id, speedup_ref DESC)
  WHERE verdict = 'correct' AND speedup_ref IS NOT NULL;
CREATE TABLE journal(case_id INTEGER PRIMARY KEY REFERENCES cases(id), text TEXT NOT NULL);
CREATE TABLE case_derived(
  case_id INTEGER PRIMARY KEY REFERENCES cases(id), task_id INTEGER NOT NULL,
  downstream REAL NOT NULL, quarantine INTEGER NOT NULL,
  review_note TEXT NOT NULL DEFAULT '', reviewed_at TEXT);
CREATE INDEX case_derived_graph ON case_derived(task_id, downstream DESC);
CREATE TABLE lessons(
  seq INTEGER PRIMARY KEY, id TEXT NOT NULL UNIQUE, kind INTEGER NOT NULL, title TEXT NOT NULL,
  text TEXT NOT NULL, norm TEXT NOT NULL, error_signature TEXT NOT NULL, category TEXT NOT NULL,
  backend TEXT NOT NULL, target TEXT NOT NULL, toolchain TEXT NOT NULL, status INTEGER NOT NULL,
  merged_into TEXT, helpful INTEGER NOT NULL, harmful INTEGER NOT NULL,
  origin_id INTEGER NOT NULL REFERENCES origin(id), foreign_origin INTEGER NOT NULL,
  valid_from TEXT NOT NULL, valid_to TEXT NOT NULL);
CREATE INDEX lessons_scope ON lessons(status, category, (helpful - harmful) DESC, seq DESC);
CREATE INDEX lessons_signature ON lessons(error_signature) WHERE error_signature <> '';
CREATE TABLE lesson_source(
  lesson_id TEXT NOT NULL REFERENCES lessons(id), case_id INTEGER NOT NULL REFERENCES cases(id),
  PRIMARY KEY(lesson_id, case_id)) WITHOUT ROWID;
CREATE TABLE lesson_alias(alias TEXT PRIMARY KEY, lesson_id TEXT NOT NULL REFERENCES lessons(id))
  WITHOUT ROWID;
CREATE TABLE lesson_delta(
  seq INTEGER PRIMARY KEY, lesson_id TEXT NOT NULL REFERENCES lessons(id), op TEXT NOT NULL,
  reason TEXT NOT NULL, source_case INTEGER REFERENCES cases(id), payload TEXT NOT NULL,
  helpful_after INTEGER NOT NULL, harmful_after INTEGER NOT NULL, status_after TEXT NOT NULL,
  created_at TEXT NOT NULL);
CREATE INDEX lesson_delta_lesson ON lesson_delta(lesson_id, seq);
CREATE TABLE item_value(item_id TEXT NOT NULL, stage INTEGER NOT NULL, value REAL NOT NULL,
                        n INTEGER NOT NULL, PRIMARY KEY(item_id, stage)) WITHOUT ROWID;
CREATE TABLE item_stats(item_id TEXT PRIMARY KEY, helpful INTEGER NOT NULL,
                        harmful INTEGER NOT NULL) WITHOUT ROWID;
CREATE TABLE prompt(id TEXT PRIMARY KEY, case_id INTEGER, stage INTEGER NOT NULL,
                    tier_tokens TEXT NOT NULL, created_at TEXT NOT NULL, credited_at TEXT,
                    reward REAL) WITHOUT ROWID;
CREATE TABLE prompt_item(prompt_id TEXT NOT NULL REFERENCES prompt(id), item_id TEXT NOT NULL,
                         score REAL NOT NULL, PRIMARY KEY(prompt_id, item_id)) WITHOUT ROWID;
CREATE TABLE import_log(id INTEGER PRIMARY KEY, origin TEXT NOT NULL, source TEXT NOT NULL,
                        foreign_origin INTEGER NOT NULL, cases_added INTEGER NOT NULL,
                        lessons_added INTEGER NOT NULL, imported_at TEXT NOT NULL);
)sql";

constexpr const char* k_schema_v2 = R"sql(
CREATE TABLE fix_link(
  error_signature TEXT NOT NULL, fix_case INTEGER NOT NULL REFERENCES cases(id),
  failed_case INTEGER NOT NULL REFERENCES cases(id), task_id INTEGER NOT NULL,
  hardware_id INTEGER NOT NULL, PRIMARY KEY(error_signature, fix_case)) WITHOUT ROWID;
CREATE INDEX fix_link_task ON fix_link(error_signature, task_id, fix_case);
CREATE INDEX fix_link_hardware ON fix_link(error_signature, hardware_id, fix_case);
CREATE TABLE runs(run_id TEXT PRIMARY KEY, cases INTEGER NOT NULL, first_case INTEGER NOT NULL,
                  last_case INTEGER NOT NULL) WITHOUT ROWID;
CREATE TABLE counters(name TEXT PRIMARY KEY, value INTEGER NOT NULL) WITHOUT ROWID;
CREATE TABLE task_summary(
  task_id INTEGER NOT NULL REFERENCES task(id), hardware_id INTEGER NOT NULL REFERENCES hardware(id),
  toolchain_id INTEGER NOT NULL REFERENCES toolchain(id), foreign_origin INTEGER NOT NULL,
  n_cases INTEGER NOT NULL, n_correct INTEGER NOT NULL, best_case INTEGER, best_speedup REAL,
  first_correct INTEGER,
  PRIMARY KEY(task_id, hardware_id, toolchain_id, foreign_origin)) WITHOUT ROWID;
CREATE VIRTUAL TABLE journal_fts USING fts5(body, tags, content='', tokenize="unicode61 tokenchars '_'");
CREATE VIRTUAL TABLE lesson_fts USING fts5(body, tags, content='', tokenize="unicode61 tokenchars '_'");
CREATE TABLE term_df(corpus INTEGER NOT NULL, term TEXT NOT NULL, df INTEGER NOT NULL,
                     PRIMARY KEY(corpus, term)) WITHOUT ROWID;

INSERT INTO fix_link(error_signature, fix_case, failed_case, task_id, hardware_id)
  SELECT p.error_signature, c.id, p.id, c.task_id, c.hardware_id FROM cases c JOIN cases p ON p.id = c.parent_id
  WHERE c.verdict = 'correct' AND p.verdict <> 'correct' AND p.error_signature <> '';
INSERT INTO runs(run_id, cases, first_case, last_case)
  SELECT run_id, count(*), min(id), max(id) FROM cases GROUP BY run_id;
INSERT INTO counters(name, value) SELECT 'blobs', count(*) FROM blob;
INSERT INTO counters(name, value) SELECT 'code_bytes_raw', coalesce(sum(raw_size), 0) FROM blob;
INSERT INTO counters(name, value) SELECT 'code_bytes_stored', coalesce(sum(length(data)), 0) FROM blob;
INSERT INTO task_summary(task_id, hardware_id, toolchain_id, foreign_origin, n_cases, n_correct,
                         first_correct)
  SELECT task_id, hardware_id, toolchain_id, foreign_origin, count(*), sum(verdict = 'correct'),
         min(CASE WHEN verdict = 'correct' THEN id END)
  FROM cases GROUP BY task_id, hardware_id, toolchain_id, foreign_origin;
UPDATE task_summary SET (best_case, best_speedup) = (
  SELECT c.id, c.speedup_ref FROM cases c JOIN case_derived d ON d.case_id = c.id
  WHERE c.task_id = task_summary.task_id AND c.hardware_id = task_summary.hardware_id
    AND c.toolchain_id = task_summary.toolchain_id AND c.foreign_origin = task_summary.foreign_origin
    AND c.verdict = 'correct' AND c.speedup_ref IS NOT NULL AND d.quarantine IN (0, 2)
  ORDER BY c.speedup_ref DESC, c.id LIMIT 1);
INSERT INTO journal_fts(rowid, body, tags)
  SELECT c.id, c.optimisation || ' ' || c.error_signature || ' ' || coalesce(j.text, ''),
         kope_case_tags(t.op, t.category, h.target, c.stage, c.verdict, c.outcome)
  FROM cases c JOIN task t ON t.id = c.task_id JOIN hardware h ON h.id = c.hardware_id
  LEFT JOIN journal j ON j.case_id = c.id;
INSERT INTO lesson_fts(rowid, body, tags)
  SELECT seq, title || ' ' || text || ' ' || error_signature,
         kope_lesson_tags(kind, category, backend, target)
  FROM lessons;
CREATE VIRTUAL TABLE temp.kope_journal_vocab USING fts5vocab(main, journal_fts, 'col');
CREATE VIRTUAL TABLE temp.kope_lesson_vocab USING fts5vocab(main, lesson_fts, 'col');
INSERT INTO term_df(corpus, term, df) SELECT 0, term, doc FROM temp.kope_journal_vocab WHERE col = 'body';
INSERT INTO term_df(corpus, term, df) SELECT 1, term, doc FROM temp.kope_lesson_vocab WHERE col = 'body';
DROP TABLE temp.kope_journal_vocab;
DROP TABLE temp.kope_lesson_vocab;
)sql";

// The typed shape of a task's kernel signature (spec::SignatureShape::str()); NULL for tasks
// recorded without one, whose shape is read from the signature text.
constexpr const char* k_schema_v3 = R"sql(
ALTER TABLE task ADD COLUMN signature_shape TEXT;
)sql";

constexpr std::array<const char*, k_schema_version> k_migrations = {k_schema_v1, k_schema_v2, k_schema_v3};

// The PostgreSQL schema: versions 1 and 2 of the SQLite schema in one step (no PostgreSQL
// database of version 1 ever existed), the same tables, columns and indexes. SQLite's rowid
// tables become identity columns; the FTS5 tables become plain tables of the indexed text with
// a GIN-indexed tsvector of kope's own tokens (fts_tokens of body and tags, the tokens FTS5's
// unicode61 tokenizer with '_' as a token character makes, so matching agrees); `kope_schema` holds what
// PRAGMA application_id and user_version hold in SQLite.
constexpr const char* k_pg_schema_v2 = R"sql(
CREATE TABLE kope_schema(application_id BIGINT NOT NULL, version INTEGER NOT NULL);
CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE origin(id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY, instance TEXT NOT NULL UNIQUE);
CREATE TABLE hardware(
  id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY, target TEXT NOT NULL, cpu_model TEXT NOT NULL,
  cores BIGINT NOT NULL, peak_gflops DOUBLE PRECISION NOT NULL, peak_gbps DOUBLE PRECISION NOT NULL,
  UNIQUE(target, cpu_model));
CREATE TABLE toolchain(id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY, name TEXT NOT NULL UNIQUE,
                       backend TEXT NOT NULL);
CREATE TABLE task(
  id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY, op TEXT NOT NULL, spec_hash TEXT NOT NULL,
  category TEXT NOT NULL, level BIGINT NOT NULL, signature TEXT NOT NULL, timed_dims TEXT NOT NULL,
  arithmetic_intensity DOUBLE PRECISION NOT NULL, log2_flops DOUBLE PRECISION NOT NULL,
  log2_bytes DOUBLE PRECISION NOT NULL, UNIQUE(op, spec_hash));
CREATE TABLE blob(id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY, hash BYTEA NOT NULL UNIQUE,
                  raw_size BIGINT NOT NULL, data BYTEA NOT NULL);
CREATE TABLE cases(
  id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
  natural_key TEXT NOT NULL UNIQUE,
  run_id TEXT NOT NULL,
  task_id BIGINT NOT NULL REFERENCES task(id),
  hardware_id BIGINT NOT NULL REFERENCES hardware(id),
  toolchain_id BIGINT NOT NULL REFERENCES toolchain(id),
  parent_id BIGINT REFERENCES cases(id),
  origin_id BIGINT NOT NULL REFERENCES origin(id),
  foreign_origin BIGINT NOT NULL,
  stage BIGINT NOT NULL,
  optimisation TEXT NOT NULL,
  code_id BIGINT REFERENCES blob(id),
  verdict TEXT NOT NULL,
  message TEXT NOT NULL,
  diagnostics TEXT NOT NULL,
  error_signature TEXT NOT NULL,
  timings TEXT NOT NULL,
  speedup_parent DOUBLE PRECISION, speedup_ref DOUBLE PRECISION, speedup_lib DOUBLE PRECISION,
  roofline DOUBLE PRECISION,
  ratio DOUBLE PRECISION NOT NULL,
  outcome BIGINT NOT NULL,
  quarantine_reason TEXT NOT NULL,
  tokens_prompt BIGINT NOT NULL, tokens_completion BIGINT NOT NULL, wall_seconds DOUBLE PRECISION NOT NULL,
  created_at TEXT NOT NULL);
CREATE INDEX cases_parent ON cases(parent_id) WHERE parent_id IS NOT NULL;
CREATE INDEX cases_task_speed ON cases(task_id, speedup_ref DESC)
  WHERE verdict = 'correct' AND speedup_ref IS NOT NULL;
CREATE INDEX cases_run ON cases(run_id);
CREATE TABLE journal(case_id BIGINT PRIMARY KEY REFERENCES cases(id), text TEXT NOT NULL);
CREATE TABLE case_derived(
  case_id BIGINT PRIMARY KEY REFERENCES cases(id), task_id BIGINT NOT NULL,
  downstream DOUBLE PRECISION NOT NULL, quarantine BIGINT NOT NULL,
  review_note TEXT NOT NULL DEFAULT '', reviewed_at TEXT);
CREATE INDEX case_derived_graph ON case_derived(task_id, downstream DESC);
CREATE TABLE lessons(
  seq BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY, id TEXT NOT NULL UNIQUE, kind BIGINT NOT NULL,
  title TEXT NOT NULL, text TEXT NOT NULL, norm TEXT NOT NULL, error_signature TEXT NOT NULL,
  category TEXT NOT NULL, backend TEXT NOT NULL, target TEXT NOT NULL, toolchain TEXT NOT NULL,
  status BIGINT NOT NULL, merged_into TEXT, helpful BIGINT NOT NULL, harmful BIGINT NOT NULL,
  origin_id BIGINT NOT NULL REFERENCES origin(id), foreign_origin BIGINT NOT NULL,
  valid_from TEXT NOT NULL, valid_to TEXT NOT NULL);
CREATE INDEX lessons_scope ON lessons(status, category, (helpful - harmful) DESC, seq DESC);
CREATE INDEX lessons_signature ON lessons(error_signature) WHERE error_signature <> '';
CREATE TABLE lesson_source(
  lesson_id TEXT NOT NULL REFERENCES lessons(id), case_id BIGINT NOT NULL REFERENCES cases(id),
  PRIMARY KEY(lesson_id, case_id));
CREATE TABLE lesson_alias(alias TEXT PRIMARY KEY, lesson_id TEXT NOT NULL REFERENCES lessons(id));
CREATE TABLE lesson_delta(
  seq BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY, lesson_id TEXT NOT NULL REFERENCES lessons(id),
  op TEXT NOT NULL, reason TEXT NOT NULL, source_case BIGINT REFERENCES cases(id), payload TEXT NOT NULL,
  helpful_after BIGINT NOT NULL, harmful_after BIGINT NOT NULL, status_after TEXT NOT NULL,
  created_at TEXT NOT NULL);
CREATE INDEX lesson_delta_lesson ON lesson_delta(lesson_id, seq);
CREATE TABLE item_value(item_id TEXT NOT NULL, stage BIGINT NOT NULL, value DOUBLE PRECISION NOT NULL,
                        n BIGINT NOT NULL, PRIMARY KEY(item_id, stage));
CREATE TABLE item_stats(item_id TEXT PRIMARY KEY, helpful BIGINT NOT NULL, harmful BIGINT NOT NULL);
CREATE TABLE prompt(id TEXT PRIMARY KEY, case_id BIGINT, stage BIGINT NOT NULL, tier_tokens TEXT NOT NULL,
                    created_at TEXT NOT NULL, credited_at TEXT, reward DOUBLE PRECISION);
CREATE TABLE prompt_item(prompt_id TEXT NOT NULL REFERENCES prompt(id), item_id TEXT NOT NULL,
                         score DOUBLE PRECISION NOT NULL, PRIMARY KEY(prompt_id, item_id));
CREATE TABLE import_log(id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY, origin TEXT NOT NULL,
                        source TEXT NOT NULL, foreign_origin BIGINT NOT NULL, cases_added BIGINT NOT NULL,
                        lessons_added BIGINT NOT NULL, imported_at TEXT NOT NULL);
CREATE TABLE fix_link(
  error_signature TEXT NOT NULL, fix_case BIGINT NOT NULL REFERENCES cases(id),
  failed_case BIGINT NOT NULL REFERENCES cases(id), task_id BIGINT NOT NULL,
  hardware_id BIGINT NOT NULL, PRIMARY KEY(error_signature, fix_case));
CREATE INDEX fix_link_task ON fix_link(error_signature, task_id, fix_case);
CREATE INDEX fix_link_hardware ON fix_link(error_signature, hardware_id, fix_case);
CREATE TABLE runs(run_id TEXT PRIMARY KEY, cases BIGINT NOT NULL, first_case BIGINT NOT NULL,
                  last_case BIGINT NOT NULL);
CREATE TABLE counters(name TEXT PRIMARY KEY, value BIGINT NOT NULL);
CREATE TABLE task_summary(
  task_id BIGINT NOT NULL REFERENCES task(id), hardware_id BIGINT NOT NULL REFERENCES hardware(id),
  toolchain_id BIGINT NOT NULL REFERENCES toolchain(id), foreign_origin BIGINT NOT NULL,
  n_cases BIGINT NOT NULL, n_correct BIGINT NOT NULL, best_case BIGINT, best_speedup DOUBLE PRECISION,
  first_correct BIGINT,
  PRIMARY KEY(task_id, hardware_id, toolchain_id, foreign_origin));
CREATE TABLE journal_fts(rowid BIGINT PRIMARY KEY, body TEXT NOT NULL, tags TEXT NOT NULL,
                         terms TSVECTOR NOT NULL);
CREATE INDEX journal_fts_terms ON journal_fts USING gin(terms);
CREATE TABLE lesson_fts(rowid BIGINT PRIMARY KEY, body TEXT NOT NULL, tags TEXT NOT NULL,
                        terms TSVECTOR NOT NULL);
CREATE INDEX lesson_fts_terms ON lesson_fts USING gin(terms);
CREATE TABLE term_df(corpus BIGINT NOT NULL, term TEXT NOT NULL, df BIGINT NOT NULL, PRIMARY KEY(corpus, term));
INSERT INTO counters(name, value) VALUES ('blobs', 0), ('code_bytes_raw', 0), ('code_bytes_stored', 0),
  ('fts_docs:0', 0), ('fts_tokens:0', 0), ('fts_docs:1', 0), ('fts_tokens:1', 0);
)sql";

// The PostgreSQL migrations by the version they reach; nullptr for a version a PostgreSQL
// database never had (it is created at k_pg_first_version).
constexpr int k_pg_first_version = 2;
constexpr const char* k_pg_schema_v3 = R"sql(
ALTER TABLE task ADD COLUMN signature_shape TEXT;
)sql";
constexpr std::array<const char*, k_schema_version> k_pg_migrations = {nullptr, k_pg_schema_v2, k_pg_schema_v3};

std::string random_instance_id() {
  std::random_device rd;
  std::uniform_int_distribution<uint32_t> dist;
  return fmt::format("{:08x}{:08x}", dist(rd), dist(rd));
}

std::string arg_text(sqlite3_value* v) {
  const unsigned char* p = sqlite3_value_text(v);
  return p ? std::string(reinterpret_cast<const char*>(p), static_cast<size_t>(sqlite3_value_bytes(v)))
           : std::string();
}

void case_tags_fn(sqlite3_context* ctx, int argc, sqlite3_value** argv) {
  if (argc != 6) return sqlite3_result_error(ctx, "kope_case_tags takes 6 arguments", -1);
  std::string tags = case_search_tags(arg_text(argv[0]), arg_text(argv[1]), arg_text(argv[2]),
                                      sqlite3_value_int(argv[3]), arg_text(argv[4]),
                                      sqlite3_value_int(argv[5]));
  sqlite3_result_text(ctx, tags.c_str(), static_cast<int>(tags.size()), SQLITE_TRANSIENT);
}

void lesson_tags_fn(sqlite3_context* ctx, int argc, sqlite3_value** argv) {
  if (argc != 4) return sqlite3_result_error(ctx, "kope_lesson_tags takes 4 arguments", -1);
  std::string tags = lesson_search_tags(sqlite3_value_int(argv[0]), arg_text(argv[1]),
                                        arg_text(argv[2]), arg_text(argv[3]));
  sqlite3_result_text(ctx, tags.c_str(), static_cast<int>(tags.size()), SQLITE_TRANSIENT);
}

// kope_bm25(fts_table, df_0, df_1, ...): Okapi BM25 of the current row over the `body` column
// (column 0), with the document frequency of each phrase of the MATCH expression passed in (from
// kope's term statistics, so FTS5 never scans a whole doclist to find it); a negative df leaves
// that phrase out of the score. N and the average length come from FTS5's own totals.
void bm25_fn(const Fts5ExtensionApi* api, Fts5Context* fts, sqlite3_context* out, int n_args, sqlite3_value** args) {
  constexpr int k_max_phrases = 64;
  sqlite3_int64 rows = 0, total = 0;
  int dl = 0, n_inst = 0;
  if (api->xRowCount(fts, &rows) != SQLITE_OK || api->xColumnTotalSize(fts, 0, &total) != SQLITE_OK ||
      api->xColumnSize(fts, 0, &dl) != SQLITE_OK || api->xInstCount(fts, &n_inst) != SQLITE_OK) {
    sqlite3_result_error(out, "kope_bm25: cannot read FTS5 statistics", -1);
    return;
  }
  int phrases = std::min({api->xPhraseCount(fts), k_max_phrases, n_args});
  std::vector<int> tf(static_cast<size_t>(std::max(phrases, 0)), 0);
  for (int i = 0; i < n_inst; ++i) {
    int phrase = 0, col = 0, off = 0;
    if (api->xInst(fts, i, &phrase, &col, &off) != SQLITE_OK) break;
    if (col == 0 && phrase < phrases) ++tf[static_cast<size_t>(phrase)];
  }
  std::vector<double> df(tf.size());
  for (size_t p = 0; p < df.size(); ++p) df[p] = sqlite3_value_double(args[p]);
  double avgdl = rows > 0 ? static_cast<double>(total) / static_cast<double>(rows) : 1.0;
  sqlite3_result_double(out, okapi_bm25(tf, df, static_cast<double>(rows), dl, avgdl));
}

// A new database's own meta values (instance id, creation) and its origin row.
Status write_identity(Db& db) {
  std::string now = util::now_iso8601();
  std::string instance = random_instance_id();
  KOPE_ASSIGN(Stmt st, db.prepare("INSERT INTO meta(key, value) VALUES (?, ?)"));
  for (auto [k, val] : std::array<std::pair<const char*, std::string>, 3>{
           {{"instance", instance}, {"created_at", now}, {"created_by", "kope " KOPE_VERSION}}}) {
    KOPE_TRY(st.reset().bind(1, k).bind(2, val).run());
  }
  KOPE_ASSIGN(Stmt so, db.prepare("INSERT INTO origin(instance) VALUES (?)"));
  return so.bind(1, instance).run();
}

// The application id and schema version of a PostgreSQL kope memory ({0, 0} for an empty
// schema); fails with corrupt naming the tables of a schema that holds something else.
Result<std::pair<int64_t, int64_t>> postgres_versions(Db& db) {
  KOPE_ASSIGN(auto marked, db.query_int("SELECT count(*) FROM pg_catalog.pg_tables "
                                        "WHERE schemaname = current_schema() AND tablename = 'kope_schema'"));
  if (marked.value_or(0) > 0) {
    KOPE_ASSIGN(Stmt st, db.prepare("SELECT application_id, version FROM kope_schema"));
    KOPE_ASSIGN(bool row, st.step());
    if (row) return std::pair<int64_t, int64_t>{st.int64(0), st.int64(1)};
  }
  KOPE_ASSIGN(Stmt st, db.prepare("SELECT tablename FROM pg_catalog.pg_tables WHERE schemaname = current_schema() "
                                  "ORDER BY tablename LIMIT 6"));
  std::string names;
  for (;;) {
    KOPE_ASSIGN(bool row, st.step());
    if (!row) break;
    names += (names.empty() ? "" : ", ") + st.text(0);
  }
  if (names.empty()) return std::pair<int64_t, int64_t>{0, 0};
  return fail(ErrorKind::corrupt,
              "memory database {}: a PostgreSQL schema that is not a kope memory (tables: {}); refusing to "
              "touch it (name an empty database or schema)",
              db.path().string(), names);
}

// migrate() for PostgreSQL: the same rules, versions kept in the kope_schema table.
Status migrate_postgres(Db& db, int target_version) {
  KOPE_ASSIGN(auto versions, postgres_versions(db));
  if (versions.first == k_application_id && versions.second == target_version) return {};
  KOPE_ASSIGN(Transaction tx, Transaction::begin(db));  // the write lock: one process creates it
  KOPE_ASSIGN(versions, postgres_versions(db));
  auto [app, version] = versions;
  const std::string where = db.path().string();
  if (version != 0 && app != k_application_id) {
    return fail(ErrorKind::corrupt, "memory database {}: kope_schema names application {:#x}, not kope; refusing to "
                "touch it", where, app);
  }
  if (version > k_schema_version) {
    return fail(ErrorKind::corrupt,
                "memory database {}: schema version {} was written by a newer kope (this kope knows "
                "versions up to {}); upgrade kope to use it",
                where, version, k_schema_version);
  }
  if (version > target_version) {
    return fail(ErrorKind::internal, "memory database {}: cannot downgrade schema {} to {}", where, version,
                target_version);
  }
  if (version == 0) {
    if (target_version < k_pg_first_version) {
      return fail(ErrorKind::internal, "a PostgreSQL memory starts at schema version {}", k_pg_first_version);
    }
    if (auto s = db.exec(k_pg_migrations[k_pg_first_version - 1]); !s) {
      return std::unexpected(std::move(s).error().with_context("creating the kope memory schema"));
    }
    KOPE_TRY(write_identity(db));
    KOPE_ASSIGN(Stmt st, db.prepare("INSERT INTO kope_schema(application_id, version) VALUES (?, ?)"));
    KOPE_TRY(st.bind(1, int64_t{k_application_id}).bind(2, k_pg_first_version).run());
    version = k_pg_first_version;
  }
  for (int v = static_cast<int>(version) + 1; v <= target_version; ++v) {
    if (auto s = db.exec(k_pg_migrations[static_cast<size_t>(v - 1)]); !s) {
      return std::unexpected(std::move(s).error().with_context(fmt::format("migrating to schema version {}", v)));
    }
    KOPE_ASSIGN(Stmt st, db.prepare("UPDATE kope_schema SET version = ?"));
    KOPE_TRY(st.bind(1, v).run());
  }
  return tx.commit();
}

uint32_t be32(const unsigned char* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | uint32_t{p[3]};
}

}  // namespace

std::string case_search_tags(std::string_view op, std::string_view category, std::string_view target,
                             int stage, std::string_view verdict, int outcome) {
  std::string stage_text(stage_name(static_cast<Stage>(stage)));
  std::string outcome_text(outcome_name(static_cast<Outcome>(outcome)));
  return fmt::format("{} {} {} {} {} {}", search_tag("op", op), search_tag("cat", category),
                     search_tag("tgt", target), search_tag("st", stage_text), search_tag("v", verdict),
                     search_tag("o", outcome_text));
}

std::string lesson_search_tags(int kind, std::string_view category, std::string_view backend,
                               std::string_view target) {
  std::string kind_text(lesson_kind_name(static_cast<LessonKind>(kind)));
  return fmt::format("{} {} {} {}", search_tag("k", kind_text),
                     search_tag("cat", category.empty() ? "any" : category),
                     search_tag("be", backend.empty() ? "any" : backend),
                     search_tag("tgt", target.empty() ? "any" : target));
}

Result<int> stored_schema_version(Db& db) {
  KOPE_ASSIGN(auto v, db.query_int(db.postgres() ? "SELECT version FROM kope_schema" : "PRAGMA user_version"));
  return static_cast<int>(v.value_or(0));
}

Status check_file_header(const std::filesystem::path& path) {
  std::error_code ec;
  auto size = std::filesystem::file_size(path, ec);
  if (ec || size == 0) return {};  // missing or empty: SQLite creates a fresh database
  std::ifstream in(path, std::ios::binary);
  if (!in) return {};  // let SQLite report the open failure with its own words
  std::array<unsigned char, 100> h{};
  in.read(reinterpret_cast<char*>(h.data()), static_cast<std::streamsize>(h.size()));
  auto got = static_cast<size_t>(in.gcount());
  static constexpr char k_magic[] = "SQLite format 3";
  if (got < 100 || std::string_view(reinterpret_cast<const char*>(h.data()), 16) !=
                       std::string_view(k_magic, 16)) {
    return fail(ErrorKind::corrupt,
                "memory database {}: not an SQLite database ({} bytes, no SQLite header); it is damaged "
                "or not a kope memory file",
                path.string(), size);
  }
  uint32_t page_size = (uint32_t{h[16]} << 8) | uint32_t{h[17]};
  if (page_size == 1) page_size = 65536;
  if (page_size < 512 || (page_size & (page_size - 1)) != 0) {
    return fail(ErrorKind::corrupt, "memory database {}: damaged header (page size {})", path.string(), page_size);
  }
  uint32_t change_counter = be32(&h[24]);
  uint32_t page_count = be32(&h[28]);
  uint32_t valid_for = be32(&h[92]);
  // With a WAL beside it, another process may be checkpointing (page 1 is copied before the
  // file grows), so the size is only compared for a database at rest.
  std::error_code wal_ec;
  bool wal_present = std::filesystem::file_size(path.string() + "-wal", wal_ec) > 0 && !wal_ec;
  if (!wal_present && page_count > 0 && valid_for == change_counter &&
      static_cast<uint64_t>(page_count) * page_size > size) {
    return fail(ErrorKind::corrupt,
                "memory database {}: truncated: the header says {} pages of {} bytes ({} bytes) but the "
                "file has {} bytes",
                path.string(), page_count, page_size, static_cast<uint64_t>(page_count) * page_size, size);
  }
  return {};
}

Status register_functions(Db& db) {
  int rc = sqlite3_create_function_v2(db.handle(), "kope_case_tags", 6, SQLITE_UTF8 | SQLITE_DETERMINISTIC,
                                      nullptr, case_tags_fn, nullptr, nullptr, nullptr);
  if (rc != SQLITE_OK) return std::unexpected(db.error(rc, "cannot register kope_case_tags"));
  rc = sqlite3_create_function_v2(db.handle(), "kope_lesson_tags", 4, SQLITE_UTF8 | SQLITE_DETERMINISTIC,
                                  nullptr, lesson_tags_fn, nullptr, nullptr, nullptr);
  if (rc != SQLITE_OK) return std::unexpected(db.error(rc, "cannot register kope_lesson_tags"));
  // The FTS5 API pointer, as the FTS5 documentation prescribes.
  fts5_api* fts = nullptr;
  sqlite3_stmt* st = nullptr;
  rc = sqlite3_prepare_v2(db.handle(), "SELECT fts5(?1)", -1, &st, nullptr);
  if (rc == SQLITE_OK) {
    sqlite3_bind_pointer(st, 1, static_cast<void*>(&fts), "fts5_api_ptr", nullptr);
    sqlite3_step(st);
  }
  sqlite3_finalize(st);
  if (!fts) return fail(ErrorKind::unavailable, "this SQLite has no FTS5 (kope's memory needs it)");
  rc = fts->xCreateFunction(fts, "kope_bm25", nullptr, bm25_fn, nullptr);
  if (rc != SQLITE_OK) return std::unexpected(db.error(rc, "cannot register kope_bm25"));
  return {};
}

Status configure_connection(Db& db, bool in_memory) {
  KOPE_TRY(db.exec("PRAGMA foreign_keys = ON"));
  if (!in_memory) {
    KOPE_ASSIGN(Stmt st, db.prepare("PRAGMA journal_mode = WAL"));
    KOPE_ASSIGN(bool row, st.step());
    std::string mode = row ? st.text(0) : std::string();
    if (mode != "wal") {
      return fail(ErrorKind::io, "memory database {}: cannot switch to WAL journal mode (got '{}')",
                  db.path().string(), mode);
    }
  }
  KOPE_TRY(db.exec("PRAGMA synchronous = FULL"));
  // 64 MiB of page cache per connection: retrieval and batched inserts touch index pages all
  // over a large database, and SQLite's default (2 MiB) would re-read them from the OS each time.
  KOPE_TRY(db.exec("PRAGMA cache_size = -65536"));
  return {};
}

Status migrate(Db& db, int target_version) {
  if (target_version < 1 || target_version > k_schema_version) {
    return fail(ErrorKind::internal, "no schema version {}", target_version);
  }
  if (db.postgres()) return migrate_postgres(db, target_version);
  auto read_versions = [&db]() -> Result<std::pair<int64_t, int64_t>> {
    KOPE_ASSIGN(auto app, db.query_int("PRAGMA application_id"));
    KOPE_ASSIGN(auto ver, db.query_int("PRAGMA user_version"));
    return std::pair<int64_t, int64_t>{app.value_or(0), ver.value_or(0)};
  };
  KOPE_ASSIGN(auto versions, read_versions());
  if (versions.first == k_application_id && versions.second == target_version) return {};

  KOPE_ASSIGN(Transaction tx, Transaction::begin(db));
  KOPE_ASSIGN(versions, read_versions());
  auto [app, version] = versions;
  const std::string file = db.path().string();
  if (app != k_application_id) {
    KOPE_ASSIGN(auto tables, db.query_int("SELECT count(*) FROM sqlite_schema"));
    if (app != 0 || tables.value_or(0) != 0) {
      std::string names;
      KOPE_ASSIGN(Stmt st, db.prepare("SELECT name FROM sqlite_schema WHERE type = 'table' ORDER BY name LIMIT 6"));
      for (;;) {
        KOPE_ASSIGN(bool row, st.step());
        if (!row) break;
        names += (names.empty() ? "" : ", ") + st.text(0);
      }
      return fail(ErrorKind::corrupt,
                  "memory database {}: an SQLite database but not a kope memory (application_id {:#x}, "
                  "tables: {}); refusing to touch it",
                  file, app, names.empty() ? "none" : names);
    }
    version = 0;
  }
  if (version > k_schema_version) {
    return fail(ErrorKind::corrupt,
                "memory database {}: schema version {} was written by a newer kope (this kope knows "
                "versions up to {}); upgrade kope to use it",
                file, version, k_schema_version);
  }
  if (version > target_version) {
    return fail(ErrorKind::internal, "memory database {}: cannot downgrade schema {} to {}", file, version,
                target_version);
  }
  if (version == 0) {
    KOPE_TRY(db.exec(fmt::format("PRAGMA application_id = {}", k_application_id)));
  }
  for (int v = static_cast<int>(version) + 1; v <= target_version; ++v) {
    if (auto s = db.exec(k_migrations[static_cast<size_t>(v - 1)]); !s) {
      return std::unexpected(std::move(s).error().with_context(fmt::format("migrating to schema version {}", v)));
    }
    if (v == 1) KOPE_TRY(write_identity(db));
    KOPE_TRY(db.exec(fmt::format("PRAGMA user_version = {}", v)));
  }
  return tx.commit();
}

}  // namespace kope::memory
