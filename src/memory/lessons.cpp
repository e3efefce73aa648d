// LessonStore: lessons (changed only through logged deltas), learned values, the retrieval log and credit.
#include <algorithm>
#include <cmath>
#include <unordered_map>

#include <nlohmann/json.hpp>

#include "memory/schema.h"
#include "memory/case_store.h"
#include "memory/lesson_store.h"
#include "memory/retrieval_store.h"
#include "memory/text.h"
#include "util/hash.h"
#include "util/strings.h"
#include "util/time.h"

namespace kope::memory {

namespace {

using nlohmann::json;

constexpr size_t k_max_lesson_title = 200;
constexpr size_t k_max_lesson_text = 4000;

std::string lesson_body(const Lesson& l) { return l.title + " " + l.text + " " + l.error_signature; }

bool valid_lesson_id(std::string_view id) {
  if (id.empty() || id.size() > 64) return false;
  return std::all_of(id.begin(), id.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.' || c == ':';
  });
}

constexpr const char* k_lesson_columns =
    "SELECT l.seq, l.id, l.kind, l.title, l.text, l.error_signature, l.category, l.backend, l.target, "
    "l.toolchain, l.status, l.merged_into, l.helpful, l.harmful, o.instance, l.foreign_origin, l.valid_from, "
    "l.valid_to FROM lessons l JOIN origin o ON o.id = l.origin_id ";

Lesson lesson_from_row(const Stmt& st) {
  Lesson l;
  l.id = st.text(1);
  l.kind = static_cast<LessonKind>(std::clamp<int64_t>(st.int64(2), 0, 3));
  l.title = st.text(3);
  l.text = st.text(4);
  l.error_signature = st.text(5);
  l.scope.category = st.text(6);
  l.scope.backend = st.text(7);
  l.scope.target = st.text(8);
  l.scope.toolchain = st.text(9);
  l.status = static_cast<LessonStatus>(std::clamp<int64_t>(st.int64(10), 0, 3));
  l.merged_into = st.text(11);
  l.helpful = static_cast<int>(st.int64(12));
  l.harmful = static_cast<int>(st.int64(13));
  l.origin = st.text(14);
  l.foreign_origin = st.int64(15) != 0;
  l.valid_from = st.text(16);
  l.valid_to = st.text(17);
  return l;
}

bool helpful_reward(Stage stage, double reward) { return stage == Stage::refine ? reward > 0 : reward >= 0.5; }

}  // namespace

LessonStore::LessonStore(SharedDb& shared, CaseStore& cases) : m_shared(shared), m_db(&shared.db()), m_cases(cases) {}

// ----------------------------------------------------------------------------------------------
// Reading lessons

Result<std::optional<std::string>> LessonStore::resolve_lesson_locked(const std::string& id) {
  {
    KOPE_ASSIGN(Stmt st, m_db->prepare("SELECT 1 FROM lessons WHERE id = ?"));
    st.bind(1, id);
    KOPE_ASSIGN(bool row, st.step());
    if (row) return std::optional<std::string>{id};
  }
  KOPE_ASSIGN(Stmt st, m_db->prepare("SELECT lesson_id FROM lesson_alias WHERE alias = ?"));
  st.bind(1, id);
  KOPE_ASSIGN(bool row, st.step());
  if (row) return std::optional<std::string>{st.text(0)};
  return std::optional<std::string>{};
}

Result<std::map<std::string, double>> LessonStore::item_values_locked(const std::string& item_id) {
  std::map<std::string, double> out;
  KOPE_ASSIGN(Stmt st, m_db->prepare("SELECT stage, value FROM item_value WHERE item_id = ?"));
  st.bind(1, item_id);
  for (;;) {
    KOPE_ASSIGN(bool row, st.step());
    if (!row) break;
    out[std::string(stage_name(static_cast<Stage>(std::clamp<int64_t>(st.int64(0), 0, 2))))] = st.real(1);
  }
  return out;
}

Result<std::vector<Lesson>> LessonStore::select_lessons_locked(const std::string& where_sql,
                                                               const std::vector<SqlValue>& params,
                                                               const std::string& order_limit) {
  std::vector<Lesson> out;
  {
    KOPE_ASSIGN(Stmt st, m_db->prepare(std::string(k_lesson_columns) + where_sql + " " + order_limit));
    st.bind_all(params);
    for (;;) {
      KOPE_ASSIGN(bool row, st.step());
      if (!row) break;
      out.push_back(lesson_from_row(st));
    }
  }
  for (auto& l : out) {
    KOPE_ASSIGN(l.value, item_values_locked("lesson:" + l.id));
    KOPE_ASSIGN(Stmt st, m_db->prepare("SELECT case_id FROM lesson_source WHERE lesson_id = ? ORDER BY case_id"));
    st.bind(1, l.id);
    for (;;) {
      KOPE_ASSIGN(bool row, st.step());
      if (!row) break;
      l.source_cases.push_back(st.int64(0));
    }
  }
  return out;
}

