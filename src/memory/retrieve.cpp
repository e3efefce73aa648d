// Retrieval: bounded candidate generation per signal, then one scoring pass.
//
// Every signal is an index lookup with a LIMIT, so the cost does not grow with the number of
// cases: fix lessons and error->fix links by error signature, lessons by FTS5 and by scope, the
// op's cases by d(v) (case_derived_graph index), best kernels from the per-task summaries (of
// this op and of the most similar ops, found by scanning the small task table in memory),
// lineage around the incumbent, and the most recent journals that match the query text
// (FTS5, newest first, bm25 computed only for those rows). Candidates are then loaded in one
// query, scored, and the best `limit` returned.
#include <algorithm>
#include <bit>
#include <chrono>
#include <cstdio>
#include <cctype>
#include <cstdlib>
#include <cmath>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include <nlohmann/json.hpp>

#include "memory/case_store.h"
#include "memory/codec.h"
#include "memory/retrieval_store.h"
#include "memory/text.h"
#include "util/strings.h"

namespace kope::memory {

namespace {

constexpr int k_fix_lessons_limit = 20;
constexpr size_t k_lexical_lessons = 20;
constexpr int k_scope_lessons_limit = 20;  // per scope (this category, general)
constexpr int k_fix_links_limit = 12;
constexpr int k_graph_limit = 15;
constexpr int k_similar_tasks = 5;
constexpr size_t k_lexical_journals = 12;  // best overall, plus as many again from the op's category
constexpr size_t k_query_terms = 16;
// Lexical search reads only the postings of the query's rarer terms, at most this many in all
// (very common terms carry almost no BM25 weight), and scores the newest k_lexical_*_rows documents
// that match them: both bound the cost however large the memory grows.
constexpr int64_t k_posting_budget = 20000;
constexpr int k_lexical_journal_rows = 200;
constexpr int k_lexical_lesson_rows = 100;
constexpr double k_lexical_half = 5.0;  // a BM25 score of 5 counts as a lexical signal of 0.5
constexpr int k_lineage_ancestors = 6;
constexpr int k_lineage_children = 10;

double closeness(double a, double b, double scale) { return std::exp(-std::abs(a - b) / scale); }

// The loaded facts of a candidate case.
struct CaseFacts {
  int64_t id = 0;
  int64_t task_id = 0;
  std::string op, category, target, toolchain, backend, run_id, spec_hash;
  std::optional<int64_t> parent_id;
  Stage stage = Stage::draft;
  std::string optimisation;
  eval::Verdict verdict = eval::Verdict::compile_error;
  std::string signature, message, journal;
  std::optional<double> speedup_ref;
  double ratio = 0;
  Outcome outcome = Outcome::negative;
  double downstream = 0;
  std::optional<QuarantineStatus> quarantine = QuarantineStatus::none;  // nullopt: a code kope does not know
  bool foreign_origin = false;
  std::optional<int64_t> code_id;
};

struct LessonFacts {
  int64_t seq = 0;
  Lesson lesson;
};

struct Candidate {
  RetrievedItem::Kind kind = RetrievedItem::Kind::case_summary;
  int64_t case_id = 0;
  int64_t lesson_seq = 0;
  std::map<std::string, double> parts;  // raw signal strengths in [0, 1] (value in [-1.5, 1.5])
  std::optional<int64_t> failed_case;    // fix links: the failed case the item fixed
  CaseLineage lineage = CaseLineage::none;  // the first lineage signal that found it
  int ancestor = 0;                         // CaseLineage::ancestor: generations above the incumbent
  bool similar_op = false;

