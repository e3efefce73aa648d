// kope/memory.h — the Experience Graph Memory (DESIGN.md §4): the contract the agent uses.
//
// Every attempt becomes an append-only Case with its lineage ("began-from" parent), verdict,
// timings and outcome; Lessons are short distilled items changed only by logged deltas; a
// retrieval log records which items went into which prompt so outcomes can be credited back.
// The embedded store is SQLite (WAL, synchronous=FULL); only the trusted parent opens it.
// A Store object is thread-safe (writes are serialised inside); several processes may open the
// same file.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kope/error.h"

namespace kope::memory {

enum class Stage { draft, repair, refine };
std::string_view stage_name(Stage s);
std::optional<Stage> parse_stage(std::string_view s);

// Outcome label of a case from r = speedup / parent's speedup (DESIGN.md §4): effective
// r >= 1.05, partial 1 <= r < 1.05, ineffective 0.85 <= r < 1, negative r < 0.85. A case that
// is not correct has speedup 0 and so is negative.
enum class Outcome { effective, partial, ineffective, negative };
std::string_view outcome_name(Outcome o);
Outcome outcome_for_ratio(double r);

struct HardwareInfo {
  std::string target;      // Target::str(), the key
  std::string cpu_model;
  int cores = 0;
  double peak_gflops = 0;
  double peak_gbps = 0;
};

struct ToolchainInfo {
  std::string id;          // Toolchain::id(), the key
  std::string backend;     // "cpu", "opencl", ...
};

// The operator an attempt was for, with features for similarity between operators.
struct TaskInfo {
  std::string op;          // op name
  std::string spec_hash;
  std::string category;
  int level = 1;
  std::string signature;   // the kernel signature
  std::string timed_dims;  // JSON array of the timed cases' dims
  double arithmetic_intensity = 0;  // flops / bytes of the largest timed case
  double log2_flops = 0;
  double log2_bytes = 0;
};

struct CaseTimingRecord {
  int case_index = 0;
  double median_us = 0;
  double ci95_us = 0;
  double reference_us = 0;
  std::optional<double> library_us;
};

// One attempt. Written once; a retried write with the same natural key returns the same id.
struct CaseRecord {
  int64_t id = 0;                 // assigned by the store
  std::string natural_key;        // e.g. "<run id>/<op>/<iteration>": idempotency key
  std::string run_id;
  TaskInfo task;
  HardwareInfo hardware;
  ToolchainInfo toolchain;
  std::optional<int64_t> parent_id;  // the case this attempt began from
  Stage stage = Stage::draft;
  std::string optimisation;       // what the model said it applied
  std::string code;               // the candidate source (stored content-addressed)
  std::string verdict;            // eval::verdict_name
  std::string message;            // the evaluator's one-line message
  std::string diagnostics;        // trimmed
  std::string error_signature;    // normalised, filled by the store when empty
  std::vector<CaseTimingRecord> timings;
  std::optional<double> speedup_vs_parent;
  std::optional<double> speedup_vs_reference;
  std::optional<double> speedup_vs_library;
  std::optional<double> fraction_of_roofline;
  Outcome outcome = Outcome::negative;  // computed by the store from the speedups
  int64_t tokens_prompt = 0;
  int64_t tokens_completion = 0;
  double wall_seconds = 0;
  std::string journal;            // human-readable account: strategy, change, status, numbers, reading
  std::string created_at;         // ISO 8601, set by the store
  bool quarantined = false;       // an implausible win awaiting re-verification
};

enum class LessonKind { strategy, pitfall, fix, recipe };
enum class LessonStatus { active, quarantined, deprecated, merged };

struct LessonScope {
  std::string category;   // op category, or "" for any
  std::string backend;    // "cpu", ... or ""
  std::string target;     // Target::str() or ""
  std::string toolchain;  // or ""
};

struct Lesson {
  std::string id;              // stable, e.g. "L0001a2b"
  LessonKind kind = LessonKind::strategy;
  std::string title;
  std::string text;
  std::string error_signature; // for `fix` lessons: the error they fix
  LessonScope scope;
  int helpful = 0;
  int harmful = 0;
  std::map<std::string, double> value;  // learned value per stage name
  LessonStatus status = LessonStatus::active;
  std::vector<int64_t> source_cases;    // provenance
  std::string valid_from;
  std::string valid_to;                 // empty while valid
};

// The only way lessons change. Every applied delta is logged.
struct LessonDelta {
  enum class Op { add, edit, upvote, downvote, deprecate, merge };
  Op op = Op::add;
  std::string lesson_id;        // target lesson (empty for add: the store assigns one)
  Lesson lesson;                // for add/edit: the new content
  std::string merge_into;       // for merge
  std::string reason;
  std::optional<int64_t> source_case;
};

// The state retrieval is asked about.
struct RetrievalQuery {
  TaskInfo task;
  std::string target;
  std::string toolchain;
  std::string backend;
  Stage stage = Stage::draft;
  std::string last_error_signature;
  std::string bottleneck;       // "memory", "compute", "latency" or ""
  std::string text;             // free text for lexical search (e.g. the latest diagnostics)
  int limit = 50;
};

struct RetrievedItem {
  enum class Kind { case_summary, lesson, best_kernel };
  Kind kind = Kind::lesson;
  std::string id;               // "case:123", "lesson:L0001a2b"
  std::string text;             // ready to put in a prompt
  int64_t tokens = 0;           // estimated tokens of `text`
  double score = 0;
  std::map<std::string, double> score_parts;  // "lexical", "similarity", "graph", "value", ...
  bool foreign = false;         // from another target or toolchain: feasibility, not speed
  std::string target;
  std::string op;
};

// One prompt's use of retrieved items, for crediting outcomes back.
struct RetrievalLogEntry {
  std::string prompt_id;
  int64_t case_id = 0;          // the attempt the prompt produced (0 when none)
  Stage stage = Stage::draft;
  std::vector<std::pair<std::string, double>> items;  // item id and its score
  std::map<std::string, int64_t> tier_tokens;         // "hot", "warm", "cold" -> tokens
};

struct Stats {
  int64_t tasks = 0;
  int64_t cases = 0;
  int64_t lessons = 0;
  int64_t targets = 0;
  int64_t bytes = 0;
};

class Store {
 public:
  virtual ~Store() = default;