Result<std::optional<Lesson>> LessonStore::get_lesson_locked(const std::string& id) {
  KOPE_ASSIGN(auto resolved, resolve_lesson_locked(id));
  if (!resolved) return std::optional<Lesson>{};
  KOPE_ASSIGN(auto rows, select_lessons_locked("WHERE l.id = ?1", {SqlValue{*resolved}}, ""));
  if (rows.empty()) return std::optional<Lesson>{};
  return std::optional<Lesson>{std::move(rows.front())};
}

Result<std::optional<Lesson>> LessonStore::get_lesson(const std::string& id) {
  std::lock_guard lock(m_shared.mutex());
  return get_lesson_locked(id);
}

Result<std::vector<Lesson>> LessonStore::lessons(const LessonScope& f) {
  std::lock_guard lock(m_shared.mutex());
  return select_lessons_locked(
      "WHERE l.status = 0 AND (l.category = '' OR ?1 = '' OR l.category = ?1) "
      "AND (l.backend = '' OR ?2 = '' OR l.backend = ?2) AND (l.target = '' OR ?3 = '' OR l.target = ?3) "
      "AND (l.toolchain = '' OR ?4 = '' OR l.toolchain = ?4)",
      {SqlValue{f.category}, SqlValue{f.backend}, SqlValue{f.target}, SqlValue{f.toolchain}},
      "ORDER BY l.helpful - l.harmful DESC, l.seq");
}

Result<std::vector<Lesson>> LessonStore::find_lessons(const LessonFilter& f) {
  std::lock_guard lock(m_shared.mutex());
  std::string where =
      "WHERE (l.category = '' OR ?1 = '' OR l.category = ?1) "
      "AND (l.backend = '' OR ?2 = '' OR l.backend = ?2) AND (l.target = '' OR ?3 = '' OR l.target = ?3) "
      "AND (l.toolchain = '' OR ?4 = '' OR l.toolchain = ?4)";
  std::vector<SqlValue> params{f.scope.category, f.scope.backend, f.scope.target, f.scope.toolchain};
  if (f.kind) {
    params.emplace_back(int64_t{static_cast<int>(*f.kind)});
    where += fmt::format(" AND l.kind = ?{}", params.size());
  }
  if (f.status) {
    params.emplace_back(int64_t{static_cast<int>(*f.status)});
    where += fmt::format(" AND l.status = ?{}", params.size());
  }
  if (f.text.empty()) {
    return select_lessons_locked(where, params,
                                 f.limit > 0 ? fmt::format("ORDER BY l.seq LIMIT {}", f.limit) : "ORDER BY l.seq");
  }
  // A text search: the BM25 ranking decides the order.
  std::unordered_map<int64_t, size_t> rank_of;
  std::string ids = "[";
  {
    KOPE_ASSIGN(std::vector<int64_t> ranked, rank_lessons_by_text(*m_db, f.text));
    if (ranked.empty()) return std::vector<Lesson>{};
    for (int64_t seq : ranked) {
      ids += (rank_of.empty() ? "" : ",") + std::to_string(seq);
      rank_of[seq] = rank_of.size();
    }
  }
  ids += "]";
  params.emplace_back(ids);
  where += fmt::format(" AND l.seq IN ({})", m_db->json_ints(fmt::format("?{}", params.size())));
  KOPE_ASSIGN(auto found, select_lessons_locked(where, params, "ORDER BY l.seq"));
  std::unordered_map<std::string, size_t> order;
  {
    KOPE_ASSIGN(Stmt st, m_db->prepare(fmt::format("SELECT id, seq FROM lessons WHERE seq IN ({})", m_db->json_ints("?"))));
    st.bind(1, ids);
    for (;;) {
      KOPE_ASSIGN(bool row, st.step());
      if (!row) break;
      order[st.text(0)] = rank_of[st.int64(1)];
    }
  }
  std::stable_sort(found.begin(), found.end(),
                   [&](const Lesson& a, const Lesson& b) { return order[a.id] < order[b.id]; });
  if (f.limit > 0 && found.size() > static_cast<size_t>(f.limit)) found.resize(static_cast<size_t>(f.limit));
  return found;
}

