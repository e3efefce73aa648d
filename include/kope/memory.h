// kope/memory.h — the Experience Graph Memory (docs/design.md §4): the contract the agent uses
// (Store) and the administration of a memory database (StoreAdmin); a store kind implements both
// as a Database.
//
// Every attempt becomes an append-only Case with its lineage ("began-from" parent), verdict,
// timings and outcome; Lessons are short distilled items changed only by logged deltas; a
// retrieval log records which items went into which prompt so outcomes can be credited back.
// The embedded store is SQLite (WAL, synchronous=FULL); a shared one is a PostgreSQL database
// (open_store with a postgresql:// URL), with the same rules. Only the trusted parent opens it.
// A Store object is thread-safe (writes are serialised inside); several processes (and, for
// PostgreSQL, machines) may open the same database. `open_store(":memory:")` gives a private in-memory store (for tests and fakes).
//
// Rules the store applies (README.md "Memory" gives the reasoning):
//  - Outcome: r = speedup_vs_reference / parent's speedup_vs_reference (1.0, the reference, for
//    a root or a parent that was not correct and timed); a case that is not correct has r = 0.
//    A correct case without timings uses the caller's speedup_vs_parent, else r = 1.
//  - Downstream score d(v) = 0.5·r_v + 0.5·0.7·Σ_children d(u), updated incrementally along the
//    new case's ancestor chain. A quarantined (or refuted) case counts r = 0 until verified.
//  - Quarantine: a correct case is quarantined when a timed case ran below its conservative
//    hardware floor (CaseTimingRecord::floor_us: faster than the fastest cache level's bandwidth
//    and the peak allow), or — for a record that carries no floors (older kope, imports) —
//    when fraction_of_roofline > k_quarantine_roofline_fraction; a record with floors is never
//    quarantined for its fraction of the working-set roofline alone (beyond 100% is a bug of the
//    roofline model, which the evaluator reports); or r > k_quarantine_jump over a correct, timed parent, or
//    its speedup vs the reference exceeds k_quarantine_root_speedup when it has no such parent.
//    Quarantined cases are excluded from best_cases, task summaries and speed evidence until
//    verify_case() confirms them.
//  - Rewards (see stage_reward): draft/repair: 1 correct, 0.25 compiled but failed
//    (wrong_result, runtime_error, timeout, resource_limit), 0 otherwise (bad_answer included); refine: ln(r) clipped
//    to [-1, 1], -1 when not correct.
//  - Values: credit() moves each used item's value for the prompt's stage by an exponential
//    moving average v += k_value_rate·(reward − v) (initial value: the stage's prior, 0.5 for
//    draft/repair, 0 for refine). A reward at or above the stage's helpful threshold (0.5 for
//    draft/repair, > 0 for refine) counts as helpful, else harmful. A lesson is deprecated
//    automatically (a logged delta) once harmful >= k_deprecate_min_harmful and
//    harmful >= 2·(helpful + 1).
//  - Lessons: an add whose normalised text equals, or whose token Jaccard similarity is at least
//    k_lesson_near_duplicate with, an active lesson of the same kind, scope (and error signature
//    for fixes) is merged into that lesson (logged), never added twice.
//  - Retrieval: bounded candidates per signal (fix lessons and error->fix links by error
//    signature; BM25 over lessons and journals, scoring the newest matches of the query's rarer
//    terms; the op's cases by d(v); best kernels of this op and of the most similar ops from
//    per-task summaries; lineage around the incumbent; lessons of the scope), one scoring pass
//    with stage-dependent weights; score_parts holds each weighted part (they sum to score).
//    Items from another target or toolchain, or imported as foreign, are `foreign`: never best
//    kernels, no speed or d(v) part, ranked by feasibility (fixes, what compiled and passed).
#pragma once

#include <cstdint>
#include <filesystem>
#include <iosfwd>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "kope/error.h"
#include "kope/spec.h"
#include "kope/verdict.h"