  void raise(const std::string& part, double v) {
    auto& slot = parts[part];
    slot = std::max(slot, v);
  }
};

struct Weights {
  std::map<std::string, double> w;
  double operator()(const std::string& k) const {
    auto it = w.find(k);
    return it == w.end() ? 1.0 : it->second;
  }
};

Weights weights_for(Stage stage) {
  switch (stage) {
    case Stage::draft:
      return {{{"exact", 1.0}, {"similarity", 1.2}, {"lexical", 0.8}, {"graph", 0.8}, {"speed", 1.0},
               {"fix", 0.5}, {"lineage", 0.5}, {"feasibility", 0.6}, {"value", 0.8}}};
    case Stage::repair:
      return {{{"exact", 0.8}, {"similarity", 0.5}, {"lexical", 1.5}, {"graph", 0.3}, {"speed", 0.2},
               {"fix", 3.0}, {"lineage", 0.8}, {"feasibility", 1.0}, {"value", 0.8}}};
    case Stage::refine:
      return {{{"exact", 1.0}, {"similarity", 0.8}, {"lexical", 1.0}, {"graph", 1.5}, {"speed", 1.5},
               {"fix", 0.3}, {"lineage", 1.0}, {"feasibility", 0.3}, {"value", 0.8}}};
  }
  return {};
}

std::string json_ids(const std::vector<int64_t>& ids) {
  nlohmann::json arr = ids;
  return arr.dump();
}

std::string json_strings(const std::vector<std::string>& ids) {
  nlohmann::json arr = ids;
  return arr.dump();
}

double squash(double x) { return x <= 0 ? 0.0 : x / (1.0 + x); }

struct LexicalHit {
  int64_t rowid = 0;
  double bm25 = 0;
  int64_t task_id = 0;  // journals only
};

}  // namespace

namespace {

// One parameter of a signature's text: its code outside comments and the comma-separated words
// of its comments (the dtype and inout notes).
struct TextParam {
  std::string code;
  std::vector<std::string> notes;
};

std::vector<TextParam> text_params(std::string_view params) {
  std::vector<TextParam> out(1);
  for (size_t i = 0; i < params.size(); ++i) {
    if (params.compare(i, 2, "/*") == 0) {
      size_t end = params.find("*/", i + 2);
      std::string_view note = params.substr(i + 2, end == std::string_view::npos ? end : end - i - 2);
      for (const auto& w : util::split(note, ',')) {
        if (!util::trim(w).empty()) out.back().notes.emplace_back(util::trim(w));
      }
      if (end == std::string_view::npos) break;
      i = end + 1;
    } else if (params[i] == ',') {
      out.emplace_back();
    } else {
      out.back().code += params[i];
    }
  }
  return out;
}

// The dtype of a C element type of the kernel ABI (and the names older hand-written signatures
// used); uint16_t holds f16 or bf16, which only a note tells.
std::optional<spec::DType> ctype_dtype(std::string_view type) {
  using spec::DType;
  static constexpr std::pair<std::string_view, DType> k_types[] = {
      {"float", DType::f32},  {"double", DType::f64}, {"int32_t", DType::i32}, {"int64_t", DType::i64},
      {"int16_t", DType::i16}, {"int8_t", DType::i8},  {"uint8_t", DType::u8},  {"bool", DType::boolean},
      {"half", DType::f16},   {"bfloat16", DType::bf16}};
  for (const auto& [name, t] : k_types) {
    if (name == type) return t;
  }
  return std::nullopt;
}

}  // namespace

spec::SignatureShape legacy_signature_shape(std::string_view sig) {
  using Kind = spec::SignatureParam::Kind;
  spec::SignatureShape s;
  size_t open = sig.find('(');
  size_t close = sig.rfind(')');
  if (open == std::string_view::npos || close == std::string_view::npos || close <= open) return s;
  bool after_dims = false;  // an attr seen: later int64_t scalars are attrs too
  for (const auto& p : text_params(sig.substr(open + 1, close - open - 1))) {
    bool pointer = p.code.find('*') != std::string::npos;
    bool is_const = false;
    std::vector<std::string> words;  // the identifiers but const
    std::string word;
    for (char ch : p.code + ' ') {
      if (std::isalnum(static_cast<unsigned char>(ch)) || ch == '_') {
        word += ch;
        continue;
      }
      if (word == "const") is_const = true;
      else if (!word.empty()) words.push_back(word);
      word.clear();
    }
    if (words.empty() || (!pointer && words.size() == 1 && words[0] == "void")) continue;
    if (words.size() > 1) words.pop_back();  // the parameter's name
    std::optional<spec::DType> dtype = ctype_dtype(util::join(words, " "));
    bool inout = false;
    for (const auto& note : p.notes) {
      if (auto t = spec::parse_dtype(note)) dtype = t;
      inout = inout || note == "inout";
    }
    if (pointer) {
      s.params.push_back({is_const ? Kind::input : inout ? Kind::inout : Kind::output, dtype});
    } else if (dtype == spec::DType::i64 && !after_dims) {
      s.params.push_back({Kind::dim, dtype});
    } else {
      s.params.push_back({Kind::attr, dtype});
      after_dims = true;
    }
  }
  return s;
}

spec::SignatureShape task_shape(const TaskInfo& t) {
  return t.signature_shape ? *t.signature_shape : legacy_signature_shape(t.signature);
}

namespace {

// The tensors' dtypes of a shape as a bit set (bit i: the DType of value i), so comparing every
// task with the query allocates nothing.
uint32_t dtype_bits(const spec::SignatureShape& s) {
  uint32_t bits = 0;
  for (const auto& p : s.params) {
    bool tensor = p.kind != spec::SignatureParam::Kind::dim && p.kind != spec::SignatureParam::Kind::attr;
    if (tensor && p.dtype) bits |= 1u << static_cast<unsigned>(*p.dtype);
  }
  return bits;
}

// jaccard() over two dtype bit sets: 1 when both are empty.
double dtype_jaccard(uint32_t a, uint32_t b) {
  if ((a | b) == 0) return 1.0;
  return static_cast<double>(std::popcount(a & b)) / static_cast<double>(std::popcount(a | b));
}

}  // namespace

double task_similarity(const TaskInfo& a, const TaskInfo& b) {
  return task_similarity(a, task_shape(a), b, task_shape(b));
}

double task_similarity(const TaskInfo& a, const spec::SignatureShape& sa, const TaskInfo& b,
                       const spec::SignatureShape& sb) {
  double category = (!a.category.empty() && a.category == b.category) ? 1.0 : 0.0;
  double level = 1.0 - std::min(3, std::abs(a.level - b.level)) / 3.0;
  double ai = closeness(std::log2(a.arithmetic_intensity + 1e-3), std::log2(b.arithmetic_intensity + 1e-3), 2.0);
  double size = 0.5 * closeness(a.log2_flops, b.log2_flops, 4.0) + 0.5 * closeness(a.log2_bytes, b.log2_bytes, 4.0);
  double shape = 0.25 * (sa.inputs() == sb.inputs()) + 0.25 * (sa.outputs() == sb.outputs()) +
                 0.25 * closeness(sa.dims() + sa.scalars(), sb.dims() + sb.scalars(), 2.0) +
                 0.25 * dtype_jaccard(dtype_bits(sa), dtype_bits(sb));
  return 0.35 * category + 0.15 * level + 0.2 * ai + 0.15 * size + 0.15 * shape;
}

bool task_structurally_close(const TaskInfo& a, const spec::SignatureShape& sa, const TaskInfo& b,
                             const spec::SignatureShape& sb) {
  if (a.op == b.op || (!a.category.empty() && a.category == b.category)) return true;
  // Another category: the same parameter shape (tensors in and out, their dtypes, about as
  // many dims and attributes) and an arithmetic intensity within a factor of 2, so a kernel of
  // an elementwise op is never offered to a convolution that happens to take two tensors.
  bool shape = sa.inputs() == sb.inputs() && sa.outputs() == sb.outputs() && dtype_bits(sa) == dtype_bits(sb) &&
               std::abs((sa.dims() + sa.scalars()) - (sb.dims() + sb.scalars())) <= 1;
  if (!shape || a.arithmetic_intensity <= 0 || b.arithmetic_intensity <= 0) return false;
  return std::abs(std::log2(a.arithmetic_intensity) - std::log2(b.arithmetic_intensity)) <= 1.0;
}

static Result<std::vector<LexicalHit>> postgres_bm25(Db& db, int corpus,
                                                     const std::vector<std::pair<std::string, double>>& terms,
                                                     int rows);

Result<std::vector<int64_t>> rank_lessons_by_text(Db& db, const std::string& text) {
  constexpr int k_ranked_lessons = 1000;
  std::vector<int64_t> out;
  if (!db.postgres()) {
    std::string q = fts_or_query(text);
    if (q.empty()) return out;
    KOPE_ASSIGN(Stmt st, db.prepare("SELECT rowid FROM lesson_fts WHERE lesson_fts MATCH ? ORDER BY rank LIMIT 1000"));
    st.bind(1, q);
    for (;;) {
      KOPE_ASSIGN(bool row, st.step());
      if (!row) return out;
      out.push_back(st.int64(0));
    }
  }
  // The terms fts_or_query would OR, with their document frequencies; every match is scored.
  std::vector<std::pair<std::string, double>> terms;
  KOPE_ASSIGN(Stmt st, db.prepare("SELECT df FROM term_df WHERE corpus = 1 AND term = ?"));
  std::set<std::string> seen;
  for (const auto& t : text_tokens(text)) {
    if (seen.size() >= 12) break;
    if (!seen.insert(t).second) continue;
    st.reset().bind(1, t);
    KOPE_ASSIGN(bool row, st.step());
    terms.emplace_back(t, row ? st.real(0) : 0.0);
  }
  KOPE_ASSIGN(auto hits, postgres_bm25(db, 1, terms, 0));
  std::stable_sort(hits.begin(), hits.end(), [](const LexicalHit& a, const LexicalHit& b) { return a.bm25 > b.bm25; });
  for (size_t i = 0; i < hits.size() && i < static_cast<size_t>(k_ranked_lessons); ++i) out.push_back(hits[i].rowid);
  return out;
}

Status RetrievalStore::refresh_tasks_locked() {
  KOPE_ASSIGN(Stmt st, m_db->prepare("SELECT id, op, spec_hash, category, level, signature, timed_dims, "
                                     "arithmetic_intensity, log2_flops, log2_bytes, signature_shape FROM task "
                                     "WHERE id > ? ORDER BY id"));
  st.bind(1, m_tasks_max_id);
  for (;;) {
    KOPE_ASSIGN(bool row, st.step());
    if (!row) break;
    TaskRow t;
    t.id = st.int64(0);
    t.info.op = st.text(1);
    t.info.spec_hash = st.text(2);
    t.info.category = st.text(3);
    t.info.level = static_cast<int>(st.int64(4));
    t.info.signature = st.text(5);
    t.info.timed_dims = st.text(6);
    t.info.arithmetic_intensity = st.real(7);
    t.info.log2_flops = st.real(8);
    t.info.log2_bytes = st.real(9);
    // A shape this kope cannot read (a newer kope's dtype) counts as absent: the text is read.
    if (!st.is_null(10)) {
      if (auto shape = spec::SignatureShape::parse(st.text(10))) t.info.signature_shape = std::move(*shape);
    }
    t.shape = task_shape(t.info);
    m_tasks_max_id = std::max(m_tasks_max_id, t.id);
    m_tasks.push_back(std::move(t));
  }
  return {};
}

// The PostgreSQL side of lexical search: the documents of a corpus (0: journals, 1: lessons)
// whose tokens include any of `terms` (term, document frequency), newest first, at most `rows`
// (0: all), each with the BM25 that kope_bm25 computes in SQLite: the same formula
// (okapi_bm25), term frequencies and length counted over the body's fts_tokens, and the corpus
// size and total length from the counters the store keeps beside the index. The tsvector only
// selects; the score never comes from ts_rank, so both stores rank alike.
static Result<std::vector<LexicalHit>> postgres_bm25(Db& db, int corpus,
                                                     const std::vector<std::pair<std::string, double>>& terms,
                                                     int rows) {
  std::vector<LexicalHit> hits;
  if (terms.empty()) return hits;
  std::string query;
  for (const auto& [term, df] : terms) query += (query.empty() ? "'" : " | '") + term + "'";
  double docs = 0, total = 0;
  {
    KOPE_ASSIGN(Stmt st, db.prepare("SELECT name, value FROM counters WHERE name = ? OR name = ?"));
    st.bind(1, fmt::format("fts_docs:{}", corpus)).bind(2, fmt::format("fts_tokens:{}", corpus));
    for (;;) {
      KOPE_ASSIGN(bool row, st.step());
      if (!row) break;
      (st.text(0).starts_with("fts_docs") ? docs : total) = st.real(1);
    }
  }
  std::string limit = rows > 0 ? fmt::format(" LIMIT {}", rows) : "";
  std::string sql = corpus == 0 ? "SELECT f.rowid, f.body, d.task_id FROM journal_fts f JOIN case_derived d "
                                  "ON d.case_id = f.rowid WHERE f.terms @@ CAST(? AS tsquery) ORDER BY f.rowid DESC" + limit
                                : "SELECT rowid, body, 0 FROM lesson_fts WHERE terms @@ CAST(? AS tsquery) "
                                  "ORDER BY rowid DESC" + limit;
  KOPE_ASSIGN(Stmt st, db.prepare(sql));
  st.bind(1, query);
  std::vector<double> df;
  for (const auto& t : terms) df.push_back(t.second);
  double average = docs > 0 ? total / docs : 1.0;
  for (;;) {
    KOPE_ASSIGN(bool row, st.step());
    if (!row) break;
    std::vector<std::string> tokens = fts_tokens(st.text(1));
    std::vector<int> tf(terms.size(), 0);
    for (const auto& tok : tokens) {
      for (size_t i = 0; i < terms.size(); ++i) tf[i] += tok == terms[i].first;
    }
    hits.push_back({st.int64(0), okapi_bm25(tf, df, docs, static_cast<double>(tokens.size()), average), st.int64(2)});
  }
  return hits;
}

// BM25 matches of `text` in a corpus (0: journals, 1: lessons) over the query's rarer terms
// (document frequencies from term_df, postings within k_posting_budget), best first.
static Result<std::vector<LexicalHit>> lexical_search(Db& db, int corpus, std::string_view text) {
  std::vector<std::pair<int64_t, std::string>> terms;  // df, term
  {
    KOPE_ASSIGN(Stmt st, db.prepare("SELECT df FROM term_df WHERE corpus = ? AND term = ?"));
    std::set<std::string> seen;
    for (const auto& t : text_tokens(text)) {
      if (seen.size() >= k_query_terms) break;
      if (!seen.insert(t).second) continue;
      st.reset().bind(1, corpus).bind(2, t);
      KOPE_ASSIGN(bool row, st.step());
      if (row && st.int64(0) > 0) terms.emplace_back(st.int64(0), t);
    }
  }
  std::sort(terms.begin(), terms.end());
  std::string match;
  std::vector<SqlValue> params{SqlValue{std::string()}};
  int64_t postings = 0;
  for (const auto& [df, term] : terms) {
    if (postings + df > k_posting_budget) break;
    postings += df;
    match += (match.empty() ? "\"" : " OR \"") + term + "\"";
    params.emplace_back(df);
  }
  std::vector<LexicalHit> hits;
  if (match.empty()) return hits;
  if (db.postgres()) {
    std::vector<std::pair<std::string, double>> scored;
    for (size_t i = 0; i < terms.size() && i + 1 < params.size(); ++i) {
      scored.emplace_back(terms[i].second, static_cast<double>(terms[i].first));
    }
    KOPE_ASSIGN(hits, postgres_bm25(db, corpus, scored, corpus == 0 ? k_lexical_journal_rows : k_lexical_lesson_rows));
  } else {
    params[0] = match;
    std::string args;
    for (size_t i = 1; i < params.size(); ++i) args += fmt::format(", ?{}", i + 1);
    std::string sql =
        corpus == 0 ? fmt::format("SELECT journal_fts.rowid, kope_bm25(journal_fts{}), d.task_id FROM journal_fts "
                                  "CROSS JOIN case_derived d ON d.case_id = journal_fts.rowid WHERE journal_fts MATCH ?1 "
                                  "ORDER BY journal_fts.rowid DESC LIMIT {}",
                                  args, k_lexical_journal_rows)
                    : fmt::format("SELECT rowid, kope_bm25(lesson_fts{}), 0 FROM lesson_fts WHERE lesson_fts MATCH ?1 "
                                  "ORDER BY rowid DESC LIMIT {}",
                                  args, k_lexical_lesson_rows);
    KOPE_ASSIGN(Stmt st, db.prepare(sql));
    st.bind_all(params);
    for (;;) {
      KOPE_ASSIGN(bool row, st.step());
      if (!row) break;
      hits.push_back({st.int64(0), st.real(1), st.int64(2)});
    }
  }
  std::sort(hits.begin(), hits.end(), [](const LexicalHit& a, const LexicalHit& b) {
    return a.bm25 != b.bm25 ? a.bm25 > b.bm25 : a.rowid > b.rowid;
  });
  return hits;
}

// One retrieval, as the stages of its pipeline: candidates from each signal (tasks, lessons,
// fix links, the op's graph, best kernels, lineage, journals), their facts loaded in bulk, the
// learned values, one scoring pass, then the cut with journals and kernel sources added to the
// items that made it. Runs with the store's mutex held.
class RetrievalEngine {
 public:
  RetrievalEngine(RetrievalStore& store, const RetrievalQuery& q)
      : m_store(store), m_db(*store.m_db), m_q(q), m_weights(weights_for(q.stage)),
        m_lexical_text(q.text + " " + q.last_error_signature + " " + q.bottleneck) {}