Result<std::vector<LessonLogEntry>> LessonStore::lesson_history(const std::string& id) {
  std::lock_guard lock(m_shared.mutex());
  KOPE_ASSIGN(auto resolved, resolve_lesson_locked(id));
  if (!resolved) return fail(ErrorKind::not_found, "no lesson '{}'", id);
  KOPE_ASSIGN(Stmt st, m_db->prepare("SELECT seq, lesson_id, op, reason, source_case, payload, helpful_after, "
                                     "harmful_after, status_after, created_at FROM lesson_delta "
                                     "WHERE lesson_id = ? ORDER BY seq"));
  st.bind(1, *resolved);
  std::vector<LessonLogEntry> out;
  for (;;) {
    KOPE_ASSIGN(bool row, st.step());
    if (!row) break;
    LessonLogEntry e;
    e.seq = st.int64(0);
    e.lesson_id = st.text(1);
    e.op = st.text(2);
    e.reason = st.text(3);
    e.source_case = st.opt_int64(4);
    e.payload = st.text(5);
    e.helpful_after = static_cast<int>(st.int64(6));
    e.harmful_after = static_cast<int>(st.int64(7));
    e.status_after = st.text(8);
    e.created_at = st.text(9);
    out.push_back(std::move(e));
  }
  return out;
}

// ----------------------------------------------------------------------------------------------
// Writing lessons

Status LessonStore::log_delta_locked(const std::string& lesson_id, std::string_view op, const std::string& reason,
                                     std::optional<int64_t> source_case, const std::string& payload) {
  int64_t helpful = 0, harmful = 0, status = 0;
  {
    KOPE_ASSIGN(Stmt st, m_db->prepare("SELECT helpful, harmful, status FROM lessons WHERE id = ?"));
    st.bind(1, lesson_id);
    KOPE_ASSIGN(bool row, st.step());
    if (!row) return fail(ErrorKind::internal, "lesson {} vanished while logging a delta", lesson_id);
    helpful = st.int64(0);
    harmful = st.int64(1);
    status = st.int64(2);
  }
  KOPE_ASSIGN(Stmt ins, m_db->prepare("INSERT INTO lesson_delta(lesson_id, op, reason, source_case, payload, "
                                      "helpful_after, harmful_after, status_after, created_at) "
                                      "VALUES (?,?,?,?,?,?,?,?,?)"));
  ins.bind(1, lesson_id).bind(2, op).bind(3, reason).bind(4, source_case).bind(5, payload);
  ins.bind(6, helpful).bind(7, harmful);
  ins.bind(8, lesson_status_name(static_cast<LessonStatus>(std::clamp<int64_t>(status, 0, 3))));
  ins.bind(9, util::now_iso8601());
  return ins.run();
}

Status LessonStore::index_lesson_locked(int64_t seq, bool remove, const Lesson& l) {
  m_shared.note_terms_locked(1, lesson_body(l), remove ? -1 : +1);
  return m_shared.index_search_locked(
      1, seq, lesson_body(l),
      lesson_search_tags(static_cast<int>(l.kind), l.scope.category, l.scope.backend, l.scope.target), remove);
}

Status LessonStore::add_lesson_sources_locked(const std::string& lesson_id, const std::vector<int64_t>& case_ids) {
  for (int64_t cid : case_ids) {
    KOPE_ASSIGN(bool exists, m_cases.exists_locked(cid));
    if (!exists) return fail(ErrorKind::not_found, "lesson {}: source case {} does not exist", lesson_id, cid);
    KOPE_ASSIGN(Stmt st, m_db->prepare("INSERT OR IGNORE INTO lesson_source(lesson_id, case_id) VALUES (?, ?)"));
    KOPE_TRY(st.bind(1, lesson_id).bind(2, cid).run());
  }
  return {};
}

Result<std::optional<std::pair<std::string, double>>> LessonStore::find_duplicate_locked(const Lesson& l) {
  std::string norm = normalised_text(l.title + " " + l.text);
  auto tokens = token_set(norm);
  KOPE_ASSIGN(Stmt st, m_db->prepare("SELECT id, norm FROM lessons WHERE kind = ? AND category = ? AND backend = ? "
                                     "AND target = ? AND toolchain = ? AND error_signature = ? AND status IN (0, 1) "
                                     "ORDER BY seq"));
  st.bind(1, static_cast<int>(l.kind)).bind(2, l.scope.category).bind(3, l.scope.backend);
  st.bind(4, l.scope.target).bind(5, l.scope.toolchain).bind(6, l.error_signature);
  std::optional<std::pair<std::string, double>> best;
  for (;;) {
    KOPE_ASSIGN(bool row, st.step());
    if (!row) break;
    std::string other = st.text(1);
    double sim = other == norm ? 1.0 : jaccard(tokens, token_set(other));
    if (sim >= k_lesson_near_duplicate && (!best || sim > best->second)) best = std::pair{st.text(0), sim};
  }
  return best;
}