namespace kope::memory {

enum class Stage { draft, repair, refine };
std::string_view stage_name(Stage s);
std::optional<Stage> parse_stage(std::string_view s);

// Outcome label of a case from r = speedup / parent's speedup (docs/design.md §4): effective
// r >= 1.05, partial 1 <= r < 1.05, ineffective 0.85 <= r < 1, negative r < 0.85. A case that
// is not correct has speedup 0 and so is negative.
enum class Outcome { effective, partial, ineffective, negative };
std::string_view outcome_name(Outcome o);
std::optional<Outcome> parse_outcome(std::string_view s);
Outcome outcome_for_ratio(double r);

// Thresholds and rates the store applies (see the header comment).
inline constexpr double k_downstream_self = 0.5;          // weight of r_v in d(v)
inline constexpr double k_downstream_decay = 0.7;         // discount of the children's sum
inline constexpr double k_quarantine_roofline_fraction = 1.0;
inline constexpr double k_quarantine_jump = 10.0;         // r over a correct, timed parent
inline constexpr double k_quarantine_root_speedup = 1000.0;  // vs reference, without such a parent
inline constexpr double k_value_rate = 0.2;               // EMA rate of learned values
inline constexpr int k_deprecate_min_harmful = 5;
inline constexpr double k_lesson_near_duplicate = 0.8;    // token Jaccard

// The reward of an attempt for its stage (see the header comment). `ratio` is r.
double stage_reward(Stage stage, eval::Verdict verdict, double ratio);
// The prior value of an item for a stage, before any credit.
double stage_prior(Stage stage);

// Normalised error signature of an evaluation, so equal causes share a signature:
//  compile_error -> "compile_error: error: 'X' was not declared in this scope" (first error
//  line; paths, line/column numbers, numbers and quoted identifiers stripped);
//  runtime_error -> "runtime_error:SIGSEGV" (signal) or "runtime_error:exit";
//  wrong_result -> "wrong_result:nan_mismatch" / ":inf_mismatch" / ":value";
//  timeout, resource_limit -> the verdict plus the limit kind; rejected -> the normalised rule;
//  bad_answer -> "bad_answer:edit_no_match" / ":edit_ambiguous" / ":edit_overlap" /
//  ":edit_empty_search" / ":edit_malformed" / ":edits_without_incumbent" / ":edits_outside_refine" /
//  ":kernel_and_edits";
//  correct -> "". Pure function, thread-safe.
std::string error_signature(eval::Verdict verdict, std::string_view message,
                            std::string_view diagnostics);

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
  std::string signature;   // the kernel signature (spec::render_signature)
  std::string timed_dims;  // JSON array of the timed cases' dims
  double arithmetic_intensity = 0;  // flops / bytes of the largest timed case
  double log2_flops = 0;
  double log2_bytes = 0;
  // The typed shape of the signature (spec::signature_shape), which a task recorded from its
  // spec carries; absent in tasks of older memories and of exports that lack it. Similarity,
  // structural closeness and replay use task_shape(), which falls back to the text.
  std::optional<spec::SignatureShape> signature_shape;
};

// The shape of a task's kernel signature: its typed signature_shape when it has one, else
// legacy_signature_shape(signature). Pure function, thread-safe.
spec::SignatureShape task_shape(const TaskInfo& t);

// The shape read back from a signature's C text, for tasks recorded without a typed shape
// (memories and exports of older kope versions). It reads render_signature's form: `const T*`
// parameters are inputs, other pointers outputs (inouts with an `inout` note), `int64_t` scalars
// dims up to the first other scalar, the rest attrs; a dtype note in a comment (`/* bf16 */`,
// `/* bf16, inout */`) names the dtype, else the C type does (float, double, int8_t ... int64_t,
// uint8_t; uint16_t without a note and unknown types leave the dtype unknown). The text cannot
// tell an i64 attr right after the dims from a dim: it reads as a dim (spec::same_parameters
// counts them alike). Text without a parameter list gives the empty shape. Pure function.
spec::SignatureShape legacy_signature_shape(std::string_view signature);

