// memory/lesson_store.h — the lessons of a SqliteStore and what is learned about retrieved items
// (internal): lessons change only through logged deltas (add with near-duplicate merging, edit,
// votes, deprecate, merge); the retrieval log records which items each prompt showed, and credit
// turns a prompt's reward into the items' EMA values and the lessons' votes (deprecating a lesson
// that keeps hurting).
//
// Owns the SQL of the tables lessons, lesson_alias, lesson_source, lesson_delta, item_value,
// item_stats, prompt and prompt_item. Its search entries go through SharedDb's index (corpus 1);
// the cases it names as sources are CaseStore's.
//
// Functions without `_locked` take the shared mutex (and a transaction for writes) themselves;
// `*_locked` ones expect the caller to hold it, inside a transaction where they write.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kope/memory.h"
#include "memory/shared_db.h"

namespace kope::memory {

class CaseStore;

class LessonStore {
 public:
  LessonStore(SharedDb& shared, CaseStore& cases);
  LessonStore(const LessonStore&) = delete;
  LessonStore& operator=(const LessonStore&) = delete;

  // Store and StoreAdmin's calls on lessons, the retrieval log and credit (kope/memory.h says
  // what each returns).
  Result<std::string> apply(const LessonDelta& delta);
  Result<std::vector<std::string>> apply_all(const std::vector<LessonDelta>& deltas);
  Result<std::vector<Lesson>> lessons(const LessonScope& filter);
  Result<std::optional<Lesson>> get_lesson(const std::string& id);
  Result<std::vector<Lesson>> find_lessons(const LessonFilter& filter);
  Result<std::vector<LessonLogEntry>> lesson_history(const std::string& id);
  Status log_retrieval(const RetrievalLogEntry& entry);
  Result<std::optional<RetrievalLogEntry>> retrieval_entry(const std::string& prompt_id);
  Status credit(const std::string& prompt_id, double reward);

  // The lessons drawn from case `case_id` that wait in quarantine become active, each with a
  // logged `edit` naming the case and `note` (after the case was verified).
  Status release_quarantined_locked(int64_t case_id, const std::string& note);

  // --- for Exchange (export and import)
  // The lessons matching `where_sql` (over `lessons l JOIN origin o`) with `params` bound as
  // ?1.., then `order_limit`, each with its values and source cases.
  Result<std::vector<Lesson>> select_lessons_locked(const std::string& where_sql,
                                                    const std::vector<SqlValue>& params,
                                                    const std::string& order_limit);
  // The id `id` names here (itself, or the lesson it was merged into as a duplicate); nullopt
  // when unknown.
  Result<std::optional<std::string>> resolve_lesson_locked(const std::string& id);
  Status log_delta_locked(const std::string& lesson_id, std::string_view op, const std::string& reason,
                          std::optional<int64_t> source_case, const std::string& payload);
  // Adds source cases to a lesson; fails with not_found for a case that does not exist.
  Status add_lesson_sources_locked(const std::string& lesson_id, const std::vector<int64_t>& case_ids);
  // The best active/quarantined lesson of the same kind, scope and error signature whose text is
  // equal or near (Jaccard >= k_lesson_near_duplicate), with its similarity.
  Result<std::optional<std::pair<std::string, double>>> find_duplicate_locked(const Lesson& l);
  // Inserts a lesson row as given (status, counts, values), indexes it and logs its `add`.
  // A proposed id that is already known returns that lesson's id unchanged.
  Result<std::string> insert_lesson_locked(const Lesson& l, const std::string& proposed_id, int64_t origin_id,
                                           bool foreign, const std::string& reason,
                                           std::optional<int64_t> source_case, const std::string& payload);

 private:
  Result<std::string> apply_locked(const LessonDelta& delta);
  Result<std::optional<Lesson>> get_lesson_locked(const std::string& id);
  Result<std::map<std::string, double>> item_values_locked(const std::string& item_id);
  Result<std::pair<double, double>> update_value_locked(const std::string& item_id, Stage stage, double reward);
  Status index_lesson_locked(int64_t seq, bool remove, const Lesson& l);
  Status maybe_deprecate_locked(const std::string& id);

  SharedDb& m_shared;
  Db* const m_db;
  CaseStore& m_cases;
};

}  // namespace kope::memory