Result<std::string> LessonStore::insert_lesson_locked(const Lesson& in, const std::string& proposed_id,
                                                      int64_t origin_id, bool foreign, const std::string& reason,
                                                      std::optional<int64_t> source_case, const std::string& payload) {
  Lesson l = in;
  l.title = clip_text(l.title, k_max_lesson_title);
  l.text = clip_text(l.text, k_max_lesson_text);
  std::string norm = normalised_text(l.title + " " + l.text);
  std::string id = proposed_id;
  if (id.empty()) {
    std::string key = fmt::format("{}|{}|{}|{}|{}|{}|{}", static_cast<int>(l.kind), l.scope.category, l.scope.backend,
                                  l.scope.target, l.scope.toolchain, l.error_signature, norm);
    id = "L" + util::sha256_hex(key).substr(0, 10);
  } else if (!valid_lesson_id(id)) {
    return fail(ErrorKind::usage, "invalid lesson id '{}' (use letters, digits, '_', '-', '.', ':')", id);
  }
  for (int n = 2;; ++n) {
    KOPE_ASSIGN(auto taken, resolve_lesson_locked(id));
    if (!taken) break;
    if (!proposed_id.empty()) return *taken;  // an id that is already known: nothing to add
    id = fmt::format("{}-{}", id.substr(0, id.find('-')), n);
  }
  if (l.valid_from.empty()) l.valid_from = util::now_iso8601();
  {
    KOPE_ASSIGN(Stmt st, m_db->prepare(
                             "INSERT INTO lessons(id, kind, title, text, norm, error_signature, category, backend, "
                             "target, toolchain, status, merged_into, helpful, harmful, origin_id, foreign_origin, "
                             "valid_from, valid_to) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)"));
    st.bind(1, id).bind(2, static_cast<int>(l.kind)).bind(3, l.title).bind(4, l.text).bind(5, norm);
    st.bind(6, l.error_signature).bind(7, l.scope.category).bind(8, l.scope.backend).bind(9, l.scope.target);
    st.bind(10, l.scope.toolchain).bind(11, static_cast<int>(l.status));
    if (l.merged_into.empty()) {
      st.bind_null(12);
    } else {
      st.bind(12, l.merged_into);
    }
    st.bind(13, l.helpful).bind(14, l.harmful).bind(15, origin_id).bind(16, static_cast<int64_t>(foreign));
    st.bind(17, l.valid_from).bind(18, l.valid_to);
    KOPE_TRY(st.run());
  }
  int64_t seq = m_db->last_insert_rowid();
  KOPE_TRY(add_lesson_sources_locked(id, l.source_cases));
  for (const auto& [stage_text, v] : l.value) {
    auto stage = parse_stage(stage_text);
    if (!stage || !std::isfinite(v)) continue;
    KOPE_ASSIGN(Stmt st, m_db->prepare("INSERT INTO item_value(item_id, stage, value, n) VALUES (?, ?, ?, 0) "
                                       "ON CONFLICT(item_id, stage) DO UPDATE SET value = excluded.value, n = excluded.n"));
    KOPE_TRY(st.bind(1, "lesson:" + id).bind(2, static_cast<int>(*stage)).bind(3, v).run());
  }
  KOPE_TRY(index_lesson_locked(seq, false, l));
  KOPE_TRY(log_delta_locked(id, "add", reason, source_case, payload));
  return id;
}

Status LessonStore::maybe_deprecate_locked(const std::string& id) {
  int64_t helpful = 0, harmful = 0, status = 0;
  {
    KOPE_ASSIGN(Stmt st, m_db->prepare("SELECT helpful, harmful, status FROM lessons WHERE id = ?"));
    st.bind(1, id);
    KOPE_ASSIGN(bool row, st.step());
    if (!row) return {};
    helpful = st.int64(0);
    harmful = st.int64(1);
    status = st.int64(2);
  }
  if (status != static_cast<int>(LessonStatus::active)) return {};
  if (harmful < k_deprecate_min_harmful || harmful < 2 * (helpful + 1)) return {};
  {
    KOPE_ASSIGN(Stmt st, m_db->prepare("UPDATE lessons SET status = ?, valid_to = ? WHERE id = ?"));
    KOPE_TRY(st.bind(1, static_cast<int>(LessonStatus::deprecated)).bind(2, util::now_iso8601()).bind(3, id).run());
  }
  json payload{{"status", "deprecated"}, {"helpful", helpful}, {"harmful", harmful}};
  return log_delta_locked(id, "deprecate",
                          fmt::format("automatic: harmful {} >= {} and >= 2 x (helpful {} + 1)", harmful,
                                      k_deprecate_min_harmful, helpful),
                          std::nullopt, payload.dump());
}

Status LessonStore::release_quarantined_locked(int64_t case_id, const std::string& note) {
  std::vector<std::string> ids;
  {
    KOPE_ASSIGN(Stmt st, m_db->prepare("SELECT l.id FROM lessons l JOIN lesson_source s ON s.lesson_id = l.id "
                                       "WHERE s.case_id = ? AND l.status = ?"));
    st.bind(1, case_id).bind(2, static_cast<int>(LessonStatus::quarantined));
    for (;;) {
      KOPE_ASSIGN(bool row, st.step());
      if (!row) break;
      ids.push_back(st.text(0));
    }
  }
  for (const auto& lid : ids) {
    KOPE_ASSIGN(Stmt st, m_db->prepare("UPDATE lessons SET status = ? WHERE id = ?"));
    KOPE_TRY(st.bind(1, static_cast<int>(LessonStatus::active)).bind(2, lid).run());
    json payload{{"status", "active"}, {"verified_case", case_id}};
    KOPE_TRY(log_delta_locked(lid, "edit", fmt::format("source case {} verified: {}", case_id, note), case_id,
                              payload.dump()));
  }
  return {};
}