struct CaseTimingRecord {
  int case_index = 0;
  double median_us = 0;
  double ci95_us = 0;
  double reference_us = 0;
  std::optional<double> library_us;
  bool disturbed = false;  // timed under outside load (eval::CaseTiming::disturbed)
  double contention = 0;   // eval::CaseTiming::contention
  // The conservative hardware floor of the case (the evaluator's floor_us: the fastest measured
  // cache bandwidth and the FP32 peak), when the recorder knew it. A median below it is not
  // physically possible here.
  std::optional<double> floor_us;
};

// The review state of a case's speed (the quarantine rules above). The numbers are the codes a
// database stores (case_derived.quarantine): never renumber them.
enum class QuarantineStatus { none = 0, quarantined = 1, verified = 2, refuted = 3 };
// The one name of each status, used by JSON exports and imports, `kope memory` and reports: ""
// for none, else the enumerator's name.
std::string_view quarantine_status_name(QuarantineStatus s);
// The status a name denotes ("" is none); nullopt for a name kope does not know.
std::optional<QuarantineStatus> parse_quarantine_status(std::string_view s);
// Whether a case in this state is held back from speed evidence (quarantined or refuted): it
// counts r = 0, is never a best case and is not offered as evidence.
bool quarantine_holds_back(QuarantineStatus s);

// One attempt. Written once; a retried write with the same natural key returns the same id.
struct CaseRecord {
  int64_t id = 0;                 // assigned by the store
  std::string natural_key;        // e.g. "<run id>/<op>/<iteration>": idempotency key
  std::string run_id;
  TaskInfo task;
  HardwareInfo hardware;
  ToolchainInfo toolchain;
  std::optional<int64_t> parent_id;  // the case this attempt began from
  std::string parent_key;         // alternative to parent_id: the parent's natural key (used when
                                  // a batch holds parent and child, and by imports)
  Stage stage = Stage::draft;
  std::string optimisation;       // what the model said it applied
  std::string code;               // the candidate source (stored content-addressed)
  eval::Verdict verdict = eval::Verdict::compile_error;
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
  bool quarantined = false;       // an implausible win awaiting re-verification (input: the
                                  // caller may force it; output: quarantined or refuted)

  // Filled by the store when reading (ignored when recording):
  double ratio = 0;               // r, from which `outcome` was computed
  double downstream = 0;          // d(v), current
  QuarantineStatus quarantine_status = QuarantineStatus::none;
  std::string quarantine_reason;  // why it was quarantined
  std::string code_hash;          // SHA-256 of `code`
  std::string origin;             // instance id of the database the case was first recorded in
  bool foreign_origin = false;    // imported with --foreign: from another machine
};

enum class LessonKind { strategy, pitfall, fix, recipe };
enum class LessonStatus { active, quarantined, deprecated, merged };
std::string_view lesson_kind_name(LessonKind k);
std::optional<LessonKind> parse_lesson_kind(std::string_view s);
std::string_view lesson_status_name(LessonStatus s);
std::optional<LessonStatus> parse_lesson_status(std::string_view s);

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
  std::string merged_into;              // for status merged
  std::string origin;                   // instance id of the database it was first added in
  bool foreign_origin = false;
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
std::string_view delta_op_name(LessonDelta::Op op);

// One logged delta, as kept in a lesson's history.
struct LessonLogEntry {
  int64_t seq = 0;
  std::string lesson_id;
  std::string op;               // delta_op_name, or "add" of a duplicate that was merged
  std::string reason;
  std::optional<int64_t> source_case;
  std::string payload;          // JSON: what changed (old/new text, counts, values)
  int helpful_after = 0;
  int harmful_after = 0;
  std::string status_after;
  std::string created_at;
};

// The contamination guard (`kope run --holdout`): experience about the ops being run (same
// name or spec hash) is left out of retrieval and replay unless the current run recorded it.
struct Holdout {
  std::set<std::string> ops;          // op names
  std::set<std::string> spec_hashes;
  std::string run_id;                 // the current run: its own experience stays in