  // Appends a case (idempotent on natural_key) and updates downstream scores. Returns its id.
  virtual Result<int64_t> record_case(const CaseRecord& c) = 0;
  virtual Result<std::optional<CaseRecord>> get_case(int64_t id) = 0;
  virtual Result<std::optional<CaseRecord>> find_case(const std::string& natural_key) = 0;
  // The fastest correct, non-quarantined cases for an op on a target ("" = any), best first.
  virtual Result<std::vector<CaseRecord>> best_cases(const std::string& op, const std::string& target, int limit) = 0;

  virtual Result<std::string> apply(const LessonDelta& delta) = 0;  // returns the lesson id
  virtual Result<std::vector<Lesson>> lessons(const LessonScope& filter) = 0;

  virtual Result<std::vector<RetrievedItem>> retrieve(const RetrievalQuery& q) = 0;
  virtual Status log_retrieval(const RetrievalLogEntry& entry) = 0;
  // Moves the learned values of the items used by `prompt_id` toward `reward` for its stage.
  virtual Status credit(const std::string& prompt_id, double reward) = 0;

  virtual Result<Stats> stats() = 0;
};

// Opens (creating and migrating as needed) the SQLite store at `path`. Fails with corrupt for
// a damaged file or a schema from a newer kope, naming the file.
Result<std::unique_ptr<Store>> open_store(const std::filesystem::path& path);

// The default database: $KOPE_MEMORY, else data_dir()/memory.db.
std::filesystem::path default_store_path();

}  // namespace kope::memory