  Result<std::vector<RetrievedItem>> run() {
    plan_tasks();
    mark("tasks");
    KOPE_TRY(fix_lessons());
    mark("fixlessons");
    KOPE_TRY(lexical_lessons());
    mark("lessonfts");
    KOPE_TRY(scope_lessons());
    mark("scopelessons");
    KOPE_TRY(fix_links());
    mark("fixlinks");
    KOPE_TRY(graph_cases());
    mark("graph");
    KOPE_TRY(best_kernels());
    mark("summaries");
    KOPE_TRY(lineage());
    mark("lineage");
    KOPE_TRY(lexical_journals());
    mark("journalfts");
    KOPE_TRY(load_facts());
    mark("load");
    KOPE_TRY(load_values());
    mark("values");
    std::vector<RetrievedItem> items = score();
    mark("score");
    KOPE_ASSIGN(auto out, finish(std::move(items)));
    mark("kernels");
    return out;
  }

 private:
  // KOPE_TRACE_RETRIEVE: each stage's time on stderr.
  void mark(const char* what) {
    static const bool trace = std::getenv("KOPE_TRACE_RETRIEVE") != nullptr;
    if (!trace) return;
    auto now = std::chrono::steady_clock::now();
    std::fprintf(stderr, "%-12s %8.3f ms\n", what, std::chrono::duration<double, std::milli>(now - m_t_prev).count());
    m_t_prev = now;
  }

