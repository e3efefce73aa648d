// report/memory_view.h — what a report shows about the experience memory itself.
//
// A MemoryOverview is a plain snapshot: counts, every lesson with its scope, learned values and
// helpful/harmful counts, and the quarantined wins (implausible speedups awaiting
// re-verification). load_memory_overview() reads it from a memory database through the store
// interface (include/kope/memory.h): it only reads, although opening an older database through
// the store migrates its schema, as any kope command would.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "kope/error.h"

namespace kope::report {

struct MemoryLesson {
  std::string id;
  std::string kind;    // strategy, pitfall, fix, recipe
  std::string status;  // active, quarantined, deprecated, merged
  std::string title;
  std::string text;
  std::string scope;  // "normalization · cpu · x86_64-avx2-fma", "any" when unscoped
  int helpful = 0;
  int harmful = 0;
  std::map<std::string, double> value;  // learned value per stage
  size_t source_cases = 0;
};

struct MemoryCase {
  int64_t id = 0;
  std::string op;
  std::string target;
  std::string run_id;
  std::string optimisation;
  std::optional<double> speedup_vs_reference;
  std::optional<double> fraction_of_roofline;
  std::string status;  // quarantined, refuted, verified
  std::string reason;
  std::string created_at;
};

struct MemoryOverview {
  std::string path;
  int64_t tasks = 0;
  int64_t cases = 0;
  int64_t lessons = 0;
  int64_t targets = 0;
  int64_t bytes = 0;
  std::map<std::string, int64_t> by_verdict;
  std::map<std::string, int64_t> by_outcome;
  std::vector<MemoryLesson> all_lessons;
  std::vector<MemoryCase> quarantined;
};

// Reads the overview of the memory database at `path` (read-only use of the store). Fails with
// not_found when the file does not exist (a report never creates a database), corrupt or io as
// the store reports.
Result<MemoryOverview> load_memory_overview(const std::filesystem::path& path);

}  // namespace kope::report