  bool active() const { return !ops.empty() || !spec_hashes.empty(); }
  // True when (op, spec_hash) is one of the held-out operators.
  bool covers(std::string_view op, std::string_view spec_hash) const {
    return ops.contains(std::string(op)) || (!spec_hash.empty() && spec_hashes.contains(std::string(spec_hash)));
  }
  // True when experience about (op, spec_hash) recorded by `case_run` must be left out.
  bool excludes(std::string_view op, std::string_view spec_hash, std::string_view case_run) const {
    return case_run != run_id && covers(op, spec_hash);
  }
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
  std::optional<int64_t> incumbent_case;  // enables lineage signals (ancestors, tried branches)
  Holdout holdout;              // inactive unless the run holds its ops out
};

// What a retrieved lesson is made of: the lesson as the store holds it (its id without the
// item's "lesson:" prefix, kind, title, text, scope, the error a fix is for) and its evidence
// counts.
struct RetrievedLesson {
  std::string id;
  LessonKind kind = LessonKind::strategy;
  std::string title;
  std::string text;
  LessonScope scope;
  std::string error_signature;  // for a fix: the error it fixes
  int helpful = 0;
  int harmful = 0;
  // How precisely the speed behind the lesson was measured: over its correct source cases
  // that were timed, the median of each case's relative 95% interval (the median over its timed
  // cases of ci95 / median: 0.03 is ±3%), and the share of those cases whose timing was marked
  // disturbed by other load. No value when no source case was timed. A lesson drawn from
  // timings this loose was learned under load, whatever its votes say (agent::noisy_evidence).
  std::optional<double> evidence_spread;
  double evidence_disturbed = 0;
  int evidence_cases = 0;  // the timed source cases both figures are over
  // The arithmetic intensities (flops per byte, TaskInfo::arithmetic_intensity) of the ops the
  // lesson was drawn from, one per distinct op, unknown ones (0) left out: what kind of
  // computation it was learned on (agent::other_kind_of_work).
  std::vector<double> source_intensity;
};

// A lesson's fields as retrieval returns them (the evidence figures left empty).
RetrievedLesson retrieved_lesson(const Lesson& l);
// Fills `l`'s evidence figures from the timings of its correct source cases, one list per case
// (cases without timings are skipped).
void set_lesson_evidence(RetrievedLesson& l, const std::vector<std::vector<CaseTimingRecord>>& source_timings);

// Where a retrieved case stands to the query's incumbent (the lineage signals).
enum class CaseLineage {
  none,
  incumbent,        // the incumbent itself
  ancestor,         // an ancestor of the incumbent (RetrievedCase::ancestor generations up)
  tried_from,       // a child of the incumbent: tried from it
  sibling_branch,   // a child of the incumbent's parent: a sibling branch
};

// What a retrieved case (a summary, a fix or a best kernel) is made of, beside the item's own
// facts (its case id, op, target, category, foreign, quarantined, failed case): the case as
// recorded, its relation to the query's incumbent, and for a best kernel its code.
struct RetrievedCase {
  Stage stage = Stage::draft;
  eval::Verdict verdict = eval::Verdict::compile_error;
  Outcome outcome = Outcome::negative;
  double ratio = 0;                         // r over its parent
  std::optional<double> speedup_ref;        // vs the reference
  std::optional<int64_t> parent_id;
  std::string optimisation;                 // as recorded, whole
  std::string error_signature;              // its own (empty when correct)
  std::string backend;                      // its toolchain's backend: the language of its code
  CaseLineage lineage = CaseLineage::none;
  int ancestor = 0;                         // CaseLineage::ancestor: generations above the incumbent
  bool similar_op = false;                  // a best kernel found through a similar op's summary
  // A best kernel of the query's op that is not the query's incumbent: the incumbent's case.
  std::optional<int64_t> other_incumbent;
  // A fix (RetrievedItem::failed_case set): the failed case's error signature and message, as
  // recorded; nullopt when retrieval could not read that case.
  std::optional<std::string> failed_signature;
  std::string failed_message;
  std::optional<std::string> code;          // a best kernel's whole source (nullopt: none stored)
  std::string journal;                      // a summary's or fix's journal, whole ("" for kernels)
};