  Candidate& case_cand(int64_t id, RetrievedItem::Kind kind = RetrievedItem::Kind::case_summary) {
    std::string key = (kind == RetrievedItem::Kind::best_kernel ? "kernel:" : "case:") + std::to_string(id);
    Candidate& c = m_cands[key];
    c.kind = kind;
    c.case_id = id;
    return c;
  }
  Candidate& lesson_cand(int64_t seq) {
    Candidate& c = m_cands["lseq:" + std::to_string(seq)];
    c.kind = RetrievedItem::Kind::lesson;
    c.lesson_seq = seq;
    return c;
  }

  // Tasks of this op, and the most similar other ops.
  void plan_tasks() {
    m_shape = task_shape(m_q.task);
    for (const auto& t : m_store.m_tasks) {
      m_task_by_id[t.id] = &t;
      if (t.info.op == m_q.task.op) {
        m_op_tasks.push_back(t.id);
      } else {
        m_similar.emplace_back(task_similarity(m_q.task, m_shape, t.info, t.shape), t.id);
      }
    }
    std::partial_sort(m_similar.begin(), m_similar.begin() + std::min<size_t>(m_similar.size(), k_similar_tasks * 3),
                      m_similar.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  }

  // --- Lessons: fixes for the error, lexical matches, and lessons of this scope.
  Status fix_lessons() {
    if (m_q.last_error_signature.empty()) return {};
    KOPE_ASSIGN(Stmt st, m_db.prepare("SELECT seq FROM lessons WHERE error_signature = ? AND error_signature <> '' "
                                      "AND status = 0 ORDER BY helpful - harmful DESC, seq DESC LIMIT ?"));
    st.bind(1, m_q.last_error_signature).bind(2, k_fix_lessons_limit);
    for (;;) {
      KOPE_ASSIGN(bool row, st.step());
      if (!row) return {};
      lesson_cand(st.int64(0)).raise("fix", 1.0);
    }
  }

  Status lexical_lessons() {
    KOPE_ASSIGN(auto hits, lexical_search(m_db, 1, m_lexical_text));
    for (size_t i = 0; i < hits.size() && i < k_lexical_lessons; ++i) {
      lesson_cand(hits[i].rowid).raise("lexical", hits[i].bm25 / (hits[i].bm25 + k_lexical_half));
    }
    return {};
  }

  Status scope_lessons() {
    KOPE_ASSIGN(Stmt st, m_db.prepare("SELECT seq FROM lessons WHERE status = 0 AND category = ? "
                                      "ORDER BY helpful - harmful DESC, seq DESC LIMIT ?"));
    for (const std::string& category : {m_q.task.category, std::string()}) {
      st.reset().bind(1, category).bind(2, k_scope_lessons_limit);
      for (;;) {
        KOPE_ASSIGN(bool row, st.step());
        if (!row) break;
        lesson_cand(st.int64(0));
      }
    }
    return {};
  }

  // --- Cases: error->fix links (any hardware: fixes transfer). The newest fixes of this error
  // for this op, on this hardware, and anywhere.
  Status fix_links() {
    if (m_q.last_error_signature.empty()) return {};
    std::vector<int64_t> hardware_ids;
    {
      KOPE_ASSIGN(Stmt st, m_db.prepare("SELECT id FROM hardware WHERE target = ?"));
      st.bind(1, m_q.target);
      for (;;) {
        KOPE_ASSIGN(bool row, st.step());
        if (!row) break;
        hardware_ids.push_back(st.int64(0));
      }
    }
    // Each query binds the signature, then its key (task or hardware, when given), then the limit.
    auto links = [&](const char* sql, const std::vector<int64_t>& keys) -> Status {
      KOPE_ASSIGN(Stmt st, m_db.prepare(sql));
      for (size_t i = 0; i < std::max<size_t>(keys.size(), 1); ++i) {
        if (keys.empty()) {
          st.reset().bind(1, m_q.last_error_signature).bind(2, k_fix_links_limit);
        } else {
          st.reset().bind(1, m_q.last_error_signature).bind(2, keys[i]).bind(3, k_fix_links_limit);
        }
        for (;;) {
          KOPE_ASSIGN(bool row, st.step());
          if (!row) break;
          Candidate& c = case_cand(st.int64(0));
          c.raise("fix", 1.0);
          c.failed_case = st.int64(1);
        }
      }
      return {};
    };
    if (!m_op_tasks.empty()) {
      KOPE_TRY(links("SELECT fix_case, failed_case FROM fix_link WHERE error_signature = ? "
                     "AND task_id = ? ORDER BY fix_case DESC LIMIT ?", m_op_tasks));
    }
    if (!hardware_ids.empty()) {
      KOPE_TRY(links("SELECT fix_case, failed_case FROM fix_link WHERE error_signature = ? "
                     "AND hardware_id = ? ORDER BY fix_case DESC LIMIT ?", hardware_ids));
    }
    return links("SELECT fix_case, failed_case FROM fix_link WHERE error_signature = ? "
                 "ORDER BY fix_case DESC LIMIT ?", {});
  }

  // The op's cases with the highest downstream scores.
  Status graph_cases() {
    for (int64_t tid : m_op_tasks) {
      KOPE_ASSIGN(Stmt st, m_db.prepare("SELECT case_id FROM case_derived WHERE task_id = ? "
                                        "ORDER BY downstream DESC LIMIT ?"));
      st.bind(1, tid).bind(2, k_graph_limit);
      for (;;) {
        KOPE_ASSIGN(bool row, st.step());
        if (!row) break;
        case_cand(st.int64(0));
      }
    }
    return {};
  }

  // Best kernels from the per-task summaries: this op and the most similar ops (native only),
  // and the first correct case of this op elsewhere (what compiles and passes there).
  Status best_kernels() {
    std::vector<std::pair<int64_t, double>> tasks;  // task id, similarity
    for (int64_t tid : m_op_tasks) tasks.emplace_back(tid, 1.0);
    for (size_t i = 0; i < m_similar.size() && i < static_cast<size_t>(k_similar_tasks); ++i) {
      tasks.emplace_back(m_similar[i].second, m_similar[i].first);
    }
    KOPE_ASSIGN(Stmt st, m_db.prepare(
                             "SELECT s.best_case, s.first_correct, h.target = ?2 AS native FROM task_summary s "
                             "JOIN hardware h ON h.id = s.hardware_id JOIN toolchain tc ON tc.id = s.toolchain_id "
                             "WHERE s.task_id = ?1 AND s.foreign_origin = 0 "
                             "ORDER BY native DESC, tc.name = ?3 DESC, s.best_speedup IS NULL, s.best_speedup DESC LIMIT 6"));
    for (const auto& [tid, sim] : tasks) {
      if (task_held_out(tid)) {
        KOPE_TRY(current_run_best(tid, sim));
        continue;
      }
      st.reset().bind(1, tid).bind(2, m_q.target).bind(3, m_q.toolchain);
      for (;;) {
        KOPE_ASSIGN(bool row, st.step());
        if (!row) break;
        bool native = st.int64(2) != 0;
        bool same_op = sim >= 1.0 && m_task_by_id.count(tid) && m_task_by_id[tid]->info.op == m_q.task.op;
        if (native && !st.is_null(0)) {
          Candidate& c = case_cand(st.int64(0), RetrievedItem::Kind::best_kernel);
          if (!same_op) {
            c.raise("similarity", sim);
            c.similar_op = true;
          }
        } else if (!native && same_op && !st.is_null(1)) {
          case_cand(st.int64(1)).raise("feasibility", 1.0);
        }
      }
    }
    return {};
  }

  bool task_held_out(int64_t tid) const {
    auto t = m_task_by_id.find(tid);
    return t != m_task_by_id.end() && m_q.holdout.covers(t->second->info.op, t->second->info.spec_hash);
  }

  // A held-out task's summary may name an earlier run's case: its best kernel is then the best
  // verified native case the current run recorded for it, if any.
  Status current_run_best(int64_t tid, double sim) {
    KOPE_ASSIGN(Stmt st, m_db.prepare("SELECT c.id FROM cases c JOIN case_derived d ON d.case_id = c.id "
                                      "JOIN hardware h ON h.id = c.hardware_id WHERE c.task_id = ? AND c.run_id = ? "
                                      "AND c.verdict = 'correct' AND d.quarantine IN (0, 2) AND c.foreign_origin = 0 "
                                      "AND h.target = ? ORDER BY c.speedup_ref IS NULL, c.speedup_ref DESC, c.id DESC LIMIT 1"));
    st.bind(1, tid).bind(2, m_q.holdout.run_id).bind(3, m_q.target);
    KOPE_ASSIGN(bool row, st.step());
    if (!row) return {};
    Candidate& c = case_cand(st.int64(0), RetrievedItem::Kind::best_kernel);
    if (m_task_by_id.at(tid)->info.op != m_q.task.op) {
      c.raise("similarity", sim);
      c.similar_op = true;
    }
    return {};
  }

  // Lineage around the incumbent: its ancestors, what was already tried from it and from its
  // parent (alternative branches and their outcomes).
  Status lineage() {
    if (!m_q.incumbent_case) return {};
    std::optional<int64_t> cur = *m_q.incumbent_case;
    std::optional<int64_t> parent;
    for (int depth = 0; cur && depth <= k_lineage_ancestors; ++depth) {
      Candidate& c = case_cand(*cur);
      c.raise("lineage", depth == 0 ? 1.0 : 0.8 - 0.05 * depth);
      if (c.lineage == CaseLineage::none) {
        c.lineage = depth == 0 ? CaseLineage::incumbent : CaseLineage::ancestor;
        c.ancestor = depth;
      }
      KOPE_ASSIGN(Stmt st, m_db.prepare("SELECT parent_id FROM cases WHERE id = ?"));
      st.bind(1, *cur);
      KOPE_ASSIGN(bool row, st.step());
      cur = row ? st.opt_int64(0) : std::nullopt;
      if (depth == 0) parent = cur;
    }
    for (auto [from, relation, strength] : {std::tuple{m_q.incumbent_case, CaseLineage::tried_from, 0.9},
                                            std::tuple{parent, CaseLineage::sibling_branch, 0.5}}) {
      if (!from) continue;
      KOPE_ASSIGN(Stmt st, m_db.prepare("SELECT id FROM cases WHERE parent_id = ? ORDER BY id DESC LIMIT ?"));
      st.bind(1, *from).bind(2, k_lineage_children);
      for (;;) {
        KOPE_ASSIGN(bool row, st.step());
        if (!row) break;
        if (st.int64(0) == *m_q.incumbent_case) continue;
        Candidate& c = case_cand(st.int64(0));
        c.raise("lineage", strength);
        if (c.lineage == CaseLineage::none) c.lineage = relation;
      }
    }
    return {};
  }

  // Recent journals matching the query text, restricted to this op or category.
  Status lexical_journals() {
    KOPE_ASSIGN(auto hits, lexical_search(m_db, 0, m_lexical_text));
    size_t overall = 0, in_category = 0;
    for (const auto& h : hits) {
      auto t = m_task_by_id.find(h.task_id);
      bool near = t != m_task_by_id.end() && t->second->info.category == m_q.task.category;
      if (overall < k_lexical_journals) {
        ++overall;
      } else if (near && in_category < k_lexical_journals) {
        ++in_category;
      } else {
        continue;
      }
      case_cand(h.rowid).raise("lexical", h.bm25 / (h.bm25 + k_lexical_half));
    }
    return {};
  }

  // --- Load the candidates' facts in two queries.
  Status load_facts() {
    std::vector<int64_t> case_ids, lesson_seqs;
    for (const auto& [key, c] : m_cands) {
      if (c.kind == RetrievedItem::Kind::lesson) {
        lesson_seqs.push_back(c.lesson_seq);
      } else {
        case_ids.push_back(c.case_id);
        if (c.failed_case) case_ids.push_back(*c.failed_case);
      }
    }
    if (!case_ids.empty()) KOPE_TRY(load_case_facts(case_ids));
    if (!lesson_seqs.empty()) {
      KOPE_TRY(load_lesson_facts(lesson_seqs));
      KOPE_TRY(load_confirmed_here());
    }
    return {};
  }

  Status load_case_facts(const std::vector<int64_t>& case_ids) {
    KOPE_ASSIGN(Stmt st, m_db.prepare(
                             "SELECT c.id, c.task_id, t.op, t.category, h.target, tc.name, c.parent_id, c.stage, "
                             "c.optimisation, c.verdict, c.error_signature, c.message, c.speedup_ref, c.ratio, "
                             "c.outcome, d.downstream, d.quarantine, c.foreign_origin, c.code_id, tc.backend, "
                             "c.run_id, t.spec_hash "
                             "FROM cases c JOIN task t ON t.id = c.task_id JOIN hardware h ON h.id = c.hardware_id "
                             "JOIN toolchain tc ON tc.id = c.toolchain_id JOIN case_derived d ON d.case_id = c.id "
                             "WHERE c.id IN (" + m_db.json_ints("?") + ")"));
    st.bind(1, json_ids(case_ids));
    for (;;) {
      KOPE_ASSIGN(bool row, st.step());
      if (!row) return {};
      CaseFacts f;
      f.id = st.int64(0);
      f.task_id = st.int64(1);
      f.op = st.text(2);
      f.category = st.text(3);
      f.target = st.text(4);
      f.toolchain = st.text(5);
      f.parent_id = st.opt_int64(6);
      f.stage = static_cast<Stage>(std::clamp<int64_t>(st.int64(7), 0, 2));
      f.optimisation = st.text(8);
      KOPE_ASSIGN(f.verdict, stored_verdict(st.text(9)));
      f.signature = st.text(10);
      f.message = st.text(11);
      f.speedup_ref = st.opt_real(12);
      f.ratio = st.real(13);
      f.outcome = static_cast<Outcome>(std::clamp<int64_t>(st.int64(14), 0, 3));
      f.downstream = st.real(15);
      f.quarantine = stored_quarantine(st.int64(16));
      f.foreign_origin = st.int64(17) != 0;
      f.code_id = st.opt_int64(18);
      f.backend = st.text(19);
      f.run_id = st.text(20);
      f.spec_hash = st.text(21);
      m_facts[f.id] = std::move(f);
    }
  }

  Status load_lesson_facts(const std::vector<int64_t>& lesson_seqs) {
    KOPE_ASSIGN(Stmt st, m_db.prepare("SELECT seq, id, kind, title, text, error_signature, category, backend, target, "
                                      "toolchain, status, helpful, harmful, foreign_origin FROM lessons "
                                      "WHERE seq IN (" + m_db.json_ints("?") + ")"));
    st.bind(1, json_ids(lesson_seqs));
    for (;;) {
      KOPE_ASSIGN(bool row, st.step());
      if (!row) return {};
      LessonFacts lf;
      lf.seq = st.int64(0);
      Lesson& l = lf.lesson;
      l.id = st.text(1);
      l.kind = static_cast<LessonKind>(std::clamp<int64_t>(st.int64(2), 0, 3));
      l.title = st.text(3);
      l.text = st.text(4);
      l.error_signature = st.text(5);
      l.scope = {st.text(6), st.text(7), st.text(8), st.text(9)};
      l.status = static_cast<LessonStatus>(std::clamp<int64_t>(st.int64(10), 0, 3));
      l.helpful = static_cast<int>(st.int64(11));
      l.harmful = static_cast<int>(st.int64(12));
      l.foreign_origin = st.int64(13) != 0;
      m_lessons_by_seq[lf.seq] = std::move(lf);
    }
  }

  // The imported lessons (foreign_origin) this target has since confirmed or updated with its
  // own measurements: an upvote (helpful credit, or a reflection's vote) or an edit whose
  // source case is a native case of the query's target. A credit logged before credits named
  // their case carries the prompt in its payload; the prompt's case stands in.
  Status load_confirmed_here() {
    std::vector<std::string> imported;
    for (const auto& [seq, lf] : m_lessons_by_seq) {
      if (lf.lesson.foreign_origin) imported.push_back(lf.lesson.id);
    }
    if (imported.empty() || m_q.target.empty()) return {};
    std::vector<std::pair<std::string, int64_t>> by_case;        // lesson id, source case
    std::vector<std::pair<std::string, std::string>> by_prompt;  // lesson id, prompt id
    {
      KOPE_ASSIGN(Stmt st, m_db.prepare("SELECT lesson_id, source_case, payload FROM lesson_delta WHERE op IN ('upvote', "
                                        "'edit') AND lesson_id IN (" + m_db.json_texts("?") + ")"));
      st.bind(1, json_strings(imported));
      for (;;) {
        KOPE_ASSIGN(bool row, st.step());
        if (!row) break;
        if (auto c = st.opt_int64(1)) {
          by_case.emplace_back(st.text(0), *c);
          continue;
        }
        nlohmann::json payload = nlohmann::json::parse(st.text(2), nullptr, false);
        if (payload.is_object() && payload.contains("prompt") && payload["prompt"].is_string()) {
          by_prompt.emplace_back(st.text(0), payload["prompt"].get<std::string>());
        }
      }
    }
    if (!by_prompt.empty()) {
      std::vector<std::string> prompts;
      for (const auto& [lesson, prompt] : by_prompt) prompts.push_back(prompt);
      std::unordered_map<std::string, int64_t> case_of_prompt;
      KOPE_ASSIGN(Stmt st, m_db.prepare("SELECT id, case_id FROM prompt WHERE case_id IS NOT NULL AND id IN (" +
                                        m_db.json_texts("?") + ")"));
      st.bind(1, json_strings(prompts));
      for (;;) {
        KOPE_ASSIGN(bool row, st.step());
        if (!row) break;
        case_of_prompt[st.text(0)] = st.int64(1);
      }
      for (const auto& [lesson, prompt] : by_prompt) {
        if (auto it = case_of_prompt.find(prompt); it != case_of_prompt.end()) by_case.emplace_back(lesson, it->second);
      }
    }
    if (by_case.empty()) return {};
    std::vector<int64_t> cases;
    for (const auto& [lesson, c] : by_case) cases.push_back(c);
    std::unordered_set<int64_t> native;
    KOPE_ASSIGN(Stmt st, m_db.prepare("SELECT c.id FROM cases c JOIN hardware h ON h.id = c.hardware_id WHERE c.foreign_origin = 0 "
                                      "AND h.target = ?1 AND c.id IN (" + m_db.json_ints("?2") + ")"));
    st.bind(1, m_q.target).bind(2, json_ids(cases));
    for (;;) {
      KOPE_ASSIGN(bool row, st.step());
      if (!row) break;
      native.insert(st.int64(0));
    }
    for (const auto& [lesson, c] : by_case) {
      if (native.contains(c)) m_confirmed_here.insert(lesson);
    }
    return {};
  }

  // --- Learned values for the stage, and the items' helpful/harmful counts.
  Status load_values() {
    std::vector<std::string> ids;
    for (const auto& [key, c] : m_cands) {
      std::string id = key;
      if (c.kind == RetrievedItem::Kind::lesson) {
        auto it = m_lessons_by_seq.find(c.lesson_seq);
        id = it == m_lessons_by_seq.end() ? std::string() : "lesson:" + it->second.lesson.id;
      }
      if (!id.empty()) ids.push_back(id);
    }
    if (ids.empty()) return {};
    std::string arr = json_strings(ids);
    KOPE_ASSIGN(Stmt st, m_db.prepare("SELECT item_id, value, n FROM item_value WHERE stage = ? AND item_id IN "
                                      "(" + m_db.json_texts("?") + ")"));
    st.bind(1, static_cast<int>(m_q.stage)).bind(2, arr);
    for (;;) {
      KOPE_ASSIGN(bool row, st.step());
      if (!row) break;
      m_values[st.text(0)] = {st.real(1), st.int64(2)};
    }
    KOPE_ASSIGN(Stmt s2, m_db.prepare("SELECT item_id, helpful, harmful FROM item_stats WHERE item_id IN "
                                      "(" + m_db.json_texts("?") + ")"));
    s2.bind(1, arr);
    for (;;) {
      KOPE_ASSIGN(bool row, s2.step());
      if (!row) break;
      m_stats[s2.text(0)] = {s2.int64(1), s2.int64(2)};
    }
    KOPE_TRY(load_held_out_lessons());
    return load_lesson_evidence();
  }

  // The timings of each candidate lesson's correct source cases, and the intensities of its
  // source ops (RetrievedLesson's evidence and source_intensity).
  Status load_lesson_evidence() {
    std::vector<std::string> ids;
    for (const auto& [seq, lf] : m_lessons_by_seq) ids.push_back(lf.lesson.id);
    if (ids.empty()) return {};
    KOPE_ASSIGN(Stmt st, m_db.prepare("SELECT ls.lesson_id, c.verdict, c.timings, t.id, t.arithmetic_intensity "
                                      "FROM lesson_source ls JOIN cases c ON c.id = ls.case_id JOIN task t ON t.id = c.task_id "
                                      "WHERE ls.lesson_id IN (" + m_db.json_texts("?") + ")"));
    st.bind(1, json_strings(ids));
    std::set<std::pair<std::string, int64_t>> seen_tasks;
    for (;;) {
      KOPE_ASSIGN(bool row, st.step());
      if (!row) return {};
      std::string id = st.text(0);
      if (st.text(1) == "correct") m_lesson_timings[id].push_back(timings_from_json(st.text(2)));
      double ai = st.real(4);
      if (ai > 0 && seen_tasks.emplace(id, st.int64(3)).second) m_lesson_intensity[id].push_back(ai);
    }
  }

  // The candidate lessons distilled from a held-out op's cases of an earlier run (the
  // contamination guard leaves them out with the cases).
  Status load_held_out_lessons() {
    if (!m_q.holdout.active()) return {};
    std::vector<std::string> ids;
    for (const auto& [seq, lf] : m_lessons_by_seq) ids.push_back(lf.lesson.id);
    if (ids.empty()) return {};
    KOPE_ASSIGN(Stmt st, m_db.prepare("SELECT ls.lesson_id, t.op, t.spec_hash, c.run_id FROM lesson_source ls "
                                      "JOIN cases c ON c.id = ls.case_id JOIN task t ON t.id = c.task_id "
                                      "WHERE ls.lesson_id IN (" + m_db.json_texts("?") + ")"));
    st.bind(1, json_strings(ids));
    for (;;) {
      KOPE_ASSIGN(bool row, st.step());
      if (!row) return {};
      if (m_q.holdout.excludes(st.text(1), st.text(2), st.text(3))) m_held_out_lessons.insert(st.text(0));
    }
  }

  double value_part(const std::string& item_id, int64_t helpful, int64_t harmful) const {
    double v = stage_prior(m_q.stage);
    int64_t n = 0;
    if (auto it = m_values.find(item_id); it != m_values.end()) std::tie(v, n) = it->second;
    double v_norm = m_q.stage == Stage::refine ? v : 2.0 * v - 1.0;  // both in [-1, 1]
    double confidence = static_cast<double>(n) / (static_cast<double>(n) + 3.0);
    double helpfulness = (static_cast<double>(helpful) + 1.0) / (static_cast<double>(helpful + harmful) + 2.0);
    return v_norm * confidence + (helpfulness - 0.5);
  }

  // --- Score, and gather each item's facts. A case offered as a best kernel is not offered
  // again as a summary: its signals move over.
  std::vector<RetrievedItem> score() {
    for (auto& [key, c] : m_cands) {
      if (c.kind != RetrievedItem::Kind::case_summary) continue;
      auto k = m_cands.find("kernel:" + std::to_string(c.case_id));
      if (k == m_cands.end()) continue;
      for (const auto& [part, v] : c.parts) k->second.raise(part, v);
      if (k->second.lineage == CaseLineage::none) {
        k->second.lineage = c.lineage;
        k->second.ancestor = c.ancestor;
      }
      m_kernel_cases.insert(c.case_id);
    }
    std::vector<RetrievedItem> items;
    for (auto& [key, cand] : m_cands) {
      Candidate c = cand;
      RetrievedItem item;
      item.kind = c.kind;
      bool offered = c.kind == RetrievedItem::Kind::lesson ? score_lesson(c, item) : score_case(key, c, item, items.size());
      if (!offered) continue;
      double score = 0;
      for (const auto& [part, v] : c.parts) {
        double w = m_weights(part) * v;
        item.score_parts[part] = w;
        score += w;
      }
      item.score = score;
      items.push_back(std::move(item));
    }
    return items;
  }

  // A lesson's parts and facts; false when it is not offered (inactive, another backend).
  bool score_lesson(Candidate& c, RetrievedItem& item) const {
    auto it = m_lessons_by_seq.find(c.lesson_seq);
    if (it == m_lessons_by_seq.end()) return false;
    const Lesson& l = it->second.lesson;
    if (l.status != LessonStatus::active || m_held_out_lessons.contains(l.id)) return false;
    if (!l.scope.backend.empty() && !m_q.backend.empty() && l.scope.backend != m_q.backend) return false;
    item.id = "lesson:" + l.id;
    item.error_signature = l.error_signature;
    item.target = l.scope.target;
    // An imported lesson this target has confirmed or updated (load_confirmed_here) is this
    // machine's evidence now, unless its scope names other hardware.
    item.foreign = (!l.scope.target.empty() && l.scope.target != m_q.target) ||
                   (!l.scope.toolchain.empty() && !m_q.toolchain.empty() && l.scope.toolchain != m_q.toolchain) ||
                   (l.foreign_origin && !m_confirmed_here.contains(l.id));
    c.raise("exact", l.scope.category == m_q.task.category && !l.scope.category.empty() ? 1.0
                     : l.scope.category.empty()                                          ? 0.6
                                                                                         : 0.0);
    if (l.kind == LessonKind::fix && !m_q.last_error_signature.empty() && l.error_signature == m_q.last_error_signature) {
      c.raise("fix", 1.0);
    }
    if (l.kind == LessonKind::pitfall || l.kind == LessonKind::fix) c.raise("feasibility", 0.5);
    c.parts["value"] = value_part(item.id, l.helpful, l.harmful);
    item.learned = c.parts["value"];
    item.category = l.scope.category;
    item.lesson = retrieved_lesson(l);
    if (auto t = m_lesson_timings.find(l.id); t != m_lesson_timings.end()) set_lesson_evidence(*item.lesson, t->second);
    if (auto t = m_lesson_intensity.find(l.id); t != m_lesson_intensity.end()) item.lesson->source_intensity = t->second;
    return true;
  }

  // A case's parts and facts (as item number `index`); false when it is not offered (refuted,
  // shown as a kernel, a best kernel that is not native evidence).
  bool score_case(const std::string& key, Candidate& c, RetrievedItem& item, size_t index) {
    auto it = m_facts.find(c.case_id);
    if (it == m_facts.end()) return false;
    const CaseFacts& f = it->second;
    if (f.quarantine == QuarantineStatus::refuted) return false;  // never offered
    if (m_q.holdout.excludes(f.op, f.spec_hash, f.run_id)) return false;  // contamination guard
    if (c.kind == RetrievedItem::Kind::case_summary && m_kernel_cases.count(f.id)) return false;  // shown as kernel
    const bool foreign = f.target != m_q.target || (!m_q.toolchain.empty() && f.toolchain != m_q.toolchain) || f.foreign_origin;
    const bool evidence = !foreign && (f.quarantine == QuarantineStatus::none || f.quarantine == QuarantineStatus::verified) && f.verdict == eval::Verdict::correct;
    if (c.kind == RetrievedItem::Kind::best_kernel && (foreign || !evidence)) return false;
    item.id = key;
    item.case_id = f.id;
    item.failed_case = c.failed_case;
    if (f.verdict != eval::Verdict::correct) item.error_signature = f.signature;
    if (c.failed_case) {
      auto failed = m_facts.find(*c.failed_case);
      if (failed != m_facts.end()) item.error_signature = failed->second.signature;
    }
    item.foreign = foreign;
    item.target = f.target;
    item.op = f.op;
    item.quarantined = f.quarantine == QuarantineStatus::quarantined;
    item.category = f.category;
    c.raise("exact", f.op == m_q.task.op ? 1.0 : f.category == m_q.task.category ? 0.5 : 0.0);
    if (f.op == m_q.task.op) {
      c.raise("similarity", 1.0);
      item.structurally_close = true;
    } else if (auto t = m_task_by_id.find(f.task_id); t != m_task_by_id.end()) {
      c.raise("similarity", task_similarity(m_q.task, m_shape, t->second->info, t->second->shape));
      item.structurally_close = task_structurally_close(m_q.task, m_shape, t->second->info, t->second->shape);
    }
    if (evidence) {
      c.raise("graph", squash(f.downstream));
      if (f.speedup_ref && *f.speedup_ref > 0) c.raise("speed", squash(std::log2(1.0 + *f.speedup_ref)));
    }
    if (f.verdict == eval::Verdict::correct) c.raise("feasibility", 1.0);  // it compiled and passed
    if (!m_q.last_error_signature.empty() && f.signature == m_q.last_error_signature) c.raise("feasibility", 0.3);
    auto st = m_stats.find(key);
    c.parts["value"] = value_part(key, st == m_stats.end() ? 0 : st->second.first, st == m_stats.end() ? 0 : st->second.second);
    item.learned = c.parts["value"];
    item.kase = case_facts(f, c, index);
    return true;
  }

  // What a case item is made of: a best kernel (its code read after the cut), a fix, or a case
  // summary (its journal read after the cut).
  RetrievedCase case_facts(const CaseFacts& f, const Candidate& c, size_t index) {
    RetrievedCase k;
    k.stage = f.stage;
    k.verdict = f.verdict;
    k.outcome = f.outcome;
    k.ratio = f.ratio;
    k.speedup_ref = f.speedup_ref;
    k.parent_id = f.parent_id;
    k.optimisation = f.optimisation;
    k.error_signature = f.signature;
    k.backend = f.backend;
    k.lineage = c.lineage;
    k.ancestor = c.ancestor;
    k.similar_op = c.similar_op;
    if (c.kind == RetrievedItem::Kind::best_kernel) {
      // The fastest by recorded timings, taken at other times and loads; the incumbent is
      // decided side by side, so the two may differ and the reader must know which is which.
      if (m_q.incumbent_case && f.id != *m_q.incumbent_case && f.op == m_q.task.op) k.other_incumbent = *m_q.incumbent_case;
      m_kernels_to_load.emplace_back(index, f.code_id);
      return k;
    }
    if (c.failed_case) {
      if (auto failed = m_facts.find(*c.failed_case); failed != m_facts.end()) {
        k.failed_signature = failed->second.signature;
        k.failed_message = failed->second.message;
      }
    }
    m_journal_of[index] = f.id;
    return k;
  }

  // --- The cut: best first (ties by id, for determinism), at most q.limit; journals and kernel
  // sources are read only for the items that made it.
  Result<std::vector<RetrievedItem>> finish(std::vector<RetrievedItem> items) {
    std::vector<size_t> order(items.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
      if (items[a].score != items[b].score) return items[a].score > items[b].score;
      return items[a].id < items[b].id;
    });
    size_t limit = m_q.limit > 0 ? static_cast<size_t>(m_q.limit) : order.size();
    if (order.size() > limit) order.resize(limit);
    KOPE_ASSIGN(auto journals, load_journals(order));
    std::unordered_map<size_t, std::optional<int64_t>> code_of(m_kernels_to_load.begin(), m_kernels_to_load.end());
    std::vector<RetrievedItem> out;
    out.reserve(order.size());
    for (size_t i : order) {
      RetrievedItem item = std::move(items[i]);
      if (auto j = m_journal_of.find(i); j != m_journal_of.end()) {
        if (auto text = journals.find(j->second); text != journals.end()) item.kase->journal = text->second;
      }
      if (auto k = code_of.find(i); k != code_of.end() && k->second) KOPE_TRY(load_kernel_source(item, *k->second));
      out.push_back(std::move(item));
    }
    return out;
  }