Result<std::string> LessonStore::apply_locked(const LessonDelta& delta) {
  using Op = LessonDelta::Op;
  std::vector<int64_t> sources = delta.lesson.source_cases;
  if (delta.source_case) sources.push_back(*delta.source_case);

  if (delta.op == Op::add) {
    Lesson l = delta.lesson;
    l.source_cases = sources;
    if (util::trim(l.title).empty() && util::trim(l.text).empty()) {
      return fail(ErrorKind::usage, "a lesson needs a title or a text");
    }
    if (normalised_text(l.title + " " + l.text).empty()) {
      return fail(ErrorKind::usage, "lesson '{}' has no words to index", l.title);
    }
    if (l.status != LessonStatus::active && l.status != LessonStatus::quarantined) {
      return fail(ErrorKind::usage, "a lesson is added active or quarantined, not {}", lesson_status_name(l.status));
    }
    if (!delta.lesson_id.empty()) {
      KOPE_ASSIGN(auto known, resolve_lesson_locked(delta.lesson_id));
      if (known) return *known;  // idempotent: the proposed id is already here
    }
    KOPE_ASSIGN(auto dup, find_duplicate_locked(l));
    if (dup) {
      KOPE_TRY(add_lesson_sources_locked(dup->first, sources));
      if (!delta.lesson_id.empty() && valid_lesson_id(delta.lesson_id)) {
        KOPE_ASSIGN(Stmt st, m_db->prepare("INSERT OR IGNORE INTO lesson_alias(alias, lesson_id) VALUES (?, ?)"));
        KOPE_TRY(st.bind(1, delta.lesson_id).bind(2, dup->first).run());
      }
      json payload{{"duplicate", dup->second >= 1.0 ? "exact" : "near"}, {"similarity", dup->second},
                   {"title", l.title}, {"text", l.text}, {"sources", sources}};
      if (!delta.lesson_id.empty()) payload["proposed_id"] = delta.lesson_id;
      KOPE_TRY(log_delta_locked(dup->first, "add",
                                fmt::format("merged as a duplicate (similarity {:.2f}){}{}", dup->second,
                                            delta.reason.empty() ? "" : ": ", delta.reason),
                                delta.source_case, payload.dump()));
      return dup->first;
    }
    // Lessons drawn from a quarantined case wait in quarantine too.
    for (int64_t cid : sources) {
      KOPE_ASSIGN(auto quarantine, m_cases.quarantine_of_locked(cid));
      if (quarantine_holds_back(quarantine.value_or(QuarantineStatus::none))) {
        l.status = LessonStatus::quarantined;
      }
    }
    l.helpful = 0;
    l.harmful = 0;
    l.merged_into.clear();
    l.valid_to.clear();
    json payload{{"title", l.title}, {"text", l.text}, {"kind", lesson_kind_name(l.kind)},
                 {"scope", {{"category", l.scope.category}, {"backend", l.scope.backend},
                            {"target", l.scope.target}, {"toolchain", l.scope.toolchain}}},
                 {"error_signature", l.error_signature}, {"status", lesson_status_name(l.status)}};
    return insert_lesson_locked(l, delta.lesson_id, m_shared.origin_id(), false, delta.reason, delta.source_case,
                                payload.dump());
  }

  KOPE_ASSIGN(auto resolved, resolve_lesson_locked(delta.lesson_id));
  if (!resolved) return fail(ErrorKind::not_found, "no lesson '{}'", delta.lesson_id);
  const std::string id = *resolved;
  KOPE_ASSIGN(auto current_opt, get_lesson_locked(id));
  if (!current_opt) return fail(ErrorKind::not_found, "no lesson '{}'", delta.lesson_id);
  Lesson current = std::move(*current_opt);
  int64_t seq = 0;
  {
    KOPE_ASSIGN(auto s, m_db->query_int(fmt::format("SELECT seq FROM lessons WHERE id = '{}'", id)));
    seq = s.value_or(0);
  }
  if (current.status == LessonStatus::merged && delta.op != Op::merge) {
    return fail(ErrorKind::usage, "lesson {} was merged into {}; change that lesson instead", id, current.merged_into);
  }
  KOPE_TRY(add_lesson_sources_locked(id, sources));

  switch (delta.op) {
    case Op::add: break;  // handled above
    case Op::edit: {
      Lesson next = current;
      if (!delta.lesson.title.empty()) next.title = clip_text(delta.lesson.title, k_max_lesson_title);
      if (!delta.lesson.text.empty()) next.text = clip_text(delta.lesson.text, k_max_lesson_text);
      if (!delta.lesson.error_signature.empty()) next.error_signature = delta.lesson.error_signature;
      if (normalised_text(next.title + " " + next.text).empty()) {
        return fail(ErrorKind::usage, "lesson {}: the edit leaves no words", id);
      }
      KOPE_TRY(index_lesson_locked(seq, true, current));
      {
        KOPE_ASSIGN(Stmt st, m_db->prepare("UPDATE lessons SET title = ?, text = ?, norm = ?, error_signature = ? "
                                           "WHERE id = ?"));
        st.bind(1, next.title).bind(2, next.text).bind(3, normalised_text(next.title + " " + next.text));
        KOPE_TRY(st.bind(4, next.error_signature).bind(5, id).run());
      }
      KOPE_TRY(index_lesson_locked(seq, false, next));
      json payload{{"old", {{"title", current.title}, {"text", current.text}, {"error_signature", current.error_signature}}},
                   {"new", {{"title", next.title}, {"text", next.text}, {"error_signature", next.error_signature}}}};
      KOPE_TRY(log_delta_locked(id, "edit", delta.reason, delta.source_case, payload.dump()));
      return id;
    }
    case Op::upvote:
    case Op::downvote: {
      bool up = delta.op == Op::upvote;
      KOPE_ASSIGN(Stmt st, m_db->prepare(up ? "UPDATE lessons SET helpful = helpful + 1 WHERE id = ?"
                                            : "UPDATE lessons SET harmful = harmful + 1 WHERE id = ?"));
      KOPE_TRY(st.bind(1, id).run());
      KOPE_TRY(log_delta_locked(id, up ? "upvote" : "downvote", delta.reason, delta.source_case, "{}"));
      if (!up) KOPE_TRY(maybe_deprecate_locked(id));
      return id;
    }
    case Op::deprecate: {
      if (current.status == LessonStatus::deprecated) return id;  // already: nothing changes
      KOPE_ASSIGN(Stmt st, m_db->prepare("UPDATE lessons SET status = ?, valid_to = ? WHERE id = ?"));
      KOPE_TRY(st.bind(1, static_cast<int>(LessonStatus::deprecated)).bind(2, util::now_iso8601()).bind(3, id).run());
      json payload{{"old_status", lesson_status_name(current.status)}, {"status", "deprecated"}};
      KOPE_TRY(log_delta_locked(id, "deprecate", delta.reason, delta.source_case, payload.dump()));
      return id;
    }
    case Op::merge: {
      KOPE_ASSIGN(auto into_resolved, resolve_lesson_locked(delta.merge_into));
      if (!into_resolved) return fail(ErrorKind::not_found, "merge: no lesson '{}' to merge into", delta.merge_into);
      const std::string into = *into_resolved;
      if (into == id) return fail(ErrorKind::usage, "merge: lesson {} cannot be merged into itself", id);
      if (current.status == LessonStatus::merged) {
        if (current.merged_into == into) return into;  // already done
        return fail(ErrorKind::usage, "lesson {} was already merged into {}", id, current.merged_into);
      }
      KOPE_ASSIGN(auto target_opt, get_lesson_locked(into));
      if (!target_opt || target_opt->status == LessonStatus::merged || target_opt->status == LessonStatus::deprecated) {
        return fail(ErrorKind::usage, "merge: lesson {} is {}; merge into an active lesson", into,
                    target_opt ? lesson_status_name(target_opt->status) : "missing");
      }
      {
        KOPE_ASSIGN(Stmt st, m_db->prepare("UPDATE lessons SET status = ?, merged_into = ?, valid_to = ? WHERE id = ?"));
        KOPE_TRY(st.bind(1, static_cast<int>(LessonStatus::merged)).bind(2, into).bind(3, util::now_iso8601()).bind(4, id).run());
      }
      {
        KOPE_ASSIGN(Stmt st, m_db->prepare("UPDATE lessons SET helpful = helpful + ?, harmful = harmful + ? WHERE id = ?"));
        KOPE_TRY(st.bind(1, current.helpful).bind(2, current.harmful).bind(3, into).run());
      }
      KOPE_TRY(add_lesson_sources_locked(into, current.source_cases));
      json from_payload{{"into", into}};
      json into_payload{{"from", id}, {"helpful_added", current.helpful}, {"harmful_added", current.harmful},
                        {"sources_added", current.source_cases}};
      KOPE_TRY(log_delta_locked(id, "merge", delta.reason, delta.source_case, from_payload.dump()));
      KOPE_TRY(log_delta_locked(into, "merge", delta.reason, delta.source_case, into_payload.dump()));
      return into;
    }
  }
  return fail(ErrorKind::internal, "unknown lesson delta");
}

