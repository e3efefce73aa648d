#include <gtest/gtest.h>

#include <fmt/format.h>

#include "memory/test_util.h"

namespace kope::memory {
namespace {

using namespace testing;

constexpr const char* k_undeclared = "compile_error: error: 'X' was not declared in this scope";

const RetrievedItem* find_item(const std::vector<RetrievedItem>& items, const std::string& id) {
  for (const auto& it : items) {
    if (it.id == id) return &it;
  }
  return nullptr;
}

size_t rank_of(const std::vector<RetrievedItem>& items, const std::string& id) {
  for (size_t i = 0; i < items.size(); ++i) {
    if (items[i].id == id) return i;
  }
  return items.size();
}

RetrievalQuery query(Stage stage, const std::string& op = "softmax") {
  RetrievalQuery q;
  q.task = task(op);
  q.target = k_native;
  q.toolchain = "g++-12 -O3 -march=native";
  q.backend = "cpu";
  q.stage = stage;
  return q;
}

class RetrieveTest : public StoreKindTest {};
KOPE_STORE_KINDS(RetrieveTest);

TEST_P(RetrieveTest, NativeSpeedEvidenceBeatsForeignAndForeignFixesStillAppear) {
  auto t = temp_store();
  Database& s = *t.store;
  int64_t native_fast = *s.record_case(make_case("n/fast", "softmax", 3.0));
  ASSERT_TRUE(s.record_case(make_case("n/slow", "softmax", 1.2)));
  // The foreign kernel is much faster on its own hardware: that says nothing about speed here.
  int64_t foreign_fast = *s.record_case(make_case("f/fast", "softmax", 30.0, k_foreign));
  // On the foreign target, an undeclared-identifier error was fixed by a child.
  int64_t foreign_failed = *s.record_case(make_case("f/failed", "softmax", 0, k_foreign));
  CaseRecord fix = make_case("f/fix", "softmax", 4.0, k_foreign, foreign_failed);
  fix.stage = Stage::repair;
  fix.optimisation = "declared the helper before kope_kernel";
  int64_t foreign_fix = *s.record_case(fix);

  auto refine = s.retrieve(query(Stage::refine));
  ASSERT_TRUE(refine) << refine.error().message;
  const RetrievedItem* kernel = find_item(*refine, "kernel:" + std::to_string(native_fast));
  ASSERT_NE(kernel, nullptr);
  EXPECT_EQ(kernel->kind, RetrievedItem::Kind::best_kernel);
  EXPECT_FALSE(kernel->foreign);
  ASSERT_TRUE(kernel->kase);
  EXPECT_DOUBLE_EQ(kernel->kase->speedup_ref.value_or(0), 3.0);
  ASSERT_TRUE(kernel->kase->code);  // the code is in the item, whole, with its backend
  EXPECT_EQ(*kernel->kase->code, make_case("n/fast", "softmax", 3.0).code);
  EXPECT_EQ(kernel->kase->backend, "cpu");
  EXPECT_GT(kernel->score_parts.at("speed"), 0);
  // The foreign kernel is never offered as a best kernel nor as speed evidence.
  EXPECT_EQ(find_item(*refine, "kernel:" + std::to_string(foreign_fast)), nullptr);
  const RetrievedItem* foreign = find_item(*refine, "case:" + std::to_string(foreign_fast));
  ASSERT_NE(foreign, nullptr);  // offered for feasibility: it compiled and passed there
  EXPECT_TRUE(foreign->foreign);
  EXPECT_EQ(foreign->target, k_foreign);
  EXPECT_EQ(foreign->score_parts.count("speed"), 0u);
  EXPECT_EQ(foreign->score_parts.count("graph"), 0u);
  EXPECT_GT(foreign->score_parts.at("feasibility"), 0);
  ASSERT_TRUE(foreign->kase);
  EXPECT_FALSE(foreign->kase->code) << "a summary carries no code";
  EXPECT_LT(rank_of(*refine, kernel->id), rank_of(*refine, foreign->id));
  for (const auto& it : *refine) {
    if (it.kind == RetrievedItem::Kind::best_kernel) {
      EXPECT_FALSE(it.foreign) << it.id;
    }
  }

  RetrievalQuery rq = query(Stage::repair);
  rq.last_error_signature = k_undeclared;
  auto repair = s.retrieve(rq);
  ASSERT_TRUE(repair);
  const RetrievedItem* f = find_item(*repair, "case:" + std::to_string(foreign_fix));
  ASSERT_NE(f, nullptr);
  EXPECT_TRUE(f->foreign);
  EXPECT_GT(f->score_parts.at("fix"), 0);
  EXPECT_EQ(f->failed_case, foreign_failed);
  EXPECT_EQ(f->error_signature, k_undeclared);
  ASSERT_TRUE(f->kase);
  EXPECT_EQ(f->kase->optimisation, "declared the helper before kope_kernel");
  EXPECT_EQ(f->kase->failed_signature, std::optional<std::string>(k_undeclared));
  EXPECT_EQ(f->kase->failed_message, "compilation failed");
  EXPECT_EQ(rank_of(*repair, f->id), 0u);  // in repair, the fix for this error comes first
}

// An item carries what it is made of, as recorded: a lesson's fields and evidence counts; a
// case's verdict, outcome, ratio, speedup, stage, parent, whole description, backend and
// journal; a best kernel's whole code (agent/memory_items.h writes the text from them).
TEST_P(RetrieveTest, ItemFactsAreWhatWasRecorded) {
  auto t = temp_store();
  Database& s = *t.store;
  CaseRecord root = make_case("ocl/root", "softmax", 1.5);
  root.toolchain.backend = "opencl";
  root.optimisation = "Flat padded rows, so every tap is one contiguous load; AVX2/FMA register micro-k...";
  int64_t root_id = *s.record_case(root);
  CaseRecord child = make_case("ocl/child", "softmax", 0, k_native, root_id);
  child.toolchain.backend = "opencl";
  int64_t child_id = *s.record_case(child);
  LessonDelta d;
  d.lesson.kind = LessonKind::fix;
  d.lesson.title = "Declare helpers first";
  d.lesson.text = "Declare every helper before kope_kernel";
  d.lesson.error_signature = k_undeclared;
  d.lesson.scope = {"normalization", "cpu", k_native, ""};
  auto lid = s.apply(d);
  ASSERT_TRUE(lid) << lid.error().message;
  LessonDelta up;
  up.op = LessonDelta::Op::upvote;
  up.lesson_id = *lid;
  up.reason = "test vote";
  ASSERT_TRUE(s.apply(up));

  auto items = s.retrieve(query(Stage::refine));
  ASSERT_TRUE(items) << items.error().message;
  const RetrievedItem* kernel = find_item(*items, "kernel:" + std::to_string(root_id));
  ASSERT_NE(kernel, nullptr);
  ASSERT_TRUE(kernel->kase);
  EXPECT_FALSE(kernel->lesson);
  EXPECT_EQ(kernel->case_id, root_id);
  EXPECT_EQ(kernel->op, "softmax");
  EXPECT_EQ(kernel->category, "normalization");
  EXPECT_EQ(kernel->target, k_native);
  const RetrievedCase& k = *kernel->kase;
  EXPECT_EQ(k.stage, Stage::draft);
  EXPECT_EQ(k.verdict, eval::Verdict::correct);
  EXPECT_EQ(k.outcome, Outcome::effective);
  EXPECT_DOUBLE_EQ(k.ratio, 1.5);
  EXPECT_EQ(k.speedup_ref, std::optional<double>(1.5));
  EXPECT_FALSE(k.parent_id);
  EXPECT_EQ(k.optimisation, root.optimisation) << "whole, as recorded: the reader shortens it";
  EXPECT_EQ(k.backend, "opencl");
  EXPECT_EQ(k.code, std::optional<std::string>(root.code));
  EXPECT_EQ(k.journal, "") << "a kernel shows its code, not its journal";
  EXPECT_EQ(k.lineage, CaseLineage::none);
  EXPECT_FALSE(k.other_incumbent);

  const RetrievedItem* failed = find_item(*items, "case:" + std::to_string(child_id));
  ASSERT_NE(failed, nullptr);
  ASSERT_TRUE(failed->kase);
  EXPECT_EQ(failed->kase->verdict, eval::Verdict::compile_error);
  EXPECT_EQ(failed->kase->stage, Stage::refine);
  EXPECT_EQ(failed->kase->parent_id, root_id);
  EXPECT_FALSE(failed->kase->error_signature.empty());
  EXPECT_EQ(failed->error_signature, failed->kase->error_signature);
  EXPECT_EQ(failed->kase->journal, child.journal);
  EXPECT_FALSE(failed->kase->code);

  const RetrievedItem* lesson = find_item(*items, "lesson:" + *lid);
  ASSERT_NE(lesson, nullptr);
  ASSERT_TRUE(lesson->lesson);
  EXPECT_FALSE(lesson->kase);
  const RetrievedLesson& l = *lesson->lesson;
  EXPECT_EQ(l.id, *lid);
  EXPECT_EQ(l.kind, LessonKind::fix);
  EXPECT_EQ(l.title, d.lesson.title);
  EXPECT_EQ(l.text, d.lesson.text);
  EXPECT_EQ(l.error_signature, k_undeclared);
  EXPECT_EQ(l.scope.category, "normalization");
  EXPECT_EQ(l.scope.backend, "cpu");
  EXPECT_EQ(l.scope.target, k_native);
  EXPECT_EQ(l.helpful, 1);
  EXPECT_EQ(l.harmful, 0);
}

// A lesson carries how precisely the speed behind it was measured: over its correct source
// cases, the median of each case's relative interval, and the share marked disturbed (a case
// that failed, or one written before timings were kept, says nothing).
TEST_P(RetrieveTest, ALessonCarriesHowPreciselyItsSourceCasesWereTimed) {
  auto t = temp_store();
  Database& s = *t.store;
  auto timed = [&](const std::string& key, std::vector<std::pair<double, double>> median_ci, bool disturbed) {
    CaseRecord c = make_case(key, "softmax", 2.0);
    c.timings.clear();
    int index = 0;
    for (auto [median, ci] : median_ci) c.timings.push_back({index++, median, ci, 4 * median, std::nullopt, disturbed, disturbed ? 0.4 : 0.0, std::nullopt});
    return *s.record_case(c);
  };
  // Two cases timed under load (about ±180% and ±200%), one quiet (±2%), one failed.
  int64_t loud_a = timed("n/loud-a", {{25.0, 46.0}, {37.0, 77.0}, {12.5, 2.0}}, false);
  int64_t loud_b = timed("n/loud-b", {{23.0, 99.0}, {11.0, 6.0}, {18.0, 14.0}}, true);
  int64_t quiet = timed("n/quiet", {{10.0, 0.2}, {20.0, 0.4}}, false);
  int64_t failed = *s.record_case(make_case("n/failed", "softmax", 0));
  auto add = [&](const std::string& title, std::vector<int64_t> sources) {
    LessonDelta d;
    d.lesson.kind = LessonKind::strategy;
    d.lesson.title = title;
    d.lesson.text = title + " for softmax rows";
    d.lesson.scope = {"normalization", "cpu", k_native, ""};
    d.lesson.source_cases = std::move(sources);
    auto id = s.apply(d);
    EXPECT_TRUE(id) << id.error().message;
    return id.value_or("");
  };
  std::string loud = add("Run the rows on one thread", {loud_a, loud_b, failed});
  std::string calm = add("Two threads over row blocks", {quiet, failed});
  std::string untimed = add("Keep the row in L1", {failed});

  auto items = s.retrieve(query(Stage::draft));
  ASSERT_TRUE(items) << items.error().message;
  auto lesson = [&](const std::string& id) -> const RetrievedLesson& {
    const RetrievedItem* it = find_item(*items, "lesson:" + id);
    EXPECT_NE(it, nullptr) << id;
    static const RetrievedLesson none;
    return it && it->lesson ? *it->lesson : none;
  };
  const RetrievedLesson& l = lesson(loud);
  ASSERT_TRUE(l.evidence_spread);
  EXPECT_EQ(l.evidence_cases, 2);
  // loud_a: median of 1.84, 2.08, 0.16 = 1.84; loud_b: of 4.30, 0.55, 0.78 = 0.78; their median 1.31.
  EXPECT_NEAR(*l.evidence_spread, (46.0 / 25.0 + 14.0 / 18.0) / 2, 1e-9);
  EXPECT_DOUBLE_EQ(l.evidence_disturbed, 0.5);
  const RetrievedLesson& c = lesson(calm);
  ASSERT_TRUE(c.evidence_spread);
  EXPECT_EQ(c.evidence_cases, 1);
  EXPECT_NEAR(*c.evidence_spread, 0.02, 1e-9);
  EXPECT_DOUBLE_EQ(c.evidence_disturbed, 0);
  const RetrievedLesson& u = lesson(untimed);
  EXPECT_FALSE(u.evidence_spread);
  EXPECT_EQ(u.evidence_cases, 0);
  // Every source, failed ones too, tells what kind of computation a lesson was drawn from: one
  // intensity per op.
  EXPECT_EQ(l.source_intensity, std::vector<double>{0.6});
  EXPECT_EQ(u.source_intensity, std::vector<double>{0.6});
}

TEST_P(RetrieveTest, AFixForThisOpHereOutranksManyNewerFixesElsewhere) {
  auto t = temp_store();
  int64_t failed = *t.store->record_case(make_case("n/failed", "softmax", 0));
  CaseRecord fix = make_case("n/fix", "softmax", 1.3, k_native, failed);
  fix.stage = Stage::repair;
  int64_t native_fix = *t.store->record_case(fix);
  std::vector<CaseRecord> batch;
  for (int i = 0; i < 30; ++i) {  // newer fixes of the same error, on other hardware and ops
    CaseRecord f = make_case(fmt::format("f/failed{}", i), fmt::format("op{}", i), 0, k_foreign);
    CaseRecord r = make_case(fmt::format("f/fix{}", i), fmt::format("op{}", i), 2.0, k_foreign);
    r.parent_key = f.natural_key;
    batch.push_back(f);
    batch.push_back(r);
  }
  ASSERT_TRUE(t.store->record_cases(batch));
  RetrievalQuery q = query(Stage::repair);
  q.last_error_signature = k_undeclared;
  auto items = t.store->retrieve(q);
  ASSERT_TRUE(items);
  ASSERT_FALSE(items->empty());
  EXPECT_EQ((*items)[0].id, "kernel:" + std::to_string(native_fix));  // it is also the op's best kernel
  EXPECT_GT((*items)[0].score_parts.at("fix"), 0);
  EXPECT_FALSE((*items)[0].foreign);
  size_t foreign_fixes = 0;
  for (const auto& it : *items) foreign_fixes += it.foreign && it.score_parts.count("fix");
  EXPECT_GT(foreign_fixes, 0u);  // fixes transfer across hardware
}

TEST_P(RetrieveTest, QuarantinedWinsAreNotOfferedAsKernels) {
  auto t = temp_store();
  int64_t root = *t.store->record_case(make_case("root", "softmax", 2.0));
  int64_t jump = *t.store->record_case(make_case("jump", "softmax", 60.0, k_native, root));
  auto items = t.store->retrieve(query(Stage::refine));
  ASSERT_TRUE(items);
  EXPECT_EQ(find_item(*items, "kernel:" + std::to_string(jump)), nullptr);
  EXPECT_NE(find_item(*items, "kernel:" + std::to_string(root)), nullptr);
  const RetrievedItem* q = find_item(*items, "case:" + std::to_string(jump));
  if (q) {
    EXPECT_TRUE(q->quarantined);  // the prompt puts it in a feasibility-only section
  }
  for (const auto& it : *items) {
    if (it.id != "case:" + std::to_string(jump)) EXPECT_FALSE(it.quarantined) << it.id;
  }
}

TEST_P(RetrieveTest, LexicalSearchOverJournalsAndLessons) {
  auto t = temp_store();
  CaseRecord a = make_case("a", "softmax", 1.3);
  a.journal = "strategy: software prefetch of the next row; reading: bandwidth bound, prefetch hid latency";
  CaseRecord b = make_case("b", "softmax", 1.3);
  b.journal = "strategy: unrolled the exp loop by four; reading: compute bound";
  int64_t ia = *t.store->record_case(a);
  int64_t ib = *t.store->record_case(b);
  LessonDelta d;
  d.lesson.kind = LessonKind::strategy;
  d.lesson.title = "Prefetch helps streaming rows";
  d.lesson.text = "When bandwidth bound, software prefetch two rows ahead";
  d.lesson.scope.category = "reduction";  // another category: found lexically, not by scope
  auto lid = t.store->apply(d);
  ASSERT_TRUE(lid);
  RetrievalQuery q = query(Stage::refine);
  q.text = "prefetch latency";
  q.bottleneck = "memory";
  auto items = t.store->retrieve(q);
  ASSERT_TRUE(items);
  // `a` is also this op's best kernel, so it comes as that item, carrying the lexical signal.
  const RetrievedItem* ja = find_item(*items, "kernel:" + std::to_string(ia));
  ASSERT_NE(ja, nullptr);
  ASSERT_TRUE(ja->score_parts.count("lexical"));
  EXPECT_GT(ja->score_parts.at("lexical"), 0);
  const RetrievedItem* jb = find_item(*items, "case:" + std::to_string(ib));
  if (jb) {
    EXPECT_EQ(jb->score_parts.count("lexical"), 0u);
  }
  const RetrievedItem* l = find_item(*items, "lesson:" + *lid);
  ASSERT_NE(l, nullptr);
  EXPECT_GT(l->score_parts.at("lexical"), 0);
  ASSERT_TRUE(l->lesson);
  EXPECT_EQ(l->lesson->text, d.lesson.text);
}

TEST_P(RetrieveTest, BestKernelsOfSimilarOps) {
  auto t = temp_store();
  CaseRecord ln = make_case("ln", "layernorm", 2.5);
  int64_t id = *t.store->record_case(ln);
  CaseRecord mm = make_case("mm", "matmul", 8.0);
  mm.task.category = "matmul";
  mm.task.level = 3;
  mm.task.arithmetic_intensity = 300;
  mm.task.log2_flops = 36;
  mm.task.signature = "extern \"C\" void kope_kernel(const float* a, const float* b, float* c, int64_t M, int64_t N, int64_t K)";
  ASSERT_TRUE(t.store->record_case(mm));
  auto items = t.store->retrieve(query(Stage::draft));
  ASSERT_TRUE(items);
  const RetrievedItem* k = find_item(*items, "kernel:" + std::to_string(id));
  ASSERT_NE(k, nullptr);
  EXPECT_GT(k->score_parts.at("similarity"), 0.8);
  ASSERT_TRUE(k->kase);
  EXPECT_TRUE(k->kase->similar_op);
  ASSERT_GE(items->size(), 2u);
  EXPECT_EQ((*items)[0].id, k->id);  // the same-category op outranks the matmul
  EXPECT_GT(task_similarity(task("softmax"), task("layernorm")), task_similarity(task("softmax"), mm.task));
}

TEST_P(RetrieveTest, StructuralClosenessComesFromTheSpecsNotTheNames) {
  TaskInfo softmax = task("softmax");
  TaskInfo layernorm = task("layernorm");  // the same category
  TaskInfo scale = task("scale_rows", "elementwise");
  scale.arithmetic_intensity = 0.9;  // same parameters, intensity within 2x of 0.6
  TaskInfo relu = task("relu", "elementwise");
  relu.arithmetic_intensity = 0.125;  // same parameters, 4.8x less work per byte
  TaskInfo conv = task("conv2d_3x3", "conv");
  conv.signature = "extern \"C\" void kope_kernel(const float* x, const float* w, float* y, int64_t N, int64_t C, int64_t H, "
                   "int64_t W, int64_t K)";
  conv.arithmetic_intensity = 0.5;  // a close intensity does not make another signature close
  auto close = [&](const TaskInfo& a, const TaskInfo& b) {
    return task_structurally_close(a, task_shape(a), b, task_shape(b));
  };
  EXPECT_TRUE(close(softmax, layernorm));
  EXPECT_TRUE(close(softmax, scale));
  EXPECT_FALSE(close(softmax, relu));
  EXPECT_FALSE(close(softmax, conv));
  EXPECT_FALSE(close(conv, relu));

  auto t = temp_store();
  CaseRecord r = make_case("relu", "relu", 3.0);
  r.task = relu;
  CaseRecord s = make_case("scale", "scale_rows", 3.0);
  s.task = scale;
  int64_t ir = *t.store->record_case(r);
  int64_t is = *t.store->record_case(s);
  auto items = t.store->retrieve(query(Stage::draft));
  ASSERT_TRUE(items);
  const RetrievedItem* kr = find_item(*items, "kernel:" + std::to_string(ir));
  const RetrievedItem* ks = find_item(*items, "kernel:" + std::to_string(is));
  ASSERT_NE(kr, nullptr);
  ASSERT_NE(ks, nullptr);
  EXPECT_FALSE(kr->structurally_close);
  EXPECT_TRUE(ks->structurally_close);
  EXPECT_EQ(kr->category, "elementwise");
}

TEST_P(RetrieveTest, AStoredTypedShapeIsWhatRetrievalComparesNotTheText) {
  // The stored task's text says nothing a parser can read; its typed shape is softmax's, so it
  // is structurally close (another category, intensity within 2x) only through the shape.
  TaskInfo scale = task("scale_rows", "elementwise");
  scale.arithmetic_intensity = 0.9;
  scale.signature = "see the spec";
  EXPECT_EQ(legacy_signature_shape(scale.signature).params.size(), 0u);
  scale.signature_shape = *spec::SignatureShape::parse("in:f32,out:f32,dim,dim");
  auto t = temp_store();
  CaseRecord s = make_case("scale", "scale_rows", 3.0);
  s.task = scale;
  int64_t id = *t.store->record_case(s);
  auto items = t.store->retrieve(query(Stage::draft));
  ASSERT_TRUE(items);
  const RetrievedItem* k = find_item(*items, "kernel:" + std::to_string(id));
  ASSERT_NE(k, nullptr);
  EXPECT_TRUE(k->structurally_close);
  // Without the shape the same row is read from its text, and is not close.
  TaskInfo text_only = scale;
  text_only.signature_shape.reset();
  EXPECT_FALSE(task_structurally_close(task("softmax"), task_shape(task("softmax")), text_only, task_shape(text_only)));
  EXPECT_TRUE(task_structurally_close(task("softmax"), task_shape(task("softmax")), scale, task_shape(scale)));
}

TEST(LegacySignatureShape, IgnoresNamesAndSpacing) {
  auto shape = [](const char* text) { return legacy_signature_shape(text).str(); };
  EXPECT_EQ(shape("extern \"C\" void kope_kernel(const float* x, float* y, int64_t N, int64_t D);"),
            "in:f32,out:f32,dim,dim");
  EXPECT_EQ(shape("extern \"C\" void kope_kernel(const float * a, float *b, int64_t M, int64_t K);"),
            "in:f32,out:f32,dim,dim");
  EXPECT_NE(shape("void kope_kernel(const double* x, double* y, int64_t N);"),
            shape("void kope_kernel(const float* x, float* y, int64_t N);"));
  EXPECT_EQ(shape("void kope_kernel(const half* x, bfloat16* y, int64_t N, float eps, int64_t k)"),
            "in:f16,out:bf16,dim,attr:f32,attr:i64");
  EXPECT_EQ(shape("void kope_kernel(const unsigned short* x, uint16_t* y)"), "in:?,out:?");
  EXPECT_EQ(shape("void kope_kernel(void)"), "");
  EXPECT_EQ(shape("sig"), "");
  EXPECT_EQ(shape(""), "");
}

TEST(LegacySignatureShape, ReadsTheNotesOfRenderedSignatures) {
  // The notes render_signature writes: a dtype the C type does not say, an inout, both with a
  // comma; none of them is a pointer or a parameter of its own.
  EXPECT_EQ(legacy_signature_shape("extern \"C\" void kope_kernel(const float* x, uint16_t* y /* bf16, inout */, "
                                   "int64_t N, float a, uint8_t on /* bool */);")
                .str(),
            "in:f32,inout:bf16,dim,attr:f32,attr:bool");
  EXPECT_EQ(legacy_signature_shape("extern \"C\" void kope_kernel(const uint16_t* x /* f16 */, const uint8_t* m /* bool */, "
                                   "uint16_t* y /* f16 */, uint8_t* nz /* bool */, int64_t N);")
                .str(),
            "in:f16,in:bool,out:f16,out:bool,dim");
}

// Every op kope ships: the text parse of its rendered signature agrees with the typed shape
// (kernels recorded by older kope versions are replayed and compared alike), except that the text
// reads an i64 attr after the dims as a dim, which same_parameters counts alike.
TEST(LegacySignatureShape, AgreesWithTheTypedShapeOnEveryShippedOp) {
  int ops = 0, ambiguous = 0;
  for (const char* root : {"ops", "ops-kernelbench", "tests/ops"}) {
    auto suite = spec::load_suite(std::filesystem::path(KOPE_SOURCE_DIR) / root);
    ASSERT_TRUE(suite) << suite.error().message;
    for (const auto& op : suite->ops) {
      spec::SignatureShape typed = spec::signature_shape(op);
      spec::SignatureShape text = legacy_signature_shape(spec::render_signature(op));
      EXPECT_TRUE(spec::same_parameters(text, typed)) << op.name << ": " << text.str() << " vs " << typed.str();
      EXPECT_EQ(text.inputs(), typed.inputs()) << op.name;
      EXPECT_EQ(text.outputs(), typed.outputs()) << op.name;
      EXPECT_EQ(text.dims() + text.scalars(), typed.dims() + typed.scalars()) << op.name;
      EXPECT_EQ(text.dtypes(), typed.dtypes()) << op.name;
      ambiguous += text != typed;
      ++ops;
    }
  }
  EXPECT_GT(ops, 50);
  EXPECT_GT(ambiguous, 0);  // the kernelbench ops with an i64 attr (the next test)
}

// Where the text and the spec differ, the typed shape is right. kb1_93_masked_cumsum renders as
// `(const float* x, const uint8_t* mask /* bool */, float* out, int64_t BATCH_SIZE,
// int64_t INPUT_SHAPE_0, int64_t dim)`: its `dim` is an attr (the axis, 1), but in the text it
// is one more int64_t after the dims. The text parsers kope had before the typed shape also read
// `uint8_t* mask /* bool */` as a u8 tensor or no dtype at all, split `/* bf16, inout */` into two
// parameters and took the `*` of a note on a scalar attr for a pointer.
TEST(LegacySignatureShape, TheTypedShapeIsRightWhereTheTextIsAmbiguous) {
  auto op = spec::load_op(std::filesystem::path(KOPE_SOURCE_DIR) / "ops-kernelbench/scan/kb1_93_masked_cumsum");
  ASSERT_TRUE(op) << op.error().message;
  ASSERT_EQ(op->dims, (std::vector<std::string>{"BATCH_SIZE", "INPUT_SHAPE_0"}));
  ASSERT_EQ(op->attrs.size(), 1u);
  spec::SignatureShape typed = spec::signature_shape(*op);
  spec::SignatureShape text = legacy_signature_shape(spec::render_signature(*op));
  EXPECT_EQ(typed.str(), "in:f32,in:bool,out:f32,dim,dim,attr:i64");
  EXPECT_EQ(typed.dims(), 2);
  EXPECT_EQ(typed.scalars(), 1);
  EXPECT_EQ(text.str(), "in:f32,in:bool,out:f32,dim,dim,dim");
  EXPECT_NE(text, typed);
  // A task recorded from the spec carries the typed shape, and task_shape prefers it.
  TaskInfo t;
  t.signature = spec::render_signature(*op);
  EXPECT_EQ(task_shape(t), text);
  t.signature_shape = typed;
  EXPECT_EQ(task_shape(t), typed);
}

TEST_P(RetrieveTest, HoldoutLeavesOutTheOpsEarlierExperienceButNotTheCurrentRuns) {
  auto t = temp_store();
  CaseRecord old_case = make_case("run-1/softmax/1", "softmax", 2.0);
  old_case.run_id = "run-1";
  int64_t old_id = *t.store->record_case(old_case);
  CaseRecord renamed = make_case("run-1/softmax_v2/1", "softmax_v2", 2.5);  // the same spec under another name
  renamed.run_id = "run-1";
  renamed.task.spec_hash = old_case.task.spec_hash;
  int64_t renamed_id = *t.store->record_case(renamed);
  CaseRecord other = make_case("run-1/layernorm/1", "layernorm", 1.5);
  int64_t other_id = *t.store->record_case(other);
  CaseRecord current = make_case("run-2/softmax/1", "softmax", 1.2);
  current.run_id = "run-2";
  int64_t current_id = *t.store->record_case(current);
  LessonDelta d;
  d.lesson.kind = LessonKind::strategy;
  d.lesson.title = "Exp by polynomial";
  d.lesson.text = "A degree-5 polynomial exp was 3x faster";
  d.lesson.scope.category = "normalization";
  d.lesson.source_cases = {old_id};
  auto lid = t.store->apply(d);
  ASSERT_TRUE(lid);

  RetrievalQuery q = query(Stage::draft);
  auto open = t.store->retrieve(q);
  ASSERT_TRUE(open);
  EXPECT_NE(find_item(*open, "lesson:" + *lid), nullptr);

  q.holdout.ops = {"softmax"};
  q.holdout.spec_hashes = {old_case.task.spec_hash};
  q.holdout.run_id = "run-2";
  auto held = t.store->retrieve(q);
  ASSERT_TRUE(held);
  for (const auto& it : *held) {
    for (int64_t id : {old_id, renamed_id}) {
      EXPECT_NE(it.id, "kernel:" + std::to_string(id));
      EXPECT_NE(it.id, "case:" + std::to_string(id));
    }
  }
  EXPECT_EQ(find_item(*held, "lesson:" + *lid), nullptr) << "distilled from a held-out case";
  EXPECT_NE(find_item(*held, "kernel:" + std::to_string(current_id)), nullptr) << "the current run's own";
  EXPECT_NE(find_item(*held, "kernel:" + std::to_string(other_id)), nullptr) << "another op's";
}

TEST_P(RetrieveTest, LearnedValuesChangeTheRanking) {
  auto t = temp_store();
  std::vector<std::string> ids;
  for (const char* title : {"Keep rows in L1", "Avoid denormals in exp"}) {
    LessonDelta d;
    d.lesson.kind = LessonKind::strategy;
    d.lesson.title = title;
    d.lesson.text = "advice";
    d.lesson.scope.category = "normalization";
    ids.push_back(*t.store->apply(d));
  }
  auto before = t.store->retrieve(query(Stage::draft));
  ASSERT_TRUE(before);
  ASSERT_EQ(before->size(), 2u);
  EXPECT_DOUBLE_EQ((*before)[0].score, (*before)[1].score);
  std::string loser = (*before)[0].id;  // make the first-ranked one hurt, the other help
  std::string winner = (*before)[1].id;
  for (int i = 0; i < 3; ++i) {
    RetrievalLogEntry e;
    e.prompt_id = "p" + std::to_string(i);
    e.stage = Stage::draft;
    e.items = {{winner, 1.0}};
    ASSERT_TRUE(t.store->log_retrieval(e));
    ASSERT_TRUE(t.store->credit(e.prompt_id, 1.0));
    e.prompt_id = "q" + std::to_string(i);
    e.items = {{loser, 1.0}};
    ASSERT_TRUE(t.store->log_retrieval(e));
    ASSERT_TRUE(t.store->credit(e.prompt_id, 0.0));
  }
  auto after = t.store->retrieve(query(Stage::draft));
  ASSERT_TRUE(after && after->size() == 2);
  EXPECT_EQ((*after)[0].id, winner);
  EXPECT_GT((*after)[0].score_parts.at("value"), 0);
  EXPECT_LT((*after)[1].score_parts.at("value"), 0);
}

TEST_P(RetrieveTest, LineageAroundTheIncumbent) {
  auto t = temp_store();
  int64_t root = *t.store->record_case(make_case("root", "softmax", 2.0));
  int64_t inc = *t.store->record_case(make_case("inc", "softmax", 3.0, k_native, root));
  CaseRecord tried = make_case("tried", "softmax", 2.4, k_native, inc);
  tried.optimisation = "blocked the rows by 16";
  int64_t tried_id = *t.store->record_case(tried);
  int64_t sibling = *t.store->record_case(make_case("sib", "softmax", 0, k_native, root));
  RetrievalQuery q = query(Stage::refine);
  q.incumbent_case = inc;
  auto items = t.store->retrieve(q);
  ASSERT_TRUE(items);
  const RetrievedItem* tr = find_item(*items, "case:" + std::to_string(tried_id));
  ASSERT_NE(tr, nullptr);
  EXPECT_GT(tr->score_parts.at("lineage"), 0);
  ASSERT_TRUE(tr->kase);
  EXPECT_EQ(tr->kase->lineage, CaseLineage::tried_from);
  EXPECT_EQ(tr->kase->outcome, Outcome::negative);  // 2.4 / 3.0 = 0.8: it made things worse
  const RetrievedItem* sib = find_item(*items, "case:" + std::to_string(sibling));
  ASSERT_NE(sib, nullptr);
  EXPECT_GT(sib->score_parts.at("lineage"), 0);
  ASSERT_TRUE(sib->kase);
  EXPECT_EQ(sib->kase->lineage, CaseLineage::sibling_branch);
  // The incumbent is offered as this op's best kernel (its lineage moves over); its parent as
  // an ancestor.
  const RetrievedItem* incumbent = find_item(*items, "kernel:" + std::to_string(inc));
  ASSERT_NE(incumbent, nullptr);
  EXPECT_EQ(incumbent->kase->lineage, CaseLineage::incumbent);
  EXPECT_FALSE(incumbent->kase->other_incumbent);
  const RetrievedItem* ancestor = find_item(*items, "case:" + std::to_string(root));
  ASSERT_NE(ancestor, nullptr);
  EXPECT_EQ(ancestor->kase->lineage, CaseLineage::ancestor);
  EXPECT_EQ(ancestor->kase->ancestor, 1);
}

// The op's fastest recorded kernel need not be the incumbent (recorded timings are taken at
// other times and loads; the incumbent is decided side by side): the item says which it is.
TEST_P(RetrieveTest, ABestKernelThatIsNotTheIncumbentSaysSo) {
  auto t = temp_store();
  int64_t inc = *t.store->record_case(make_case("inc", "softmax", 3.0));
  int64_t faster = *t.store->record_case(make_case("faster", "softmax", 5.0));
  RetrievalQuery q = query(Stage::refine);
  q.incumbent_case = inc;
  auto items = t.store->retrieve(q);
  ASSERT_TRUE(items) << items.error().message;
  const RetrievedItem* best = find_item(*items, "kernel:" + std::to_string(faster));
  ASSERT_NE(best, nullptr);
  ASSERT_TRUE(best->kase);
  EXPECT_EQ(best->kase->other_incumbent, inc);
  q.incumbent_case = faster;
  auto same = t.store->retrieve(q);
  ASSERT_TRUE(same);
  best = find_item(*same, "kernel:" + std::to_string(faster));
  ASSERT_NE(best, nullptr);
  EXPECT_FALSE(best->kase->other_incumbent);
}

TEST_P(RetrieveTest, RespectsTheLimitAndOrdersByScore) {
  auto t = temp_store();
  for (int i = 0; i < 30; ++i) {
    ASSERT_TRUE(t.store->record_case(make_case("c" + std::to_string(i), "softmax", 1.0 + 0.1 * i)));
  }
  RetrievalQuery q = query(Stage::refine);
  q.limit = 7;
  auto items = t.store->retrieve(q);
  ASSERT_TRUE(items);
  ASSERT_EQ(items->size(), 7u);
  for (size_t i = 1; i < items->size(); ++i) EXPECT_GE((*items)[i - 1].score, (*items)[i].score);
  for (const auto& it : *items) {
    double sum = 0;
    for (const auto& [k, v] : it.score_parts) sum += v;
    EXPECT_NEAR(sum, it.score, 1e-9);
  }
}

}  // namespace
}  // namespace kope::memory
