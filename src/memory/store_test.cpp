#include <gtest/gtest.h>

#include <sqlite3.h>

#include <atomic>
#include <mutex>
#include <set>
#include <thread>

#include "memory/schema.h"
#include "memory/test_util.h"

namespace kope::memory {
namespace {

using namespace testing;

int64_t record(Database& s, const CaseRecord& c) {
  auto id = s.record_case(c);
  EXPECT_TRUE(id.has_value()) << (id ? "" : id.error().message);
  return id ? *id : 0;
}

CaseRecord get(Database& s, int64_t id) {
  auto c = s.get_case(id);
  EXPECT_TRUE(c.has_value() && c->has_value());
  return c && *c ? **c : CaseRecord{};
}

class StoreTest : public StoreKindTest {};
KOPE_STORE_KINDS(StoreTest);

TEST_P(StoreTest, RecordsAndReadsBackEveryField) {
  auto t = temp_store();
  CaseRecord c = make_case("run-1/softmax/0", "softmax", 2.5);
  c.speedup_vs_library = 0.8;
  c.tokens_prompt = 1200;
  c.tokens_completion = 340;
  c.wall_seconds = 12.5;
  c.timings.push_back({4, 55.0, 0.5, 130.0, 60.0, true, 0.35, std::nullopt});
  int64_t id = record(*t.store, c);
  ASSERT_GT(id, 0);
  CaseRecord r = get(*t.store, id);
  EXPECT_EQ(r.id, id);
  EXPECT_EQ(r.natural_key, c.natural_key);
  EXPECT_EQ(r.task.op, "softmax");
  EXPECT_EQ(r.task.category, "normalization");
  EXPECT_EQ(r.task.signature, c.task.signature);
  EXPECT_DOUBLE_EQ(r.task.arithmetic_intensity, 0.6);
  EXPECT_EQ(r.hardware.target, k_native);
  EXPECT_EQ(r.hardware.cpu_model, "Test CPU");
  EXPECT_EQ(r.toolchain.id, c.toolchain.id);
  EXPECT_EQ(r.code, c.code);
  EXPECT_EQ(r.code_hash.size(), 64u);
  EXPECT_EQ(r.verdict, eval::Verdict::correct);
  EXPECT_EQ(r.journal, c.journal);
  ASSERT_EQ(r.timings.size(), 2u);
  EXPECT_EQ(r.timings[1].case_index, 4);
  EXPECT_EQ(r.timings[1].library_us, 60.0);
  EXPECT_FALSE(r.timings[0].library_us);
  EXPECT_TRUE(r.timings[1].disturbed);
  EXPECT_DOUBLE_EQ(r.timings[1].contention, 0.35);
  EXPECT_FALSE(r.timings[0].disturbed);
  EXPECT_EQ(r.speedup_vs_reference, 2.5);
  EXPECT_EQ(r.speedup_vs_library, 0.8);
  EXPECT_FALSE(r.speedup_vs_parent);  // a root has no parent speedup
  EXPECT_DOUBLE_EQ(r.ratio, 2.5);
  EXPECT_EQ(r.outcome, Outcome::effective);
  EXPECT_EQ(r.tokens_prompt, 1200);
  EXPECT_EQ(r.wall_seconds, 12.5);
  EXPECT_FALSE(r.created_at.empty());
  EXPECT_FALSE(r.quarantined);
  EXPECT_EQ(quarantine_status_name(r.quarantine_status), "");
  EXPECT_FALSE(r.origin.empty());
  auto by_key = t.store->find_case(c.natural_key);
  ASSERT_TRUE(by_key && *by_key);
  EXPECT_EQ((*by_key)->id, id);
  auto missing = t.store->get_case(id + 100);
  ASSERT_TRUE(missing);
  EXPECT_FALSE(*missing);
}

// The typed signature shape travels with the task (schema 3); a task recorded without one (an
// older kope's) is read from its text until a record from the spec fills it in.
TEST_P(StoreTest, ATasksTypedSignatureShapeRoundTrips) {
  auto t = temp_store();
  CaseRecord typed = make_case("run-1/silu_bf16/0", "silu_bf16", 1.5);
  typed.task.signature = "extern \"C\" void kope_kernel(const uint16_t* x /* bf16 */, uint16_t* y /* bf16 */, int64_t N, int64_t D);";
  typed.task.signature_shape = *spec::SignatureShape::parse("in:bf16,out:bf16,dim,dim");
  CaseRecord older = make_case("run-1/softmax/0", "softmax", 2.0);
  ASSERT_FALSE(older.task.signature_shape);
  int64_t a = record(*t.store, typed);
  int64_t b = record(*t.store, older);
  CaseRecord ra = get(*t.store, a);
  ASSERT_TRUE(ra.task.signature_shape);
  EXPECT_EQ(*ra.task.signature_shape, *typed.task.signature_shape);
  auto best = t.store->best_cases("silu_bf16", "", 5);  // what replay reads
  ASSERT_TRUE(best && best->size() == 1);
  EXPECT_EQ((*best)[0].task.signature_shape, typed.task.signature_shape);
  CaseRecord rb = get(*t.store, b);
  EXPECT_FALSE(rb.task.signature_shape);
  EXPECT_EQ(task_shape(rb.task).str(), "in:f32,out:f32,dim,dim");  // from the text
  // The same task (op and spec hash) recorded again from its spec: the row gets the shape, once.
  CaseRecord again = make_case("run-2/softmax/1", "softmax", 2.2);
  again.task.signature_shape = *spec::SignatureShape::parse("in:f32,out:f32,dim,dim");
  record(*t.store, again);
  ASSERT_TRUE(get(*t.store, b).task.signature_shape);
  EXPECT_EQ(get(*t.store, b).task.signature_shape->str(), "in:f32,out:f32,dim,dim");
  EXPECT_EQ(t.store->stats()->tasks, 2);
  EXPECT_TRUE(t.store->check()->ok());
}

TEST_P(StoreTest, ComputesTheErrorSignatureWhenEmpty) {
  auto t = temp_store();
  int64_t a = record(*t.store, make_case("a", "softmax", 0));
  CaseRecord b = make_case("b", "softmax", 0);
  b.diagnostics = "/tmp/x/candidate.cpp:40:9: error: 'bar' was not declared in this scope";
  int64_t bid = record(*t.store, b);
  EXPECT_EQ(get(*t.store, a).error_signature, "compile_error: error: 'X' was not declared in this scope");
  EXPECT_EQ(get(*t.store, a).error_signature, get(*t.store, bid).error_signature);
}

TEST_P(StoreTest, RetriedWritesAreIdempotent) {
  auto t = temp_store();
  CaseRecord c = make_case("run-1/softmax/7", "softmax", 1.5);
  int64_t id = record(*t.store, c);
  c.speedup_vs_reference = 9.0;  // a retry never changes what was recorded
  c.code = "different";
  EXPECT_EQ(record(*t.store, c), id);
  auto ids = t.store->record_cases({c, c});
  ASSERT_TRUE(ids);
  EXPECT_EQ(*ids, (std::vector<int64_t>{id, id}));
  auto stats = t.store->stats();
  ASSERT_TRUE(stats);
  EXPECT_EQ(stats->cases, 1);
  EXPECT_EQ(stats->code_blobs, 1);
  EXPECT_EQ(get(*t.store, id).speedup_vs_reference, 1.5);
}

TEST_P(StoreTest, CodeIsContentAddressedAndCompressed) {
  auto t = temp_store();
  CaseRecord a = make_case("a", "softmax", 1.5);
  a.code = std::string(20000, ' ') + "extern \"C\" void kope_kernel() {}";
  CaseRecord b = make_case("b", "softmax", 1.6);
  b.code = a.code;
  record(*t.store, a);
  record(*t.store, b);
  auto stats = t.store->stats();
  ASSERT_TRUE(stats);
  EXPECT_EQ(stats->code_blobs, 1);
  EXPECT_EQ(stats->code_bytes_raw, static_cast<int64_t>(a.code.size()));
  EXPECT_LT(stats->code_bytes_stored, 1000);
}

TEST_P(StoreTest, DownstreamScoresMatchAHandComputedTree) {
  auto t = temp_store();
  // A (2.0x) -> B (3.0x, r=1.5) -> D (3.3x, r=1.1); A -> C (failed, r=0).
  int64_t a = record(*t.store, make_case("A", "softmax", 2.0));
  int64_t b = record(*t.store, make_case("B", "softmax", 3.0, k_native, a));
  int64_t c = record(*t.store, make_case("C", "softmax", 0, k_native, a));
  int64_t d = record(*t.store, make_case("D", "softmax", 3.3, k_native, b));
  EXPECT_NEAR(get(*t.store, d).downstream, 0.5 * 1.1, 1e-12);
  EXPECT_NEAR(get(*t.store, c).downstream, 0.0, 1e-12);
  EXPECT_NEAR(get(*t.store, b).downstream, 0.5 * 1.5 + 0.35 * 0.55, 1e-12);
  EXPECT_NEAR(get(*t.store, a).downstream, 0.5 * 2.0 + 0.35 * (0.9425 + 0.0), 1e-12);
  EXPECT_NEAR(get(*t.store, a).downstream, 1.329875, 1e-12);
  EXPECT_NEAR(get(*t.store, b).speedup_vs_parent.value_or(0), 1.5, 1e-12);
  auto check = t.store->check();
  ASSERT_TRUE(check) << check.error().message;
  EXPECT_TRUE(check->ok()) << check->problems.front();
}

TEST_P(StoreTest, OutcomeLabelsFromTheRatioToTheParent) {
  auto t = temp_store();
  int64_t root = record(*t.store, make_case("root", "softmax", 2.0));  // r = 2 vs the reference
  EXPECT_EQ(get(*t.store, root).outcome, Outcome::effective);
  struct Row {
    const char* key;
    double speedup;
    Outcome expected;
  };
  for (const Row& row : {Row{"eff", 2.1, Outcome::effective}, Row{"part", 2.0, Outcome::partial},
                         Row{"part2", 2.09, Outcome::partial}, Row{"inef", 1.7, Outcome::ineffective},
                         Row{"neg", 1.69, Outcome::negative}, Row{"fail", 0, Outcome::negative}}) {
    int64_t id = record(*t.store, make_case(row.key, "softmax", row.speedup, k_native, root));
    EXPECT_EQ(get(*t.store, id).outcome, row.expected) << row.key;
  }
  EXPECT_DOUBLE_EQ(get(*t.store, record(*t.store, make_case("exact", "softmax", 2.1, k_native, root))).ratio, 1.05);
  // Roots are measured against the reference: exactly 1.05x is effective, 1.0x partial.
  EXPECT_EQ(get(*t.store, record(*t.store, make_case("r105", "softmax", 1.05))).outcome, Outcome::effective);
  EXPECT_EQ(get(*t.store, record(*t.store, make_case("r100", "softmax", 1.0))).outcome, Outcome::partial);
  EXPECT_EQ(get(*t.store, record(*t.store, make_case("r085", "softmax", 0.85))).outcome, Outcome::ineffective);
  // A repair of a broken parent is measured against the reference too.
  int64_t broken = record(*t.store, make_case("broken", "softmax", 0, k_native, root));
  int64_t fixed = record(*t.store, make_case("fixed", "softmax", 1.2, k_native, broken));
  EXPECT_DOUBLE_EQ(get(*t.store, fixed).ratio, 1.2);
}

// With the evaluator's per-case floors, a kernel beyond 100% of the working-set roofline is not
// quarantined (the model's bug, reported by the evaluator); one below the conservative floor
// (faster than the fastest cache level and the peak allow) is.
TEST_P(StoreTest, BeyondTheRooflineIsNotQuarantinedBelowTheFloorIs) {
  auto t = temp_store();
  int64_t root = record(*t.store, make_case("root", "softmax", 2.0));
  CaseRecord honest = make_case("honest-beyond-roofline", "softmax", 2.2, k_native, root);
  honest.fraction_of_roofline = 1.4;
  honest.timings[0].floor_us = honest.timings[0].median_us * 0.6;  // above its floor
  int64_t h = record(*t.store, honest);
  EXPECT_FALSE(get(*t.store, h).quarantined) << get(*t.store, h).quarantine_reason;
  EXPECT_EQ(quarantine_status_name(get(*t.store, h).quarantine_status), "");
  EXPECT_DOUBLE_EQ(*get(*t.store, h).timings[0].floor_us, honest.timings[0].median_us * 0.6);  // floors are kept

  CaseRecord impossible = make_case("below-floor", "softmax", 2.3, k_native, root);
  impossible.fraction_of_roofline = 0.9;
  impossible.timings[0].floor_us = impossible.timings[0].median_us * 1.5;
  int64_t q = record(*t.store, impossible);
  EXPECT_TRUE(get(*t.store, q).quarantined);
  EXPECT_NE(get(*t.store, q).quarantine_reason.find("faster than the hardware allows"), std::string::npos)
      << get(*t.store, q).quarantine_reason;
  EXPECT_NE(get(*t.store, q).quarantine_reason.find("below its floor"), std::string::npos);

  auto best = t.store->best_cases("softmax", k_native, 10);
  ASSERT_TRUE(best);
  ASSERT_EQ(best->size(), 2u);
  EXPECT_EQ((*best)[0].id, h);  // the honest win is speed evidence
}

TEST_P(StoreTest, ImplausibleWinsAreQuarantinedUntilVerified) {
  auto t = temp_store();
  int64_t root = record(*t.store, make_case("root", "softmax", 2.0));
  CaseRecord beyond = make_case("beyond-roofline", "softmax", 2.2, k_native, root);
  beyond.fraction_of_roofline = 1.4;
  int64_t q1 = record(*t.store, beyond);
  int64_t q2 = record(*t.store, make_case("jump", "softmax", 40.0, k_native, root));  // 20x over its parent
  int64_t fine = record(*t.store, make_case("fine", "softmax", 3.0, k_native, root));
  EXPECT_TRUE(get(*t.store, q1).quarantined);
  EXPECT_EQ(quarantine_status_name(get(*t.store, q1).quarantine_status), "quarantined");
  EXPECT_NE(get(*t.store, q1).quarantine_reason.find("roofline"), std::string::npos);
  EXPECT_TRUE(get(*t.store, q2).quarantined);
  EXPECT_FALSE(get(*t.store, fine).quarantined);
  EXPECT_DOUBLE_EQ(get(*t.store, q2).downstream, 0.0);  // no speed evidence yet

  auto best = t.store->best_cases("softmax", k_native, 10);
  ASSERT_TRUE(best);
  ASSERT_EQ(best->size(), 2u);
  EXPECT_EQ((*best)[0].id, fine);
  EXPECT_EQ((*best)[1].id, root);

  // A lesson drawn from a quarantined case waits in quarantine too.
  LessonDelta add;
  add.lesson.kind = LessonKind::strategy;
  add.lesson.title = "Tile rows into registers";
  add.lesson.text = "Keeping a row tile in registers gave the jump";
  add.source_case = q2;
  auto lid = t.store->apply(add);
  ASSERT_TRUE(lid);
  EXPECT_EQ((*t.store->get_lesson(*lid))->status, LessonStatus::quarantined);

  double root_d_before = get(*t.store, root).downstream;
  ASSERT_TRUE(t.store->verify_case(q2, true, "re-timed on an idle machine"));
  EXPECT_EQ(quarantine_status_name(get(*t.store, q2).quarantine_status), "verified");
  EXPECT_FALSE(get(*t.store, q2).quarantined);
  EXPECT_NEAR(get(*t.store, q2).downstream, 0.5 * 20.0, 1e-12);
  EXPECT_NEAR(get(*t.store, root).downstream - root_d_before, 0.35 * 10.0, 1e-9);
  best = t.store->best_cases("softmax", k_native, 1);
  ASSERT_TRUE(best && best->size() == 1);
  EXPECT_EQ((*best)[0].id, q2);
  EXPECT_EQ((*t.store->get_lesson(*lid))->status, LessonStatus::active);

  ASSERT_TRUE(t.store->verify_case(q1, false, "timing artefact"));
  EXPECT_EQ(quarantine_status_name(get(*t.store, q1).quarantine_status), "refuted");
  EXPECT_TRUE(get(*t.store, q1).quarantined);
  auto again = t.store->verify_case(q1, true, "");
  ASSERT_FALSE(again);
  EXPECT_EQ(again.error().kind, ErrorKind::usage);
  EXPECT_FALSE(t.store->verify_case(fine, true, ""));
  auto check = t.store->check();
  ASSERT_TRUE(check) << check.error().message;
  EXPECT_TRUE(check->ok()) << check->problems.front();
}

TEST_P(StoreTest, BestCasesFilterByTargetAndSkipFailures) {
  auto t = temp_store();
  record(*t.store, make_case("n1", "softmax", 2.0));
  record(*t.store, make_case("n2", "softmax", 0));
  record(*t.store, make_case("f1", "softmax", 9.0, k_foreign));
  record(*t.store, make_case("other-op", "layernorm", 7.0));
  auto native = t.store->best_cases("softmax", k_native, 10);
  ASSERT_TRUE(native);
  ASSERT_EQ(native->size(), 1u);
  EXPECT_EQ((*native)[0].natural_key, "n1");
  EXPECT_FALSE((*native)[0].code.empty());
  auto any = t.store->best_cases("softmax", "", 10);
  ASSERT_TRUE(any && any->size() == 2);
  EXPECT_EQ((*any)[0].natural_key, "f1");
}

TEST_P(StoreTest, BatchesLinkByParentKeyAndAreAllOrNothing) {
  auto t = temp_store();
  CaseRecord root = make_case("b/root", "softmax", 1.5);
  CaseRecord child = make_case("b/child", "softmax", 3.0);
  child.parent_key = "b/root";
  auto ids = t.store->record_cases({root, child});
  ASSERT_TRUE(ids) << ids.error().message;
  EXPECT_EQ(get(*t.store, (*ids)[1]).parent_id, (*ids)[0]);
  EXPECT_DOUBLE_EQ(get(*t.store, (*ids)[1]).ratio, 2.0);

  CaseRecord ok = make_case("b/ok", "softmax", 1.1);
  CaseRecord bad = make_case("b/bad", "softmax", 1.1);
  bad.speedup_vs_reference = -1.0;  // the store cannot record it: the batch fails
  auto failed = t.store->record_cases({ok, bad});
  ASSERT_FALSE(failed);
  EXPECT_EQ(failed.error().kind, ErrorKind::usage);
  EXPECT_FALSE(*t.store->find_case("b/ok"));
  // The store still works after the rolled-back batch (caches were reset).
  CaseRecord again = make_case("b/again", "newop", 1.1);
  EXPECT_GT(record(*t.store, again), 0);
}

// The caches of the small stores go with a rolled-back write: a case the failed batch recorded
// (and CaseStore remembered for its children) is not found as a parent afterwards, and its new
// task, hardware and toolchain rows are added again.
TEST_P(StoreTest, ARolledBackBatchLeavesNoCachedIds) {
  auto t = temp_store();
  CaseRecord ok = make_case("r/ok", "fresh_op", 1.1, k_foreign);
  CaseRecord bad = make_case("r/bad", "fresh_op", 1.1, k_foreign);
  bad.speedup_vs_reference = -1.0;
  ASSERT_FALSE(t.store->record_cases({ok, bad}));

  CaseRecord child = make_case("r/child", "fresh_op", 1.2, k_foreign);
  child.parent_key = "r/ok";
  auto orphan = t.store->record_attempt(child);
  ASSERT_FALSE(orphan);
  EXPECT_EQ(orphan.error().kind, ErrorKind::not_found) << orphan.error().message;

  int64_t id = record(*t.store, make_case("r/again", "fresh_op", 1.1, k_foreign));
  ASSERT_GT(id, 0);
  CaseRecord again = get(*t.store, id);
  EXPECT_EQ(again.task.op, "fresh_op");
  EXPECT_EQ(again.hardware.target, k_foreign);
  auto check = t.store->check();
  ASSERT_TRUE(check) << check.error().message;
  EXPECT_TRUE(check->ok()) << check->problems.front();
}

// A batch (one transaction: terms counted once per batch, in one statement on PostgreSQL) and
// the same cases one at a time leave the same term counts and d(v): cases with hundreds of
// distinct terms, non-ASCII ones, a case with no terms at all, a key twice in the batch and a
// key recorded before it.
TEST_P(StoreTest, BatchedWritesCountTermsAsSingleOnes) {
  std::vector<CaseRecord> cs;
  std::string many;
  for (int i = 0; i < 600; ++i) many += fmt::format(" word{} größe{} naïve", i, i % 7);
  CaseRecord wide = make_case("t/wide", "softmax", 1.5);
  wide.journal = many;
  CaseRecord overlap = make_case("t/overlap", "softmax", 2.0);
  overlap.parent_key = "t/wide";
  overlap.stage = Stage::refine;
  overlap.journal = many.substr(0, many.size() / 2) + " fresh";
  CaseRecord silent = make_case("t/silent", "softmax", 0);
  silent.optimisation.clear();
  silent.journal.clear();
  silent.message.clear();
  silent.diagnostics.clear();
  silent.error_signature = " ";
  CaseRecord grandchild = make_case("t/grandchild", "softmax", 2.5);
  grandchild.parent_key = "t/overlap";
  grandchild.stage = Stage::refine;
  CaseRecord before = make_case("t/before", "softmax", 1.1);
  cs = {wide, overlap, silent, overlap, grandchild, before};

  auto one_by_one = temp_store("single.db");
  for (const auto& c : cs) record(*one_by_one.store, c);
  auto batched = temp_store("batched.db");
  int64_t before_id = record(*batched.store, before);
  auto ids = batched.store->record_cases(cs);
  ASSERT_TRUE(ids) << ids.error().message;
  ASSERT_EQ(ids->size(), cs.size());
  EXPECT_EQ((*ids)[1], (*ids)[3]);
  EXPECT_EQ((*ids)[5], before_id);
  EXPECT_EQ(batched.store->stats()->cases, 5);

  auto rows = [](Database& s, const std::string& sql) {
    Db& db = sqlite(s).db();
    std::vector<std::string> out;
    auto st = db.prepare(sql);
    EXPECT_TRUE(st) << (st ? "" : st.error().message);
    if (!st) return out;
    for (;;) {
      auto row = st->step();
      EXPECT_TRUE(row) << (row ? "" : row.error().message);
      if (!row || !*row) return out;
      out.push_back(fmt::format("{} {} {:.12g}", st->text(0), st->text(1), st->real(2)));
    }
  };
  const std::string terms = "SELECT CAST(corpus AS TEXT), term, df FROM term_df ORDER BY corpus, term";
  auto single_terms = rows(*one_by_one.store, terms);
  EXPECT_GT(single_terms.size(), 600u);
  EXPECT_EQ(rows(*batched.store, terms), single_terms);
  const std::string downstream = "SELECT c.natural_key, c.natural_key, d.downstream FROM cases c "
                                 "JOIN case_derived d ON d.case_id = c.id ORDER BY c.natural_key";
  EXPECT_EQ(rows(*batched.store, downstream), rows(*one_by_one.store, downstream));
  for (auto* t : {&one_by_one, &batched}) {
    auto check = t->store->check();
    ASSERT_TRUE(check) << check.error().message;
    EXPECT_TRUE(check->ok()) << check->problems.front();
  }
}

TEST_P(StoreTest, RejectsBadCases) {
  auto t = temp_store();
  CaseRecord orphan = make_case("orphan", "softmax", 1.5, k_native, 999);
  auto r = t.store->record_case(orphan);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().kind, ErrorKind::not_found);
  CaseRecord nokey = make_case("", "softmax", 1.5);
  EXPECT_EQ(t.store->record_case(nokey).error().kind, ErrorKind::usage);
  CaseRecord nan = make_case("nan", "softmax", 1.5);
  nan.speedup_vs_reference = std::nan("");
  EXPECT_EQ(t.store->record_case(nan).error().kind, ErrorKind::usage);
  EXPECT_EQ(t.store->stats()->cases, 0);
}

TEST_P(StoreTest, ListsCasesWithFiltersAndLineageInDepthFirstOrder) {
  auto t = temp_store();
  int64_t a = record(*t.store, make_case("A", "softmax", 2.0));
  int64_t b = record(*t.store, make_case("B", "softmax", 3.0, k_native, a));
  int64_t x = record(*t.store, make_case("X", "softmax", 1.0));
  int64_t c = record(*t.store, make_case("C", "softmax", 0, k_native, a));
  int64_t d = record(*t.store, make_case("D", "softmax", 3.3, k_native, b));
  record(*t.store, make_case("F", "softmax", 5.0, k_foreign));
  auto lin = t.store->lineage("softmax", k_native);
  ASSERT_TRUE(lin);
  std::vector<int64_t> order;
  std::vector<int> depth;
  for (const auto& n : *lin) {
    order.push_back(n.id);
    depth.push_back(n.depth);
  }
  EXPECT_EQ(order, (std::vector<int64_t>{a, b, d, c, x}));
  EXPECT_EQ(depth, (std::vector<int>{0, 1, 2, 1, 0}));

  CaseFilter f;
  f.op = "softmax";
  f.verdict = eval::Verdict::compile_error;
  auto failed = t.store->cases(f);
  ASSERT_TRUE(failed && failed->size() == 1);
  EXPECT_EQ((*failed)[0].id, c);
  EXPECT_TRUE((*failed)[0].code.empty());  // not loaded unless asked
  CaseFilter g;
  g.target = k_foreign;
  EXPECT_EQ(t.store->cases(g)->size(), 1u);
  CaseFilter h;
  h.stage = Stage::refine;
  h.outcome = Outcome::effective;
  auto eff = t.store->cases(h);
  ASSERT_TRUE(eff);
  EXPECT_EQ(eff->size(), 2u);  // B and D, newest first
  EXPECT_EQ((*eff)[0].id, d);
  CaseFilter page;
  page.limit = 2;
  page.before_id = d;
  auto p = t.store->cases(page);
  ASSERT_TRUE(p && p->size() == 2);
  EXPECT_EQ((*p)[0].id, c);

  auto s = t.store->stats();
  ASSERT_TRUE(s);
  EXPECT_EQ(s->cases, 6);
  EXPECT_EQ(s->tasks, 1);
  EXPECT_EQ(s->targets, 2);
  EXPECT_EQ(s->by_verdict["compile_error"], 1);
  EXPECT_EQ(s->by_stage["refine"], 3);
  EXPECT_EQ(s->schema_version, store_schema_version());
  EXPECT_GT(s->bytes, 0);
}

TEST(StoreOpen, InMemoryStoreWorksForTests) {
  auto s = open_store(":memory:");
  ASSERT_TRUE(s) << s.error().message;
  auto id = (*s)->record_case(make_case("m", "softmax", 1.2));
  ASSERT_TRUE(id);
  EXPECT_EQ((*(*s)->get_case(*id))->natural_key, "m");
}

TEST(StoreOpen, DefaultPathHonoursKopeMemory) {
  ::setenv("KOPE_MEMORY", "/tmp/somewhere/mem.db", 1);
  EXPECT_EQ(default_store_path(), std::filesystem::path("/tmp/somewhere/mem.db"));
  ::unsetenv("KOPE_MEMORY");
  EXPECT_EQ(default_store_path().filename(), "memory.db");
}

TEST_P(StoreTest, TwoStoresOnOneFileSeeEachOthersWrites) {
  auto t = temp_store();
  auto second = open_store(t.path);
  ASSERT_TRUE(second);
  int64_t id = record(*t.store, make_case("shared", "softmax", 1.3));
  auto seen = (*second)->find_case("shared");
  ASSERT_TRUE(seen && *seen);
  EXPECT_EQ((*seen)->id, id);
  EXPECT_EQ(record(**second, make_case("shared", "softmax", 1.3)), id);
}

TEST_P(StoreTest, ConcurrentWritersThreadsAndConnections) {
  auto t = temp_store();
  auto second = open_store(t.path);
  ASSERT_TRUE(second);
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int w = 0; w < 4; ++w) {
    Database* s = w % 2 == 0 ? t.store.get() : second->get();
    threads.emplace_back([s, w, &failures] {
      std::optional<int64_t> parent;
      for (int i = 0; i < 25; ++i) {
        auto id = s->record_case(make_case(fmt::format("w{}/{}", w, i), "softmax", 1.0 + 0.01 * i, k_native, parent));
        if (!id) {
          ++failures;
          continue;
        }
        parent = *id;
        RetrievalQuery q;
        q.task = task("softmax");
        q.target = k_native;
        if (!s->retrieve(q)) ++failures;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(t.store->stats()->cases, 100);
  auto check = t.store->check();
  ASSERT_TRUE(check) << check.error().message;
  EXPECT_TRUE(check->ok()) << check->problems.front();
}

// Four writers with their own connections, 500 cases each, every natural key written by two of
// them, chains of ten linked by parent key, and near-duplicate lessons added and upvoted by all:
// no case is lost or doubled, d(v) and the summaries agree with the cases (check), and the
// lesson is one lesson whose log counts every vote once.
TEST_P(StoreTest, ConcurrentWritersWithOverlappingKeysLoseAndDoubleNothing) {
  constexpr int k_writers = 4, k_per_writer = 500, k_keys = 1000, k_votes = 10;
  auto t = temp_store();
  std::vector<std::unique_ptr<Database>> stores;
  for (int w = 0; w < k_writers; ++w) {
    auto s = open_store(t.path);
    ASSERT_TRUE(s) << s.error().message;
    stores.push_back(std::move(*s));
  }
  std::atomic<int> failures{0};
  std::vector<std::set<int64_t>> ids_of_key(k_keys);
  std::mutex ids_mutex;
  std::vector<std::thread> threads;
  for (int w = 0; w < k_writers; ++w) {
    threads.emplace_back([&, w] {
      Database& s = *stores[static_cast<size_t>(w)];
      for (int i = 0; i < k_per_writer; ++i) {
        int k = (w * (k_keys / k_writers) + i) % k_keys;  // each key in two writers' ranges
        CaseRecord c = make_case(fmt::format("key/{}", k), "softmax", 1.0 + 0.001 * k);
        if (k % 10 != 0) c.parent_key = fmt::format("key/{}", k - 1);
        auto id = s.record_case(c);
        if (!id) {
          ADD_FAILURE() << id.error().message;
          ++failures;
          continue;
        }
        std::lock_guard lock(ids_mutex);
        ids_of_key[static_cast<size_t>(k)].insert(*id);
      }
      for (int v = 0; v < k_votes; ++v) {
        LessonDelta add;
        add.lesson.kind = LessonKind::strategy;
        add.lesson.title = "Vectorise the inner loop";
        add.lesson.text = fmt::format("Use wide loads over the reduction axis{}", v % 2 ? "." : " ");
        auto lid = s.apply(add);
        if (!lid) {
          ADD_FAILURE() << lid.error().message;
          ++failures;
          continue;
        }
        LessonDelta up;
        up.op = LessonDelta::Op::upvote;
        up.lesson_id = *lid;
        if (!s.apply(up)) ++failures;
      }
    });
  }
  for (auto& th : threads) th.join();
  ASSERT_EQ(failures.load(), 0);
  for (int k = 0; k < k_keys; ++k) EXPECT_EQ(ids_of_key[static_cast<size_t>(k)].size(), 1u) << "key/" << k;
  auto stats = t.store->stats();
  ASSERT_TRUE(stats);
  EXPECT_EQ(stats->cases, k_keys);
  // d(v) of a chain's root, from its ten cases (r = speedup ratio to the parent).
  for (int root = 0; root < k_keys; root += 250) {
    auto chain_root = t.store->find_case(fmt::format("key/{}", root));
    ASSERT_TRUE(chain_root && *chain_root);
    double d = 0;
    for (int k = root + 9; k >= root; --k) {
      double r = k == root ? 1.0 + 0.001 * k : (1.0 + 0.001 * k) / (1.0 + 0.001 * (k - 1));
      d = k_downstream_self * r + k_downstream_self * k_downstream_decay * d;
    }
    EXPECT_NEAR((*chain_root)->downstream, d, 1e-9) << "key/" << root;
  }
  auto lessons = t.store->find_lessons({});
  ASSERT_TRUE(lessons);
  ASSERT_EQ(lessons->size(), 1u);
  EXPECT_EQ((*lessons)[0].helpful, k_writers * k_votes);
  auto history = t.store->lesson_history((*lessons)[0].id);
  ASSERT_TRUE(history);
  int upvotes = 0;
  for (const auto& e : *history) {
    if (e.op == "upvote") EXPECT_EQ(e.helpful_after, ++upvotes);
  }
  EXPECT_EQ(upvotes, k_writers * k_votes);
  auto check = t.store->check();
  ASSERT_TRUE(check) << check.error().message;
  EXPECT_TRUE(check->ok()) << check->problems.front();
}

// PostgreSQL only: the server drops the store's connection inside a write transaction (a trigger
// terminates its own backend once); the store reconnects and sends the write again, so the case
// is recorded once, and reads after a dropped idle connection reconnect too.
TEST(StorePostgres, LostConnectionsAreRetriedAndWritesResentOnce) {
  std::string why;
  if (!test_postgres_url(&why)) GTEST_SKIP() << why;
  auto t = temp_store("memory.db", StoreKind::postgres);
  ASSERT_TRUE(t.store);
  Db& db = sqlite(*t.store).db();
  ASSERT_TRUE(db.exec("CREATE SEQUENCE kill_once; "
                      "CREATE FUNCTION kill_once() RETURNS trigger AS $$ BEGIN "
                      "IF nextval('kill_once') = 1 THEN PERFORM pg_terminate_backend(pg_backend_pid()); END IF; "
                      "RETURN NEW; END $$ LANGUAGE plpgsql; "
                      "CREATE TRIGGER kill_once AFTER INSERT ON cases FOR EACH ROW EXECUTE FUNCTION kill_once()"));
  auto first = t.store->record_attempt(make_case("lost/1", "softmax", 1.2));
  ASSERT_TRUE(first) << first.error().message;
  auto again = t.store->record_attempt(make_case("lost/1", "softmax", 1.2));
  ASSERT_TRUE(again);
  EXPECT_EQ(again->id, first->id);
  EXPECT_EQ(t.store->stats()->cases, 1);
  // An idle connection dropped by the server: the next read reconnects.
  auto pid = db.query_int("SELECT pg_backend_pid()");
  ASSERT_TRUE(pid && *pid);
  auto admin = Db::open_postgres(t.pg->url);
  ASSERT_TRUE(admin);
  ASSERT_TRUE((*admin)->exec(fmt::format("SELECT pg_terminate_backend({})", **pid)));
  auto seen = t.store->find_case("lost/1");
  ASSERT_TRUE(seen && *seen) << (seen ? "" : seen.error().message);
  EXPECT_EQ((*seen)->id, first->id);
  auto check = t.store->check();
  ASSERT_TRUE(check) << check.error().message;
  EXPECT_TRUE(check->ok()) << check->problems.front();
}

// PostgreSQL only: the connection drops while a pipeline of queued writes runs (a trigger on
// the journal, whose insert is queued, terminates the backend once per sequence): mid-batch,
// and in the COMMIT of a single case (its outcome unknown, so the idempotent write is re-sent).
// Every case is recorded once.
TEST(StorePostgres, ConnectionsLostInAPipelineAreRetried) {
  std::string why;
  if (!test_postgres_url(&why)) GTEST_SKIP() << why;
  auto t = temp_store("memory.db", StoreKind::postgres);
  ASSERT_TRUE(t.store);
  Db& db = sqlite(*t.store).db();
  ASSERT_TRUE(db.exec("CREATE SEQUENCE kill_batch; CREATE SEQUENCE kill_single; "
                      "CREATE FUNCTION kill_in_pipeline() RETURNS trigger AS $$ BEGIN "
                      "IF (NEW.text LIKE '%batch-victim%' AND nextval('kill_batch') = 1) OR "
                      "(NEW.text LIKE '%single-victim%' AND nextval('kill_single') = 1) THEN "
                      "PERFORM pg_terminate_backend(pg_backend_pid()); END IF; RETURN NEW; END $$ LANGUAGE plpgsql; "
                      "CREATE TRIGGER kill_in_pipeline AFTER INSERT ON journal FOR EACH ROW "
                      "EXECUTE FUNCTION kill_in_pipeline()"));
  std::vector<CaseRecord> batch;
  for (int i = 0; i < 5; ++i) {
    batch.push_back(make_case(fmt::format("p/{}", i), "softmax", 1.0 + 0.1 * i));
    if (i > 0) batch.back().parent_key = batch[batch.size() - 2].natural_key;
  }
  batch[2].journal = "batch-victim";
  auto ids = t.store->record_cases(batch);
  ASSERT_TRUE(ids) << ids.error().message;
  CaseRecord single = make_case("p/single", "softmax", 1.7);
  single.journal = "single-victim";
  auto one = t.store->record_attempt(single);
  ASSERT_TRUE(one) << one.error().message;
  auto again = t.store->record_attempt(single);
  ASSERT_TRUE(again);
  EXPECT_EQ(again->id, one->id);
  EXPECT_EQ(t.store->stats()->cases, 6);
  // Each victim's journal was inserted twice (killed, then re-sent), so both losses happened.
  EXPECT_EQ(db.query_int("SELECT nextval('kill_batch')").value_or(std::nullopt), 3);
  EXPECT_EQ(db.query_int("SELECT nextval('kill_single')").value_or(std::nullopt), 3);
  auto check = t.store->check();
  ASSERT_TRUE(check) << check.error().message;
  EXPECT_TRUE(check->ok()) << check->problems.front();
}

// PostgreSQL only: a write the store queues (pipelined, its failure reported by a later
// statement) that fails rolls back its whole case or batch, and the store keeps working.
TEST(StorePostgres, AFailingQueuedWriteRollsBackItsTransaction) {
  std::string why;
  if (!test_postgres_url(&why)) GTEST_SKIP() << why;
  auto t = temp_store("memory.db", StoreKind::postgres);
  ASSERT_TRUE(t.store);
  Db& db = sqlite(*t.store).db();
  ASSERT_TRUE(db.exec("CREATE FUNCTION refuse_poison() RETURNS trigger AS $$ BEGIN "
                      "IF NEW.text LIKE '%poison%' THEN RAISE EXCEPTION 'poisoned journal'; END IF; "
                      "RETURN NEW; END $$ LANGUAGE plpgsql; "
                      "CREATE TRIGGER refuse_poison BEFORE INSERT ON journal FOR EACH ROW "
                      "EXECUTE FUNCTION refuse_poison()"));
  CaseRecord poisoned = make_case("q/poisoned", "softmax", 1.2);
  poisoned.journal = "poison";
  auto failed = t.store->record_attempt(poisoned);
  ASSERT_FALSE(failed);
  EXPECT_NE(failed.error().message.find("poisoned journal"), std::string::npos) << failed.error().message;
  EXPECT_NE(failed.error().message.find("INSERT INTO journal"), std::string::npos) << failed.error().message;
  EXPECT_FALSE(*t.store->find_case("q/poisoned"));
  auto batch = t.store->record_cases({make_case("q/a", "softmax", 1.1), poisoned, make_case("q/b", "softmax", 1.3)});
  ASSERT_FALSE(batch);
  EXPECT_FALSE(*t.store->find_case("q/a"));
  EXPECT_EQ(t.store->stats()->cases, 0);
  auto ok = t.store->record_cases({make_case("q/a", "softmax", 1.1), make_case("q/b", "softmax", 1.3)});
  ASSERT_TRUE(ok) << ok.error().message;
  EXPECT_EQ(t.store->stats()->cases, 2);
  auto check = t.store->check();
  ASSERT_TRUE(check) << check.error().message;
  EXPECT_TRUE(check->ok()) << check->problems.front();
}

// PostgreSQL only: recording a case costs a few round trips, not one per statement (the writes
// whose results are not read travel together, the term counts and d(v) in one statement each).
TEST(StorePostgres, RecordingACaseTakesFewRoundTrips) {
  std::string why;
  if (!test_postgres_url(&why)) GTEST_SKIP() << why;
  auto t = temp_store("memory.db", StoreKind::postgres);
  ASSERT_TRUE(t.store);
  Db& db = sqlite(*t.store).db();
  auto chain = [](const std::string& prefix, int n) {
    std::vector<CaseRecord> cs;
    for (int i = 0; i < n; ++i) {
      cs.push_back(make_case(fmt::format("{}/{}", prefix, i), "softmax", 1.0 + 0.01 * i));
      if (i > 0) cs.back().parent_key = cs[cs.size() - 2].natural_key;
    }
    return cs;
  };
  ASSERT_TRUE(t.store->record_cases(chain("warm", 3)));  // statements prepared once
  ASSERT_TRUE(t.store->record_attempt(make_case("warm/single", "softmax", 1.3)));
  constexpr int k_cases = 100;
  uint64_t trips = db.round_trips();
  ASSERT_TRUE(t.store->record_cases(chain("batch", k_cases)));
  double per_case = static_cast<double>(db.round_trips() - trips) / k_cases;
  EXPECT_LE(per_case, 3.0);
  RecordProperty("round_trips_per_batched_case", fmt::format("{:.2f}", per_case));
  trips = db.round_trips();
  auto one = t.store->record_attempt(make_case("single/1", "softmax", 1.4, k_native, std::nullopt));
  ASSERT_TRUE(one) << one.error().message;
  EXPECT_LE(db.round_trips() - trips, 7u);
  RecordProperty("round_trips_per_single_case", static_cast<int>(db.round_trips() - trips));
  EXPECT_EQ(t.store->stats()->cases, 4 + k_cases + 1);
  auto check = t.store->check();
  ASSERT_TRUE(check) << check.error().message;
  EXPECT_TRUE(check->ok()) << check->problems.front();
}

// PostgreSQL only: a schema that holds other tables, or a kope schema from a newer kope, is
// refused with a message naming it.
TEST(StorePostgres, ForeignAndNewerDatabasesAreRefused) {
  std::string why;
  if (!test_postgres_url(&why)) GTEST_SKIP() << why;
  auto foreign = scratch_postgres();
  ASSERT_TRUE(foreign);
  {
    auto db = Db::open_postgres(foreign->url);
    ASSERT_TRUE(db);
    ASSERT_TRUE((*db)->exec("CREATE TABLE invoices(id BIGINT)"));
  }
  auto refused = open_store(foreign->url);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().kind, ErrorKind::corrupt);
  EXPECT_NE(refused.error().message.find("invoices"), std::string::npos) << refused.error().message;
  auto newer = scratch_postgres();
  ASSERT_TRUE(newer);
  ASSERT_TRUE(open_store(newer->url));
  {
    auto db = Db::open_postgres(newer->url);
    ASSERT_TRUE(db);
    ASSERT_TRUE((*db)->exec(fmt::format("UPDATE kope_schema SET version = {}", store_schema_version() + 1)));
  }
  auto too_new = open_store(newer->url);
  ASSERT_FALSE(too_new);
  EXPECT_EQ(too_new.error().kind, ErrorKind::corrupt);
  EXPECT_NE(too_new.error().message.find("newer kope"), std::string::npos) << too_new.error().message;
  EXPECT_EQ(open_store(with_database(newer->url, "no_such_database")).error().kind, ErrorKind::io);
}

// An old database: schema version 1 only (no summaries, fix links or FTS indexes yet).
TEST(Migration, FromVersionOneBackfillsTheRetrievalStructures) {
  auto dir = util::TempDir::create("kope-migrate");
  ASSERT_TRUE(dir);
  auto path = dir->path() / "old.db";
  {
    auto store = open_store(path);
    ASSERT_TRUE(store);
    int64_t failed = record(**store, make_case("old/0", "softmax", 0));
    int64_t fix = record(**store, make_case("old/1", "softmax", 1.4, k_native, failed));
    record(**store, make_case("old/2", "softmax", 2.0, k_native, fix));
    LessonDelta add;
    add.lesson.kind = LessonKind::fix;
    add.lesson.title = "Declare helpers before use";
    add.lesson.text = "An undeclared helper fails to compile; define it above kope_kernel";
    add.lesson.error_signature = "compile_error: error: 'X' was not declared in this scope";
    ASSERT_TRUE((*store)->apply(add));
  }
  {
    // Turn it into what version 1 wrote.
    auto db = Db::open(path);
    ASSERT_TRUE(db);
    ASSERT_TRUE((*db)->exec("DROP TABLE fix_link; DROP TABLE task_summary; DROP TABLE journal_fts; "
                            "DROP TABLE lesson_fts; DROP TABLE term_df; DROP TABLE runs; DROP TABLE counters; "
                            "ALTER TABLE task DROP COLUMN signature_shape; PRAGMA user_version = 1;"));
  }
  auto store = open_store(path);
  ASSERT_TRUE(store) << store.error().message;
  auto s = (*store)->stats();
  ASSERT_TRUE(s);
  EXPECT_EQ(s->schema_version, store_schema_version());
  EXPECT_EQ(s->cases, 3);
  auto check = (*store)->check();
  ASSERT_TRUE(check) << check.error().message;
  EXPECT_TRUE(check->ok()) << check->problems.front();
  RetrievalQuery q;
  q.task = task("softmax");
  q.target = k_native;
  q.stage = Stage::repair;
  q.last_error_signature = "compile_error: error: 'X' was not declared in this scope";
  q.text = "helper declared";
  auto items = (*store)->retrieve(q);
  ASSERT_TRUE(items);
  bool fix_case = false, fix_lesson = false;
  for (const auto& it : *items) {
    if (it.score_parts.count("fix") && it.kind == RetrievedItem::Kind::case_summary) fix_case = true;
    if (it.score_parts.count("fix") && it.kind == RetrievedItem::Kind::lesson) fix_lesson = true;
  }
  EXPECT_TRUE(fix_case);
  EXPECT_TRUE(fix_lesson);
  // The term statistics were backfilled from the FTS index: lexical matches work at once.
  bool lexical = false;
  for (const auto& it : *items) lexical = lexical || (it.score_parts.count("lexical") && it.score_parts.at("lexical") > 0);
  EXPECT_TRUE(lexical);
  // New writes keep the backfilled structures current.
  EXPECT_TRUE((*store)->record_case(make_case("new/0", "softmax", 2.5)));
  EXPECT_TRUE((*store)->check()->ok());
}

TEST(Migration, MigratesAnEmptyDatabaseStepByStep) {
  auto db = Db::open(":memory:");
  ASSERT_TRUE(db);
  ASSERT_TRUE(register_functions(**db));
  ASSERT_TRUE(migrate(**db, 1));
  EXPECT_EQ(*(*db)->query_int("PRAGMA user_version"), 1);
  EXPECT_FALSE(*(*db)->query_int("SELECT count(*) FROM sqlite_schema WHERE name = 'fix_link'") != 0);
  ASSERT_TRUE(migrate(**db, 2));
  EXPECT_EQ(*(*db)->query_int("PRAGMA user_version"), 2);
  EXPECT_EQ(*(*db)->query_int("PRAGMA application_id"), k_application_id);
  EXPECT_EQ(*(*db)->query_int("SELECT count(*) FROM pragma_table_info('task') WHERE name = 'signature_shape'"), 0);
  ASSERT_TRUE(migrate(**db, 3));
  EXPECT_EQ(*(*db)->query_int("PRAGMA user_version"), 3);
  EXPECT_EQ(*(*db)->query_int("SELECT count(*) FROM pragma_table_info('task') WHERE name = 'signature_shape'"), 1);
}

// A version 2 database (before task.signature_shape), SQLite or PostgreSQL: its tasks keep their
// text, get a NULL shape, are read from the text, and get the typed shape when kope records them
// from a spec.
TEST_P(StoreTest, AVersionTwoDatabaseGetsTheSignatureShapeColumn) {
  auto t = temp_store("v2.db");
  record(*t.store, make_case("old/0", "softmax", 2.0));
  t.store.reset();
  {
    bool pg = GetParam() == StoreKind::postgres;
    auto db = pg ? Db::open_postgres(t.path.string()) : Db::open(t.path);
    ASSERT_TRUE(db);
    ASSERT_TRUE((*db)->exec("ALTER TABLE task DROP COLUMN signature_shape"));
    ASSERT_TRUE((*db)->exec(pg ? "UPDATE kope_schema SET version = 2" : "PRAGMA user_version = 2"));
  }
  auto store = open_store(t.path);
  ASSERT_TRUE(store) << store.error().message;
  EXPECT_EQ((*store)->stats()->schema_version, 3);
  auto old = (*store)->find_case("old/0");
  ASSERT_TRUE(old && *old);
  EXPECT_FALSE((*old)->task.signature_shape);
  EXPECT_EQ((*old)->task.signature, task("softmax").signature);
  EXPECT_EQ(task_shape((*old)->task).str(), "in:f32,out:f32,dim,dim");
  CaseRecord now = make_case("new/0", "softmax", 2.5);
  now.task.signature_shape = task_shape(now.task);
  record(**store, now);
  auto filled = (*store)->find_case("old/0");
  ASSERT_TRUE(filled && *filled && (*filled)->task.signature_shape);
  EXPECT_EQ((*filled)->task.signature_shape->str(), "in:f32,out:f32,dim,dim");
  EXPECT_TRUE((*store)->check()->ok());
}

}  // namespace
}  // namespace kope::memory