Result<std::string> LessonStore::apply(const LessonDelta& delta) {
  std::lock_guard lock(m_shared.mutex());
  return m_shared.resending_locked(SharedDb::Resend::only_unsent, [&]() -> Result<std::string> {
    KOPE_ASSIGN(Transaction tx, m_shared.begin_locked());
    auto id = apply_locked(delta);
    if (!id) return id;
    KOPE_TRY(m_shared.commit_locked(tx));
    return id;
  });
}

Result<std::vector<std::string>> LessonStore::apply_all(const std::vector<LessonDelta>& deltas) {
  std::lock_guard lock(m_shared.mutex());
  return m_shared.resending_locked(SharedDb::Resend::only_unsent, [&]() -> Result<std::vector<std::string>> {
    KOPE_ASSIGN(Transaction tx, m_shared.begin_locked());
    std::vector<std::string> ids;
    ids.reserve(deltas.size());
    for (const auto& d : deltas) {
      KOPE_ASSIGN(std::string id, apply_locked(d));
      ids.push_back(std::move(id));
    }
    KOPE_TRY(m_shared.commit_locked(tx));
    return ids;
  });
}

// ----------------------------------------------------------------------------------------------
// Retrieval log and credit

Status LessonStore::log_retrieval(const RetrievalLogEntry& e) {
  if (e.prompt_id.empty()) return fail(ErrorKind::usage, "retrieval log entry has no prompt id");
  std::lock_guard lock(m_shared.mutex());
  return m_shared.resending_locked(SharedDb::Resend::idempotent, [&]() -> Status {
    KOPE_ASSIGN(Transaction tx, m_shared.begin_locked());
    json tiers = json::object();
    for (const auto& [tier, tokens] : e.tier_tokens) tiers[tier] = tokens;
    {
      KOPE_ASSIGN(Stmt st, m_db->prepare(
                               "INSERT INTO prompt(id, case_id, stage, tier_tokens, created_at) VALUES (?, ?, ?, ?, ?) "
                               "ON CONFLICT(id) DO UPDATE SET case_id = coalesce(prompt.case_id, excluded.case_id)"));
      st.bind(1, e.prompt_id);
      if (e.case_id > 0) {
        st.bind(2, e.case_id);
      } else {
        st.bind_null(2);
      }
      KOPE_TRY(st.bind(3, static_cast<int>(e.stage)).bind(4, tiers.dump()).bind(5, util::now_iso8601()).run());
    }
    for (const auto& [item, score] : e.items) {
      KOPE_ASSIGN(Stmt st, m_db->prepare("INSERT OR IGNORE INTO prompt_item(prompt_id, item_id, score) VALUES (?, ?, ?)"));
      KOPE_TRY(st.bind(1, e.prompt_id).bind(2, item).bind(3, std::isfinite(score) ? score : 0.0).run());
    }
    return m_shared.commit_locked(tx);
  });
}

