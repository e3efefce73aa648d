// memory/retrieval_store.h — retrieval over a SqliteStore's tables (internal): Store::retrieve
// (the pipeline in retrieve.cpp: candidates from each signal, their facts in bulk, one scoring
// pass, the cut), the in-memory table of task features it scores operator similarity with, and
// the lexical (BM25) ranking of lessons that LessonStore::find_lessons uses.
//
// Reads every table the other stores write and writes none. The task cache is refreshed
// incrementally (new task rows only) under the shared mutex and dropped with the other caches
// (SharedDb::on_reset).
#pragma once

#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "kope/memory.h"
#include "memory/shared_db.h"

namespace kope::memory {

class RetrievalStore {
 public:
  explicit RetrievalStore(SharedDb& shared);
  RetrievalStore(const RetrievalStore&) = delete;
  RetrievalStore& operator=(const RetrievalStore&) = delete;

  // Store::retrieve (kope/memory.h). Takes the shared mutex.
  Result<std::vector<RetrievedItem>> retrieve(const RetrievalQuery& q);

  // A task's features, cached for similarity scoring.
  struct TaskRow {
    int64_t id = 0;
    TaskInfo info;
    spec::SignatureShape shape;  // task_shape(info)
  };

 private:
  // Adds the task rows recorded since the last refresh to m_tasks.
  Status refresh_tasks_locked();

  SharedDb& m_shared;
  Db* const m_db;
  std::vector<TaskRow> m_tasks;  // for similarity
  int64_t m_tasks_max_id = 0;

  friend class RetrievalEngine;
};

// Lesson seqs whose text matches any token of `text`, best BM25 first (at most 1000): FTS5's
// rank in SQLite, the same BM25 computed over the matching rows in PostgreSQL. The caller holds
// the shared mutex.
Result<std::vector<int64_t>> rank_lessons_by_text(Db& db, const std::string& text);

// Similarity of two operators' features in [0, 1] (category, level, arithmetic intensity,
// problem size, signature shape).
double task_similarity(const TaskInfo& a, const TaskInfo& b);
double task_similarity(const TaskInfo& a, const spec::SignatureShape& sa, const TaskInfo& b,
                       const spec::SignatureShape& sb);
// Whether b computes something structurally close to a: the same op or category, or the same
// parameter shape (tensors, dtypes, about as many dims and attributes) and an arithmetic
// intensity within a factor of 2. Derived from the specs alone, never from op names.
bool task_structurally_close(const TaskInfo& a, const spec::SignatureShape& sa, const TaskInfo& b,
                             const spec::SignatureShape& sb);

}  // namespace kope::memory