// One item retrieval returns: facts only. Its prompt text is written by the agent
// (agent/memory_items.h: render_item, item_tokens).
struct RetrievedItem {
  enum class Kind { case_summary, lesson, best_kernel };
  Kind kind = Kind::lesson;
  std::string id;               // "case:123", "kernel:123", "lesson:L0001a2b"
  double score = 0;
  std::map<std::string, double> score_parts;  // "lexical", "similarity", "graph", "value", ...
  bool foreign = false;         // from another target or toolchain: feasibility, not speed
  bool quarantined = false;     // a case awaiting re-verification: not evidence of speed
  std::string target;
  std::string op;
  // Relevance facts the prompt's admission uses: the case's op category, or the lesson's scope
  // category ("" for a lesson of any op); whether a case's op computes something structurally
  // close to the query's (the op itself, the same category, or a matching signature shape and
  // arithmetic intensity: task_structurally_close); the learned value for the query's stage
  // (the unweighted "value" part: > 0 once the prompts that used the item did well).
  std::string category;
  bool structurally_close = false;
  double learned = 0;
  // The case's id (0 for a lesson), the failed case a fix item fixed, and the error signature
  // the item is about (a fix lesson's, a fix's failed case's, or a failed case's own).
  int64_t case_id = 0;
  std::optional<int64_t> failed_case;
  std::string error_signature;
  // What the item is made of: `lesson` for Kind::lesson, `kase` for the other kinds.
  std::optional<RetrievedLesson> lesson;
  std::optional<RetrievedCase> kase;
};

// One prompt's use of retrieved items, for crediting outcomes back.
struct RetrievalLogEntry {
  std::string prompt_id;
  int64_t case_id = 0;          // the attempt the prompt produced (0 when none)
  Stage stage = Stage::draft;
  std::vector<std::pair<std::string, double>> items;  // item id and its score
  std::map<std::string, int64_t> tier_tokens;         // "hot", "warm", "cold" -> tokens
};

// One import (`kope memory import`, `merge`, the starter experience) as the import log keeps it.
struct ImportRecord {
  int64_t id = 0;
  std::string origin;           // instance id of the exporting database
  std::string source;           // the file or database imported
  bool foreign = false;         // imported as experience from other hardware
  int64_t cases_added = 0;
  int64_t lessons_added = 0;
  std::string imported_at;
  std::string provenance;       // JSON object the export carried ("" when it carried none)
};

struct Stats {
  int64_t tasks = 0;
  int64_t cases = 0;
  int64_t lessons = 0;
  int64_t targets = 0;
  int64_t bytes = 0;            // database file plus WAL
  // Details:
  int64_t toolchains = 0;
  int64_t runs = 0;
  int64_t quarantined = 0;      // cases awaiting re-verification
  int64_t foreign_cases = 0;
  int64_t lessons_active = 0;
  int64_t lesson_deltas = 0;
  int64_t prompts = 0;          // retrieval log entries
  int64_t prompts_credited = 0;
  int64_t code_blobs = 0;
  int64_t code_bytes_raw = 0;
  int64_t code_bytes_stored = 0;  // compressed
  int schema_version = 0;
  std::string instance;         // this database's instance id
  std::map<std::string, int64_t> by_verdict;
  std::map<std::string, int64_t> by_outcome;
  std::map<std::string, int64_t> by_stage;
  std::map<std::string, int64_t> lessons_by_status;
  std::vector<ImportRecord> imports;  // oldest first
};

// Filters for Store::cases (empty / unset = any). Results are newest first.
struct CaseFilter {
  std::string op;
  std::string spec_hash;
  std::string target;
  std::string toolchain;
  std::string run_id;
  std::string not_run_id;         // cases of every run but this one
  std::optional<Stage> stage;
  std::optional<eval::Verdict> verdict;
  std::optional<Outcome> outcome;
  std::optional<bool> quarantined;  // true: quarantined or refuted only
  std::optional<bool> foreign_origin;
  std::string error_signature;
  int limit = 100;
  int64_t before_id = 0;          // > 0: only ids below (paging)
  bool with_code = false;         // decompress the code (costly for long listings)
};