Result<std::optional<RetrievalLogEntry>> LessonStore::retrieval_entry(const std::string& prompt_id) {
  std::lock_guard lock(m_shared.mutex());
  RetrievalLogEntry e;
  {
    KOPE_ASSIGN(Stmt st, m_db->prepare("SELECT case_id, stage, tier_tokens FROM prompt WHERE id = ?"));
    st.bind(1, prompt_id);
    KOPE_ASSIGN(bool row, st.step());
    if (!row) return std::optional<RetrievalLogEntry>{};
    e.prompt_id = prompt_id;
    e.case_id = st.opt_int64(0).value_or(0);
    e.stage = static_cast<Stage>(std::clamp<int64_t>(st.int64(1), 0, 2));
    json tiers = json::parse(st.text(2), nullptr, false);
    if (tiers.is_object()) {
      for (auto it = tiers.begin(); it != tiers.end(); ++it) {
        if (it.value().is_number_integer()) e.tier_tokens[it.key()] = it.value().get<int64_t>();
      }
    }
  }
  KOPE_ASSIGN(Stmt st, m_db->prepare("SELECT item_id, score FROM prompt_item WHERE prompt_id = ? ORDER BY score DESC, item_id"));
  st.bind(1, prompt_id);
  for (;;) {
    KOPE_ASSIGN(bool row, st.step());
    if (!row) break;
    e.items.emplace_back(st.text(0), st.real(1));
  }
  return std::optional<RetrievalLogEntry>{std::move(e)};
}