  // The journals of the items in `order` that show one, by case id.
  Result<std::unordered_map<int64_t, std::string>> load_journals(const std::vector<size_t>& order) {
    std::unordered_map<int64_t, std::string> journals;
    std::vector<int64_t> ids;
    for (size_t i : order) {
      if (auto j = m_journal_of.find(i); j != m_journal_of.end()) ids.push_back(j->second);
    }
    if (ids.empty()) return journals;
    KOPE_ASSIGN(Stmt st, m_db.prepare("SELECT case_id, text FROM journal WHERE case_id IN (" + m_db.json_ints("?") + ")"));
    st.bind(1, json_ids(ids));
    for (;;) {
      KOPE_ASSIGN(bool row, st.step());
      if (!row) return journals;
      journals[st.int64(0)] = st.text(1);
    }
  }

  // The kernel's whole source into the item's facts (left unset when its blob is missing).
  Status load_kernel_source(RetrievedItem& item, int64_t code_id) {
    KOPE_ASSIGN(Stmt st, m_db.prepare("SELECT raw_size, data FROM blob WHERE id = ?"));
    st.bind(1, code_id);
    KOPE_ASSIGN(bool row, st.step());
    if (!row) return {};
    KOPE_ASSIGN(std::string code, decompress(st.blob(1), static_cast<size_t>(st.int64(0))));
    item.kase->code = std::move(code);
    return {};
  }