struct LessonFilter {
  LessonScope scope;              // compatible scopes, as in Store::lessons
  std::optional<LessonKind> kind;
  std::optional<LessonStatus> status;  // unset: every status
  std::string text;               // lexical search (FTS5) over title and text
  int limit = 200;
};

// One case in a lineage forest, in depth-first order (parents before children).
struct LineageNode {
  int64_t id = 0;
  std::optional<int64_t> parent_id;
  int depth = 0;
  std::string target;
  std::string run_id;
  Stage stage = Stage::draft;
  eval::Verdict verdict = eval::Verdict::compile_error;
  Outcome outcome = Outcome::negative;
  double ratio = 0;
  std::optional<double> speedup_vs_reference;
  double downstream = 0;
  std::string optimisation;
  QuarantineStatus quarantine_status = QuarantineStatus::none;
};

struct ExportOptions {
  std::string op;                 // only this op ("" = all)
  std::string target;             // only this target ("" = all)
  int64_t max_cases = 0;          // dot only: newest N cases (0 = all)
  std::string provenance;         // json only: a JSON object written as the export's
                                  // "provenance" (who made it, with which model, from which runs)
};

struct ImportOptions {
  bool foreign = false;           // mark everything imported as from another machine
  std::string source;             // file or database name, for the import log
};

struct ImportReport {
  std::string origin;             // instance id of the exporting database
  int64_t cases_added = 0;
  int64_t cases_skipped = 0;      // already present (idempotent re-import)
  int64_t cases_renamed = 0;      // natural key collided with a different case; kept under a new key
  int64_t lessons_added = 0;
  int64_t lessons_merged = 0;     // near duplicates merged into existing lessons
  int64_t lessons_skipped = 0;
  std::string provenance;         // the export's "provenance" object as JSON ("" when none)
};

struct CheckReport {
  std::vector<std::string> problems;  // empty: healthy
  int64_t cases_checked = 0;
  int64_t blobs_checked = 0;
  int64_t lessons_checked = 0;
  bool ok() const { return problems.empty(); }
};

// The parent's facts the step rules read (the began-from case as the store holds it).
struct ParentFacts {
  eval::Verdict verdict = eval::Verdict::compile_error;
  std::optional<double> speedup_vs_reference;
  std::string error_signature;
};

// What the store computes for an attempt (the rules of the header comment, docs/design.md §4).
// The store is the one owner of these rules: callers read them back from assess_attempt or
// record_attempt, never compute them themselves.
struct CaseAssessment {
  double ratio = 0;               // r
  Outcome outcome = Outcome::negative;
  std::string error_signature;    // normalised ("" for a correct case)
  std::string quarantine_reason;  // why a correct case is quarantined ("" when it is not)
};

// The rules applied to `c` with its parent (nullptr for a root): r (speedup_vs_reference over
// the parent's when the parent is correct and timed, else over the reference; the caller's
// speedup_vs_parent for a correct case without timings, else 1; 0 when not correct), the
// outcome from r, the error signature (c.error_signature when set, else error_signature() of the
// verdict) and the quarantine reason (hardware floor, roofline, jump over the parent, speedup
// over the reference, c.quarantined). Pure function, thread-safe; every Store kind applies it.
CaseAssessment assess_case(const CaseRecord& c, const ParentFacts* parent);

// A recorded case with what the store computed for it (for a retried write: what it computed
// the first time).
struct RecordedCase {
  int64_t id = 0;
  CaseAssessment assessment;
};

// What the agent needs from the memory (docs/design.md §1, §4): recording attempts, reading
// cases back, lessons through their deltas, retrieval and credit. Thread-safe.
class Store {
 public:
  virtual ~Store() = default;