Result<std::pair<double, double>> LessonStore::update_value_locked(const std::string& item_id, Stage stage, double reward) {
  double before = stage_prior(stage);
  int64_t n = 0;
  {
    KOPE_ASSIGN(Stmt st, m_db->prepare("SELECT value, n FROM item_value WHERE item_id = ? AND stage = ?"));
    st.bind(1, item_id).bind(2, static_cast<int>(stage));
    KOPE_ASSIGN(bool row, st.step());
    if (row) {
      before = st.real(0);
      n = st.int64(1);
    }
  }
  double after = before + k_value_rate * (reward - before);
  KOPE_ASSIGN(Stmt st, m_db->prepare("INSERT INTO item_value(item_id, stage, value, n) VALUES (?, ?, ?, ?) "
                                     "ON CONFLICT(item_id, stage) DO UPDATE SET value = excluded.value, n = excluded.n"));
  KOPE_TRY(st.bind(1, item_id).bind(2, static_cast<int>(stage)).bind(3, after).bind(4, n + 1).run());
  return std::pair{before, after};
}

Status LessonStore::credit(const std::string& prompt_id, double reward) {
  if (!std::isfinite(reward)) return fail(ErrorKind::usage, "credit for prompt {}: reward is not finite", prompt_id);
  std::lock_guard lock(m_shared.mutex());
  // A prompt is credited once, so a credit sent again after a lost connection changes nothing.
  return m_shared.resending_locked(SharedDb::Resend::idempotent, [&]() -> Status {
    KOPE_ASSIGN(Transaction tx, m_shared.begin_locked());
    Stage stage = Stage::draft;
    std::optional<int64_t> prompt_case;
    {
      KOPE_ASSIGN(Stmt st, m_db->prepare("SELECT stage, credited_at, case_id FROM prompt WHERE id = ?"));
      st.bind(1, prompt_id);
      KOPE_ASSIGN(bool row, st.step());
      if (!row) return fail(ErrorKind::not_found, "credit: prompt '{}' was never logged", prompt_id);
      if (!st.is_null(1)) return {};  // already credited: a retry changes nothing
      stage = static_cast<Stage>(std::clamp<int64_t>(st.int64(0), 0, 2));
      prompt_case = st.opt_int64(2);
    }
    // A lesson's credit names the case the prompt produced as its source: where the lesson was
    // measured (retrieval reads it to tell an imported lesson this machine has confirmed).
    if (prompt_case) {
      KOPE_ASSIGN(bool exists, m_cases.exists_locked(*prompt_case));
      if (!exists) prompt_case.reset();
    }
    std::vector<std::string> items;
    {
      KOPE_ASSIGN(Stmt st, m_db->prepare("SELECT item_id FROM prompt_item WHERE prompt_id = ? ORDER BY item_id"));
      st.bind(1, prompt_id);
      for (;;) {
        KOPE_ASSIGN(bool row, st.step());
        if (!row) break;
        items.push_back(st.text(0));
      }
    }
    const bool helpful = helpful_reward(stage, reward);
    for (const auto& item : items) {
      if (item.starts_with("lesson:")) {
        KOPE_ASSIGN(auto lid, resolve_lesson_locked(item.substr(7)));
        if (!lid) continue;  // an item id that never named a lesson here: nothing to credit
        KOPE_ASSIGN(auto values, update_value_locked("lesson:" + *lid, stage, reward));
        KOPE_ASSIGN(Stmt st, m_db->prepare(helpful ? "UPDATE lessons SET helpful = helpful + 1 WHERE id = ?"
                                                   : "UPDATE lessons SET harmful = harmful + 1 WHERE id = ?"));
        KOPE_TRY(st.bind(1, *lid).run());
        json payload{{"prompt", prompt_id}, {"stage", stage_name(stage)}, {"reward", reward},
                     {"value_before", values.first}, {"value_after", values.second}};
        KOPE_TRY(log_delta_locked(*lid, helpful ? "upvote" : "downvote",
                                  fmt::format("credit from prompt {} ({} reward {:.3g})", prompt_id, stage_name(stage), reward),
                                  prompt_case, payload.dump()));
        if (!helpful) KOPE_TRY(maybe_deprecate_locked(*lid));
      } else {
        KOPE_TRY(update_value_locked(item, stage, reward));
        KOPE_ASSIGN(Stmt st, m_db->prepare(
                                 "INSERT INTO item_stats(item_id, helpful, harmful) VALUES (?1, ?2, ?3) "
                                 "ON CONFLICT(item_id) DO UPDATE SET helpful = item_stats.helpful + ?2, "
                                 "harmful = item_stats.harmful + ?3"));
        KOPE_TRY(st.bind(1, item).bind(2, int64_t{helpful ? 1 : 0}).bind(3, int64_t{helpful ? 0 : 1}).run());
      }
    }
    {
      KOPE_ASSIGN(Stmt st, m_db->prepare("UPDATE prompt SET credited_at = ?, reward = ? WHERE id = ?"));
      KOPE_TRY(st.bind(1, util::now_iso8601()).bind(2, reward).bind(3, prompt_id).run());
    }
    return m_shared.commit_locked(tx);
  });
}

}  // namespace kope::memory