  RetrievalStore& m_store;
  Db& m_db;
  const RetrievalQuery& m_q;
  const Weights m_weights;
  const std::string m_lexical_text;
  std::chrono::steady_clock::time_point m_t_prev = std::chrono::steady_clock::now();

  spec::SignatureShape m_shape;
  std::vector<int64_t> m_op_tasks;
  std::vector<std::pair<double, int64_t>> m_similar;  // similarity, task id
  std::unordered_map<int64_t, const RetrievalStore::TaskRow*> m_task_by_id;
  std::unordered_map<std::string, Candidate> m_cands;  // keyed by item id
  std::unordered_map<int64_t, CaseFacts> m_facts;
  std::unordered_map<int64_t, LessonFacts> m_lessons_by_seq;
  std::unordered_map<std::string, std::pair<double, int64_t>> m_values;  // value, n
  std::unordered_map<std::string, std::pair<int64_t, int64_t>> m_stats;  // helpful, harmful
  std::unordered_set<int64_t> m_kernel_cases;
  std::unordered_set<std::string> m_held_out_lessons;  // lesson ids
  std::unordered_map<std::string, std::vector<std::vector<CaseTimingRecord>>> m_lesson_timings;  // by lesson id
  std::unordered_map<std::string, std::vector<double>> m_lesson_intensity;                       // by lesson id
  std::unordered_set<std::string> m_confirmed_here;     // imported lesson ids this target confirmed
  std::vector<std::pair<size_t, std::optional<int64_t>>> m_kernels_to_load;  // item index, code id
  std::unordered_map<size_t, int64_t> m_journal_of;    // item index -> case id
};

RetrievalStore::RetrievalStore(SharedDb& shared) : m_shared(shared), m_db(&shared.db()) {
  m_shared.on_reset([this] {
    m_tasks.clear();
    m_tasks_max_id = 0;
  });
}

Result<std::vector<RetrievedItem>> RetrievalStore::retrieve(const RetrievalQuery& q) {
  std::lock_guard lock(m_shared.mutex());
  KOPE_TRY(refresh_tasks_locked());
  return RetrievalEngine(*this, q).run();
}

}  // namespace kope::memory