  // Appends a case (idempotent on natural_key) and updates downstream scores. Returns its id and
  // the assessment (assess_case with the stored parent) it was recorded with. The store computes
  // r, the outcome, the error signature (when empty), quarantine and d(v); a retry with a known
  // natural key returns the recorded case and changes nothing. Fails with usage (no natural key,
  // op or target; non-finite speedups), not_found (the parent does not exist),
  // io or corrupt (the database).
  virtual Result<RecordedCase> record_attempt(const CaseRecord& c) = 0;
  // What record_attempt would compute for `c` now (assess_case with its parent as stored),
  // without writing: for callers that state the outcome in the record itself (the journal).
  // Fails with not_found when the parent does not exist.
  virtual Result<CaseAssessment> assess_attempt(const CaseRecord& c) = 0;
  // record_attempt's id alone.
  Result<int64_t> record_case(const CaseRecord& c);
  // The case with its code decompressed; nullopt when there is none.
  virtual Result<std::optional<CaseRecord>> get_case(int64_t id) = 0;
  virtual Result<std::optional<CaseRecord>> find_case(const std::string& natural_key) = 0;
  // The fastest correct, non-quarantined cases for an op on a target ("" = any), best first.
  // Cases imported as foreign are never included (speed does not transfer).
  virtual Result<std::vector<CaseRecord>> best_cases(const std::string& op, const std::string& target, int limit) = 0;
  // Cases matching `filter`, newest first, at most filter.limit.
  virtual Result<std::vector<CaseRecord>> cases(const CaseFilter& filter) = 0;

  // Applies one logged delta; returns the lesson id (for an add that duplicates an existing
  // lesson, that lesson's id). Fails with usage (empty lesson, merge into itself or into a
  // deprecated lesson, change of a merged lesson) or not_found (unknown lesson or case).
  virtual Result<std::string> apply(const LessonDelta& delta) = 0;
  // Active lessons whose scope is compatible with `filter` (an empty field on either side matches
  // anything), most helpful first.
  virtual Result<std::vector<Lesson>> lessons(const LessonScope& filter) = 0;

  // Candidate items for a state, best first, at most q.limit (see the header comment): their
  // facts, with no prompt text (agent/memory_items.h writes that).
  virtual Result<std::vector<RetrievedItem>> retrieve(const RetrievalQuery& q) = 0;
  // Records which items went into a prompt. Logging the same prompt again adds nothing but may
  // set a case id that was 0 before.
  virtual Status log_retrieval(const RetrievalLogEntry& entry) = 0;
  // Moves the learned values of the items used by `prompt_id` toward `reward` for its stage.
  // A prompt is credited once; a second credit succeeds and changes nothing. Fails with
  // not_found for a prompt that was never logged, usage for a non-finite reward.
  virtual Status credit(const std::string& prompt_id, double reward) = 0;

  // Re-verification of a quarantined case (the loop's at the end of an op, `kope memory
  // verify`): confirmed lifts the quarantine (the case becomes speed evidence and its d(v)
  // chain is updated), otherwise it is marked refuted for good; `note` (why) is kept with it.
  // Fails with not_found for an unknown case, usage for a case that is not quarantined (never
  // was, or already verified) and for confirming a refuted one.
  virtual Status verify_case(int64_t id, bool confirmed, const std::string& note) = 0;
};

// Administration of a memory database (`kope memory`, reports, imports, the starter
// experience): batches, listings, lineage, re-verification, exchange, checks and meta values.
// Thread-safe. Every store kind kept in a file or a server implements it beside Store.
class StoreAdmin {
 public:
  virtual ~StoreAdmin() = default;

  virtual Result<Stats> stats() = 0;

