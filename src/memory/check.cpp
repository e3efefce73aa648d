// `check`: SQLite's integrity check plus kope's own invariants.
#include <algorithm>
#include <array>
#include <cmath>
#include <unordered_map>

#include "memory/check.h"
#include "memory/codec.h"
#include "memory/text.h"
#include "util/hash.h"

namespace kope::memory {

namespace {

constexpr size_t k_max_problems_per_kind = 20;

struct Problems {
  std::vector<std::string>& out;
  std::map<std::string, size_t> counts;

  void add(const std::string& kind, std::string text) {
    size_t n = ++counts[kind];
    if (n <= k_max_problems_per_kind) out.push_back(std::move(text));
  }
  void summarise() {
    for (const auto& [kind, n] : counts) {
      if (n > k_max_problems_per_kind) {
        out.push_back(fmt::format("... and {} more {} problems", n - k_max_problems_per_kind, kind));
      }
    }
  }
};

std::string bin_hex(std::string_view bin) {
  static constexpr char k_digits[] = "0123456789abcdef";
  std::string out;
  for (unsigned char c : bin) {
    out += k_digits[c >> 4];
    out += k_digits[c & 15];
  }
  return out;
}

}  // namespace

namespace {

// SQLite's integrity and foreign key checks and the FTS5 indexes' own check.
Status check_sqlite(Db& db, Problems& p) {
  {
    KOPE_ASSIGN(Stmt st, db.prepare("PRAGMA integrity_check"));
    for (;;) {
      KOPE_ASSIGN(bool row, st.step());
      if (!row) break;
      std::string line = st.text(0);
      if (line != "ok") p.add("integrity", "integrity_check: " + line);
    }
  }
  {
    KOPE_ASSIGN(Stmt st, db.prepare("PRAGMA foreign_key_check"));
    for (;;) {
      KOPE_ASSIGN(bool row, st.step());
      if (!row) break;
      p.add("foreign_key", fmt::format("foreign key: {} row {} points to a missing {} row", st.text(0),
                                       st.int64(1), st.text(2)));
    }
  }
  for (const char* table : {"journal_fts", "lesson_fts"}) {
    if (auto s = db.exec(fmt::format("INSERT INTO {0}({0}, rank) VALUES ('integrity-check', 0)", table)); !s) {
      p.add("fts", fmt::format("{}: {}", table, s.error().message));
    }
  }
  return {};
}

// PostgreSQL keeps its files and foreign keys sound itself; what kope adds there: the search
// tables' totals (BM25's corpus size and length) agree with their rows, and every identity
// sequence is past the largest id (an insert would otherwise collide).
Status check_postgres(Db& db, Problems& p) {
  for (int corpus = 0; corpus < 2; ++corpus) {
    const char* table = corpus == 0 ? "journal_fts" : "lesson_fts";
    int64_t docs = 0, tokens = 0;
    KOPE_ASSIGN(Stmt st, db.prepare(fmt::format("SELECT body FROM {}", table)));
    for (;;) {
      KOPE_ASSIGN(bool row, st.step());
      if (!row) break;
      ++docs;
      tokens += static_cast<int64_t>(fts_tokens(st.text(0)).size());
    }
    for (const auto& [name, expected] : {std::pair{fmt::format("fts_docs:{}", corpus), docs},
                                         std::pair{fmt::format("fts_tokens:{}", corpus), tokens}}) {
      KOPE_ASSIGN(auto v, db.query_int(fmt::format("SELECT value FROM counters WHERE name = '{}'", name)));
      if (v.value_or(0) != expected) {
        p.add("fts", fmt::format("{}: counter {} is {}, its rows say {}", table, name, v.value_or(0), expected));
      }
    }
  }
  for (const char* table : {"origin", "hardware", "toolchain", "task", "blob", "cases", "lessons", "lesson_delta",
                            "import_log"}) {
    std::string_view name(table);
    const char* key = name == "lessons" || name == "lesson_delta" ? "seq" : "id";
    KOPE_ASSIGN(Stmt st, db.prepare(fmt::format(
                             "SELECT coalesce((SELECT max({1}) FROM {0}), 0), "
                             "coalesce(pg_sequence_last_value(CAST(pg_get_serial_sequence('{0}', '{1}') AS regclass)), 0)",
                             table, key)));
    KOPE_ASSIGN(bool row, st.step());
    if (row && st.int64(1) < st.int64(0)) {
      p.add("sequence", fmt::format("{}: its id sequence is at {} but the largest {} is {}", table, st.int64(1), key,
                                    st.int64(0)));
    }
  }
  return {};
}

// Lineage: parents exist and are older; every case has its derived row and its journal index
// entry. Sets report.cases_checked.
Status check_lineage(Db& db, Problems& p, CheckReport& report) {
  {
    KOPE_ASSIGN(Stmt st, db.prepare("SELECT c.id, c.parent_id FROM cases c LEFT JOIN cases p ON p.id = c.parent_id "
                                    "WHERE c.parent_id IS NOT NULL AND (p.id IS NULL OR p.id >= c.id)"));
    for (;;) {
      KOPE_ASSIGN(bool row, st.step());
      if (!row) break;
      p.add("lineage", fmt::format("case {}: parent {} is missing or not older", st.int64(0), st.int64(1)));
    }
  }
  {
    KOPE_ASSIGN(Stmt st, db.prepare("SELECT c.id FROM cases c LEFT JOIN case_derived d ON d.case_id = c.id "
                                    "WHERE d.case_id IS NULL"));
    for (;;) {
      KOPE_ASSIGN(bool row, st.step());
      if (!row) break;
      p.add("derived", fmt::format("case {}: no derived state (d(v), quarantine)", st.int64(0)));
    }
  }
  {
    KOPE_ASSIGN(auto n_cases, db.query_int("SELECT count(*) FROM cases"));
    KOPE_ASSIGN(auto n_fts, db.query_int("SELECT count(*) FROM journal_fts"));
    report.cases_checked = n_cases.value_or(0);
    if (n_cases.value_or(0) != n_fts.value_or(0)) {
      p.add("fts", fmt::format("journal index holds {} entries for {} cases", n_fts.value_or(0), n_cases.value_or(0)));
    }
  }
  return {};
}

// Per-run counts (cases, first and last case) agree with the run's cases.
Status check_runs(Db& db, Problems& p) {
  KOPE_ASSIGN(Stmt st, db.prepare("SELECT g.run_id FROM (SELECT run_id, count(*) AS n, min(id) AS lo, max(id) AS hi "
                                  "FROM cases GROUP BY run_id) g LEFT JOIN runs r ON r.run_id = g.run_id "
                                  "WHERE r.run_id IS NULL OR r.cases <> g.n OR r.first_case <> g.lo OR r.last_case <> g.hi"));
  for (;;) {
    KOPE_ASSIGN(bool row, st.step());
    if (!row) break;
    p.add("runs", fmt::format("run '{}': its counts disagree with its cases", st.text(0)));
  }
  return {};
}

// Code blobs: every case's blob is present; each blob decompresses to its size and hash; the
// blob counters agree. Sets report.blobs_checked.
Status check_blobs(Db& db, Problems& p, CheckReport& report) {
  {
    KOPE_ASSIGN(Stmt st, db.prepare("SELECT c.id, c.code_id FROM cases c LEFT JOIN blob b ON b.id = c.code_id "
                                    "WHERE c.code_id IS NOT NULL AND b.id IS NULL"));
    for (;;) {
      KOPE_ASSIGN(bool row, st.step());
      if (!row) break;
      p.add("blob", fmt::format("case {}: code blob {} is missing", st.int64(0), st.int64(1)));
    }
  }
  {
    int64_t raw_total = 0, stored_total = 0;
    KOPE_ASSIGN(Stmt st, db.prepare("SELECT id, hash, raw_size, data FROM blob"));
    for (;;) {
      KOPE_ASSIGN(bool row, st.step());
      if (!row) break;
      ++report.blobs_checked;
      raw_total += st.int64(2);
      stored_total += static_cast<int64_t>(st.blob(3).size());
      std::string expected = bin_hex(st.blob(1));
      auto code = decompress(st.blob(3), static_cast<size_t>(st.int64(2)));
      if (!code) {
        p.add("blob", fmt::format("blob {}: {}", st.int64(0), code.error().message));
      } else if (util::sha256_hex(*code) != expected) {
        p.add("blob", fmt::format("blob {}: content does not match its hash {}", st.int64(0), expected));
      }
    }
    for (auto [name, expected] : std::array<std::pair<const char*, int64_t>, 3>{
             {{"blobs", report.blobs_checked}, {"code_bytes_raw", raw_total}, {"code_bytes_stored", stored_total}}}) {
      KOPE_ASSIGN(auto v, db.query_int(fmt::format("SELECT value FROM counters WHERE name = '{}'", name)));
      if (v.value_or(0) != expected) {
        p.add("counters", fmt::format("counter {} is {}, the blobs say {}", name, v.value_or(0), expected));
      }
    }
  }
  return {};
}

// Downstream scores d(v), recomputed bottom-up (children have larger ids than their parents).
Status check_downstream(Db& db, Problems& p) {
  struct Row {
    std::optional<int64_t> parent;
    double own = 0;
    double stored = 0;
  };
  std::vector<std::pair<int64_t, Row>> rows;
  {
    KOPE_ASSIGN(Stmt st, db.prepare("SELECT c.id, c.parent_id, c.ratio, d.quarantine, d.downstream FROM cases c "
                                    "JOIN case_derived d ON d.case_id = c.id ORDER BY c.id"));
    for (;;) {
      KOPE_ASSIGN(bool row, st.step());
      if (!row) break;
      int64_t q = st.int64(3);
      bool evidence = q == 0 || q == 2;
      rows.emplace_back(st.int64(0), Row{st.opt_int64(1), k_downstream_self * (evidence ? st.real(2) : 0.0), st.real(4)});
    }
  }
  std::unordered_map<int64_t, double> child_sum;
  for (auto it = rows.rbegin(); it != rows.rend(); ++it) {
    const auto& [id, r] = *it;
    double d = r.own + k_downstream_self * k_downstream_decay * child_sum[id];
    if (std::abs(d - r.stored) > 1e-6 * std::max(1.0, std::abs(d))) {
      p.add("downstream", fmt::format("case {}: d(v) is {:.9g}, recomputed {:.9g}", id, r.stored, d));
    }
    if (r.parent) child_sum[*r.parent] += d;
  }
  return {};
}

// Per-task summaries agree with the cases; fix links agree with the lineage.
Status check_summaries(Db& db, Problems& p) {
  {
    KOPE_ASSIGN(Stmt st, db.prepare(
                             "SELECT g.task_id, g.hardware_id, g.toolchain_id, g.foreign_origin, g.n, g.n_correct, "
                             "g.first_correct, g.best, s.n_cases, s.n_correct, s.first_correct, s.best_speedup "
                             "FROM (SELECT c.task_id, c.hardware_id, c.toolchain_id, c.foreign_origin, count(*) AS n, "
                             "sum(CASE WHEN c.verdict = 'correct' THEN 1 ELSE 0 END) AS n_correct, "
                             "min(CASE WHEN c.verdict = 'correct' THEN c.id END) AS first_correct, "
                             "max(CASE WHEN c.verdict = 'correct' AND d.quarantine IN (0, 2) THEN c.speedup_ref END) AS best "
                             "FROM cases c JOIN case_derived d ON d.case_id = c.id "
                             "GROUP BY c.task_id, c.hardware_id, c.toolchain_id, c.foreign_origin) g "
                             "LEFT JOIN task_summary s ON s.task_id = g.task_id AND s.hardware_id = g.hardware_id "
                             "AND s.toolchain_id = g.toolchain_id AND s.foreign_origin = g.foreign_origin"));
    for (;;) {
      KOPE_ASSIGN(bool row, st.step());
      if (!row) break;
      bool ok = !st.is_null(8) && st.int64(4) == st.int64(8) && st.int64(5) == st.int64(9) &&
                st.opt_int64(6) == st.opt_int64(10) && st.opt_real(7) == st.opt_real(11);
      if (!ok) {
        p.add("summary", fmt::format("task {} on hardware {} / toolchain {}: summary disagrees with its cases",
                                     st.int64(0), st.int64(1), st.int64(2)));
      }
    }
  }
  {
    KOPE_ASSIGN(Stmt st, db.prepare("SELECT f.fix_case, f.failed_case FROM fix_link f JOIN cases c ON c.id = f.fix_case "
                                    "WHERE c.parent_id IS DISTINCT FROM f.failed_case OR c.verdict <> 'correct'"));
    for (;;) {
      KOPE_ASSIGN(bool row, st.step());
      if (!row) break;
      p.add("fix_link", fmt::format("fix link {} -> {} does not match the lineage", st.int64(1), st.int64(0)));
    }
  }
  return {};
}

// Lessons: every lesson's log starts with `add` and replays to its current counts and status;
// the lesson index holds one entry per lesson. Sets report.lessons_checked.
Status check_lessons(Db& db, Problems& p, CheckReport& report) {
  {
    KOPE_ASSIGN(Stmt st, db.prepare(
                             "SELECT l.id, l.helpful, l.harmful, l.status, l.merged_into, "
                             "(SELECT op FROM lesson_delta WHERE lesson_id = l.id ORDER BY seq LIMIT 1), "
                             "(SELECT helpful_after || ' ' || harmful_after || ' ' || status_after FROM lesson_delta "
                             " WHERE lesson_id = l.id ORDER BY seq DESC LIMIT 1), "
                             "(SELECT count(*) FROM lessons m WHERE m.id = l.merged_into) FROM lessons l"));
    for (;;) {
      KOPE_ASSIGN(bool row, st.step());
      if (!row) break;
      ++report.lessons_checked;
      std::string id = st.text(0);
      auto status = static_cast<LessonStatus>(std::clamp<int64_t>(st.int64(3), 0, 3));
      if (st.is_null(5)) {
        p.add("lesson_log", fmt::format("lesson {}: no delta log", id));
        continue;
      }
      if (st.text(5) != "add") p.add("lesson_log", fmt::format("lesson {}: log starts with '{}', not 'add'", id, st.text(5)));
      std::string expected = fmt::format("{} {} {}", st.int64(1), st.int64(2), lesson_status_name(status));
      if (st.text(6) != expected) {
        p.add("lesson_log", fmt::format("lesson {}: is '{}' (helpful harmful status) but its log ends at '{}'", id,
                                        expected, st.text(6)));
      }
      if (status == LessonStatus::merged && st.int64(7) == 0) {
        p.add("lesson_log", fmt::format("lesson {}: merged into missing lesson '{}'", id, st.text(4)));
      }
    }
  }
  {
    KOPE_ASSIGN(auto n_lessons, db.query_int("SELECT count(*) FROM lessons"));
    KOPE_ASSIGN(auto n_fts, db.query_int("SELECT count(*) FROM lesson_fts"));
    if (n_lessons.value_or(0) != n_fts.value_or(0)) {
      p.add("fts", fmt::format("lesson index holds {} entries for {} lessons", n_fts.value_or(0), n_lessons.value_or(0)));
    }
  }
  return {};
}

}  // namespace

Result<CheckReport> check_store(SharedDb& shared) {
  std::lock_guard lock(shared.mutex());
  Db& db = shared.db();
  CheckReport report;
  Problems p{report.problems, {}};

  // 1. The database's own checks.
  if (db.postgres()) {
    KOPE_TRY(check_postgres(db, p));
  } else {
    KOPE_TRY(check_sqlite(db, p));
  }
  // 2. Lineage, then per-run counts.
  KOPE_TRY(check_lineage(db, p, report));
  KOPE_TRY(check_runs(db, p));
  // 3. Code blobs and their counters.
  KOPE_TRY(check_blobs(db, p, report));
  // 4. Downstream scores.
  KOPE_TRY(check_downstream(db, p));
  // 5. Per-task summaries and fix links.
  KOPE_TRY(check_summaries(db, p));
  // 6. Lessons.
  KOPE_TRY(check_lessons(db, p, report));
  p.summarise();
  return report;
}

}  // namespace kope::memory