  // Records many cases in one transaction (parents may precede children in the same batch).
  // Idempotent per case as record_attempt. All or nothing.
  virtual Result<std::vector<int64_t>> record_cases(const std::vector<CaseRecord>& cs) = 0;
  // Applies many lesson deltas in one transaction, in order (all or nothing); ids as apply().
  virtual Result<std::vector<std::string>> apply_all(const std::vector<LessonDelta>& deltas) = 0;
  // The began-from forest of an op's cases (on one target, or all for ""), parents first.
  virtual Result<std::vector<LineageNode>> lineage(const std::string& op, const std::string& target) = 0;
  virtual Result<std::optional<Lesson>> get_lesson(const std::string& id) = 0;
  virtual Result<std::vector<Lesson>> find_lessons(const LessonFilter& filter) = 0;
  virtual Result<std::vector<LessonLogEntry>> lesson_history(const std::string& id) = 0;
  // The log entry of a prompt, if it was logged.
  virtual Result<std::optional<RetrievalLogEntry>> retrieval_entry(const std::string& prompt_id) = 0;

  // Writes every task, case (with code and journal), lesson (with history) as one JSON document.
  virtual Status export_json(std::ostream& out, const ExportOptions& options) = 0;
  // Writes the lineage forest as a Graphviz digraph (cases coloured by outcome, lessons linked to
  // the cases they came from).
  virtual Status export_dot(std::ostream& out, const ExportOptions& options) = 0;
  // Imports an export_json document; idempotent (a second import adds nothing) and keeps
  // provenance (origin instance, natural keys, lesson ids). All or nothing.
  virtual Result<ImportReport> import_json(std::string_view json, const ImportOptions& options) = 0;
  // Imports every case and lesson of another kope database (read through a private copy, so the
  // other file is never modified).
  virtual Result<ImportReport> merge_from(const std::filesystem::path& other, const ImportOptions& options) = 0;
  // The store's integrity check plus kope's invariants: lineage points to earlier existing
  // cases, code blobs present and matching their hashes, d(v) and summaries consistent, lesson
  // logs replaying to the lessons' current state, search indexes sound.
  virtual Result<CheckReport> check() = 0;

  // Small named values kept with the database (e.g. that the starter experience was imported).
  // Keys are free text; "instance", "created_at" and "created_by" are the store's own and
  // cannot be set. get_meta returns nullopt for an unknown key; meta_with_prefix every key
  // beginning with `prefix`, in key order.
  virtual Result<std::optional<std::string>> get_meta(const std::string& key) = 0;
  virtual Status set_meta(const std::string& key, const std::string& value) = 0;
  virtual Result<std::map<std::string, std::string>> meta_with_prefix(const std::string& prefix) = 0;

  // Where the database lives (a file path; empty for a private in-memory database).
  virtual std::filesystem::path path() const = 0;
};

// A memory database: the agent's Store and its administration, what open_store returns and what
// a store kind (SQLite here) implements.
class Database : public Store, public StoreAdmin {};

// Opens (creating and migrating as needed) the store at `location`: the SQLite file at that
// path, or, for a URL postgresql://user@host[:port]/db (also postgres://, any libpq URL), the
// PostgreSQL database (one kope memory per database or schema; docs/design.md §4). Fails with
// corrupt for a damaged file, a file or database that is not a kope memory, or a schema from a
// newer kope, naming it; with io when it cannot be opened or reached, or is locked past the busy
// timeout.
Result<std::unique_ptr<Database>> open_store(const std::filesystem::path& location);

// True when a memory location is a database URL (postgresql://, postgres://) rather than a file.
bool is_store_url(std::string_view location);

// Copies the database at `from` to a new file `to` (a consistent snapshot through SQLite's
// backup API, WAL included; `from` is never modified): the same cases, ids, lessons, learned
// values and logs. An existing `to` (and its -wal/-shm) is replaced atomically. Fails with
// not_found when `from` does not exist, corrupt when it is not a kope database, io otherwise.
Status copy_database(const std::filesystem::path& from, const std::filesystem::path& to);

// The schema version this build writes (PRAGMA user_version of a current database).
int store_schema_version();

// The default database: $KOPE_MEMORY (a path or a postgresql:// URL), else data_dir()/memory.db.
std::filesystem::path default_store_path();

}  // namespace kope::memory
