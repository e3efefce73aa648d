#include <gtest/gtest.h>

#include <sstream>

#include <nlohmann/json.hpp>

#include "memory/test_util.h"

namespace kope::memory {
namespace {

using namespace testing;

std::string add_lesson(Database& s, const std::string& title, const std::string& text, LessonKind kind = LessonKind::strategy,
                       const std::string& category = "normalization", std::optional<int64_t> source = std::nullopt) {
  LessonDelta d;
  d.op = LessonDelta::Op::add;
  d.lesson.kind = kind;
  d.lesson.title = title;
  d.lesson.text = text;
  d.lesson.scope.category = category;
  d.lesson.scope.backend = "cpu";
  d.source_case = source;
  d.reason = "test";
  auto id = s.apply(d);
  EXPECT_TRUE(id) << (id ? "" : id.error().message);
  return id ? *id : "";
}

Status vote(Database& s, const std::string& id, bool up) {
  LessonDelta d;
  d.op = up ? LessonDelta::Op::upvote : LessonDelta::Op::downvote;
  d.lesson_id = id;
  d.reason = "test vote";
  auto r = s.apply(d);
  if (!r) return std::unexpected(r.error());
  return {};
}

Lesson lesson(Database& s, const std::string& id) {
  auto l = s.get_lesson(id);
  EXPECT_TRUE(l && *l);
  return l && *l ? **l : Lesson{};
}

class LessonsTest : public StoreKindTest {};
KOPE_STORE_KINDS(LessonsTest);

TEST_P(LessonsTest, ExactAndNearDuplicatesAreMergedNotAdded) {
  auto t = temp_store();
  int64_t src = *t.store->record_case(make_case("c1", "softmax", 1.5));
  std::string a = add_lesson(*t.store, "Vectorise the row max", "Use AVX2 max over 8 floats at a time before the exp pass");
  std::string exact = add_lesson(*t.store, "vectorise the row MAX!", "use avx2 max over 8 floats at a time before the exp pass.");
  std::string near = add_lesson(*t.store, "Vectorise the row max", "Use AVX2 max over 8 floats at a time before the exp loop",
                                LessonKind::strategy, "normalization", src);
  EXPECT_EQ(exact, a);
  EXPECT_EQ(near, a);
  // Another kind or another scope is a different lesson.
  std::string other_kind = add_lesson(*t.store, "Vectorise the row max", "Use AVX2 max over 8 floats at a time before the exp pass",
                                      LessonKind::pitfall);
  std::string other_scope = add_lesson(*t.store, "Vectorise the row max", "Use AVX2 max over 8 floats at a time before the exp pass",
                                       LessonKind::strategy, "reduction");
  EXPECT_NE(other_kind, a);
  EXPECT_NE(other_scope, a);
  std::string different = add_lesson(*t.store, "Block for L2", "Tile the matrix so a panel of B stays in L2");
  EXPECT_NE(different, a);
  EXPECT_EQ(t.store->stats()->lessons, 4);

  Lesson l = lesson(*t.store, a);
  EXPECT_EQ(l.source_cases, std::vector<int64_t>{src});  // the duplicate's provenance was kept
  auto hist = t.store->lesson_history(a);
  ASSERT_TRUE(hist);
  ASSERT_EQ(hist->size(), 3u);
  EXPECT_EQ((*hist)[0].op, "add");
  EXPECT_NE((*hist)[1].reason.find("duplicate"), std::string::npos);
  auto payload = nlohmann::json::parse((*hist)[2].payload);
  EXPECT_EQ(payload["duplicate"], "near");
  EXPECT_GE(payload["similarity"].get<double>(), k_lesson_near_duplicate);
  EXPECT_EQ((*hist)[2].source_case, src);
  EXPECT_EQ(a.size(), 11u);
  EXPECT_EQ(a[0], 'L');
}

TEST_P(LessonsTest, EditsAreLoggedAndReindexed) {
  auto t = temp_store();
  std::string id = add_lesson(*t.store, "Prefetch rows", "Software prefetch two rows ahead");
  LessonDelta e;
  e.op = LessonDelta::Op::edit;
  e.lesson_id = id;
  e.lesson.text = "Hardware prefetchers already cover streaming rows; skip manual prefetch";
  e.reason = "measured";
  ASSERT_TRUE(t.store->apply(e));
  EXPECT_EQ(lesson(*t.store, id).text, e.lesson.text);
  EXPECT_EQ(lesson(*t.store, id).title, "Prefetch rows");
  auto hist = t.store->lesson_history(id);
  ASSERT_TRUE(hist && hist->size() == 2);
  auto payload = nlohmann::json::parse((*hist)[1].payload);
  EXPECT_EQ(payload["old"]["text"], "Software prefetch two rows ahead");
  LessonFilter f;
  f.text = "streaming prefetchers";
  auto found = t.store->find_lessons(f);
  ASSERT_TRUE(found);
  ASSERT_EQ(found->size(), 1u);
  f.text = "ahead";
  EXPECT_TRUE(t.store->find_lessons(f)->empty());  // the old text left the index
  EXPECT_TRUE(t.store->check()->ok());
}

TEST_P(LessonsTest, VotesDeprecationAndMergeKeepEverything) {
  auto t = temp_store();
  std::string a = add_lesson(*t.store, "Use exp2 with a scaled input", "exp2f is cheaper than expf on this toolchain");
  std::string b = add_lesson(*t.store, "Fuse max and sum passes", "An online softmax does one pass for max and sum");
  ASSERT_TRUE(vote(*t.store, a, true));
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(vote(*t.store, a, false));
  EXPECT_EQ(lesson(*t.store, a).status, LessonStatus::active);  // 4 harmful: not yet
  ASSERT_TRUE(vote(*t.store, a, false));
  // harmful 5 >= 5 but < 2 x (helpful 1 + 1) = 4? no: 5 >= 4, so deprecated.
  Lesson la = lesson(*t.store, a);
  EXPECT_EQ(la.helpful, 1);
  EXPECT_EQ(la.harmful, 5);
  EXPECT_EQ(la.status, LessonStatus::deprecated);
  EXPECT_FALSE(la.valid_to.empty());
  auto hist = t.store->lesson_history(a);
  ASSERT_TRUE(hist);
  EXPECT_EQ(hist->back().op, "deprecate");
  EXPECT_NE(hist->back().reason.find("automatic"), std::string::npos);
  // Deprecated lessons stay (not offered, still listed with their history).
  auto active = t.store->lessons({});
  ASSERT_TRUE(active);
  ASSERT_EQ(active->size(), 1u);
  EXPECT_EQ((*active)[0].id, b);
  LessonFilter all;
  EXPECT_EQ(t.store->find_lessons(all)->size(), 2u);
  // A deprecated lesson cannot absorb a merge; an active one can.
  std::string c = add_lesson(*t.store, "Online softmax", "Compute running max and rescaled sum in a single sweep");
  ASSERT_TRUE(vote(*t.store, c, true));
  ASSERT_TRUE(vote(*t.store, c, true));
  LessonDelta m;
  m.op = LessonDelta::Op::merge;
  m.lesson_id = c;
  m.merge_into = a;
  EXPECT_FALSE(t.store->apply(m));
  m.merge_into = b;
  auto into = t.store->apply(m);
  ASSERT_TRUE(into);
  EXPECT_EQ(*into, b);
  EXPECT_EQ(lesson(*t.store, c).status, LessonStatus::merged);
  EXPECT_EQ(lesson(*t.store, c).merged_into, b);
  EXPECT_EQ(lesson(*t.store, b).helpful, 2);
  EXPECT_TRUE(t.store->apply(m));  // merging again changes nothing
  EXPECT_EQ(lesson(*t.store, b).helpful, 2);
  LessonDelta up;
  up.op = LessonDelta::Op::upvote;
  up.lesson_id = c;
  EXPECT_FALSE(t.store->apply(up));  // merged lessons are changed through their target
  LessonDelta missing;
  missing.op = LessonDelta::Op::deprecate;
  missing.lesson_id = "L0000000000";
  EXPECT_EQ(t.store->apply(missing).error().kind, ErrorKind::not_found);
  auto check = t.store->check();
  ASSERT_TRUE(check) << check.error().message;
  EXPECT_TRUE(check->ok()) << check->problems.front();
  EXPECT_EQ(check->lessons_checked, 3);
}

TEST_P(LessonsTest, ScopeFilters) {
  auto t = temp_store();
  add_lesson(*t.store, "General advice", "Check the kernel signature first", LessonKind::pitfall, "");
  add_lesson(*t.store, "Normalization advice", "Keep the row in cache between passes");
  add_lesson(*t.store, "Matmul advice", "Pack B panels", LessonKind::recipe, "matmul");
  LessonScope s;
  s.category = "normalization";
  auto l = t.store->lessons(s);
  ASSERT_TRUE(l);
  EXPECT_EQ(l->size(), 2u);
  LessonFilter f;
  f.kind = LessonKind::recipe;
  EXPECT_EQ(t.store->find_lessons(f)->size(), 1u);
  f.kind.reset();
  f.status = LessonStatus::deprecated;
  EXPECT_TRUE(t.store->find_lessons(f)->empty());
  // Text search ranks by BM25.
  std::string weak = add_lesson(*t.store, "Many things", "Loop order, blocking, vector width, and a denormal note, "
                                "alignment, prefetch distance, unroll factor, thread count");
  std::string strong = add_lesson(*t.store, "Flush denormals", "Denormal inputs make exp slow: flush denormal values");
  LessonFilter search;
  search.text = "denormal";
  auto found = t.store->find_lessons(search);
  ASSERT_TRUE(found);
  ASSERT_EQ(found->size(), 2u);
  EXPECT_EQ((*found)[0].id, strong);
  EXPECT_EQ((*found)[1].id, weak);
}

class ValuesTest : public StoreKindTest {};
KOPE_STORE_KINDS(ValuesTest);

TEST_P(ValuesTest, CreditMovesValuesByTheStatedRateAndIsIdempotent) {
  auto t = temp_store();
  int64_t c1 = *t.store->record_case(make_case("c1", "softmax", 1.5));
  std::string l = add_lesson(*t.store, "Online softmax", "Single sweep for max and sum");
  RetrievalLogEntry e;
  e.prompt_id = "p1";
  e.stage = Stage::draft;
  e.items = {{"lesson:" + l, 0.9}, {"case:" + std::to_string(c1), 0.5}};
  e.tier_tokens = {{"hot", 900}, {"warm", 300}, {"cold", 0}};
  ASSERT_TRUE(t.store->log_retrieval(e));
  ASSERT_TRUE(t.store->credit("p1", 1.0));
  EXPECT_NEAR(lesson(*t.store, l).value.at("draft"), 0.5 + 0.2 * (1.0 - 0.5), 1e-12);
  EXPECT_EQ(lesson(*t.store, l).helpful, 1);
  ASSERT_TRUE(t.store->credit("p1", 0.0));  // retried credit: nothing changes
  EXPECT_NEAR(lesson(*t.store, l).value.at("draft"), 0.6, 1e-12);
  EXPECT_EQ(lesson(*t.store, l).harmful, 0);

  e.prompt_id = "p2";
  ASSERT_TRUE(t.store->log_retrieval(e));
  ASSERT_TRUE(t.store->credit("p2", 0.0));
  EXPECT_NEAR(lesson(*t.store, l).value.at("draft"), 0.6 + 0.2 * (0.0 - 0.6), 1e-12);
  EXPECT_EQ(lesson(*t.store, l).harmful, 1);

  RetrievalLogEntry r;
  r.prompt_id = "p3";
  r.stage = Stage::refine;
  r.items = {{"lesson:" + l, 0.4}};
  ASSERT_TRUE(t.store->log_retrieval(r));
  double reward = stage_reward(Stage::refine, eval::Verdict::correct, 1.3);
  ASSERT_TRUE(t.store->credit("p3", reward));
  EXPECT_NEAR(lesson(*t.store, l).value.at("refine"), 0.2 * reward, 1e-12);
  EXPECT_EQ(lesson(*t.store, l).helpful, 2);

  auto back = t.store->retrieval_entry("p1");
  ASSERT_TRUE(back && *back);
  EXPECT_EQ((*back)->items.size(), 2u);
  EXPECT_EQ((*back)->tier_tokens.at("hot"), 900);
  EXPECT_EQ(t.store->credit("nope", 1.0).error().kind, ErrorKind::not_found);
  EXPECT_EQ(t.store->credit("p2", std::nan("")).error().kind, ErrorKind::usage);
  auto s = t.store->stats();
  EXPECT_EQ(s->prompts, 3);
  EXPECT_EQ(s->prompts_credited, 3);
  auto check = t.store->check();
  ASSERT_TRUE(check) << check.error().message;
  EXPECT_TRUE(check->ok()) << check->problems.front();
}

TEST_P(ValuesTest, LessonsThatKeepHurtingAreDeprecatedThroughCredit) {
  auto t = temp_store();
  std::string l = add_lesson(*t.store, "Unroll by 64", "Unroll the inner loop 64 times");
  for (int i = 0; i < 6; ++i) {
    RetrievalLogEntry e;
    e.prompt_id = "bad-" + std::to_string(i);
    e.stage = Stage::repair;
    e.items = {{"lesson:" + l, 0.5}};
    ASSERT_TRUE(t.store->log_retrieval(e));
    ASSERT_TRUE(t.store->credit(e.prompt_id, 0.0));
  }
  Lesson got = lesson(*t.store, l);
  EXPECT_EQ(got.status, LessonStatus::deprecated);
  EXPECT_LT(got.value.at("repair"), 0.2);
  EXPECT_TRUE(t.store->check()->ok());
}

// An imported lesson is labelled foreign until this target confirms or updates it with its own
// measurements: helpful credit from a native prompt, or an edit by a native reflection. Credit
// from a prompt of other hardware, and harmful credit, confirm nothing.
TEST_P(ValuesTest, AnImportedLessonConfirmedHereIsNoLongerForeign) {
  auto a = temp_store("a.db");
  add_lesson(*a.store, "Online softmax", "Single sweep for the max and the sum of a row");
  add_lesson(*a.store, "Blocked rows", "Process four rows at once to reuse the loaded weights");
  std::ostringstream dump;
  ASSERT_TRUE(a.store->export_json(dump, {}));
  auto b = temp_store("b.db");
  int64_t native = *b.store->record_case(make_case("n/0", "softmax", 1.5));
  int64_t other = *b.store->record_case(make_case("g/0", "softmax", 2.0, k_foreign));
  ASSERT_TRUE(b.store->import_json(dump.str(), {true, "other-machine.json"}));
  auto imported = b.store->find_lessons({});
  ASSERT_TRUE(imported && imported->size() == 2);
  std::string online, blocked;
  for (const auto& l : *imported) {
    EXPECT_TRUE(l.foreign_origin);
    (l.title == "Online softmax" ? online : blocked) = l.id;
  }
  RetrievalQuery q;
  q.task = task("softmax");
  q.target = k_native;
  q.backend = "cpu";
  q.stage = Stage::draft;
  auto item = [&](const std::string& id) -> std::optional<RetrievedItem> {
    auto items = b.store->retrieve(q);
    EXPECT_TRUE(items) << (items ? "" : items.error().message);
    for (const auto& it : items ? *items : std::vector<RetrievedItem>{}) {
      if (it.id == "lesson:" + id) return it;
    }
    return std::nullopt;
  };
  auto credit = [&](const std::string& prompt, int64_t case_id, double reward, const std::string& lesson_id) {
    RetrievalLogEntry e;
    e.prompt_id = prompt;
    e.case_id = case_id;
    e.stage = Stage::draft;
    e.items = {{"lesson:" + lesson_id, 0.9}};
    ASSERT_TRUE(b.store->log_retrieval(e));
    ASSERT_TRUE(b.store->credit(prompt, reward));
  };
  // `foreign` is what makes the text say "not confirmed on this machine: feasibility only"
  // (agent/memory_items.h).
  for (const auto& id : {online, blocked}) {
    auto before = item(id);
    ASSERT_TRUE(before) << id;
    EXPECT_TRUE(before->foreign);
  }

  credit("p-other", other, 1.0, online);    // helpful, but measured on other hardware
  credit("p-harmful", native, 0.0, online);  // measured here, but harmful
  EXPECT_TRUE(item(online)->foreign);
  credit("p-native", native, 1.0, online);   // helpful, measured here
  auto after = item(online);
  ASSERT_TRUE(after);
  EXPECT_FALSE(after->foreign);
  auto history = b.store->lesson_history(online);
  ASSERT_TRUE(history);
  EXPECT_EQ(history->back().source_case, native) << "a credit names the case its prompt produced";
  EXPECT_TRUE(lesson(*b.store, online).foreign_origin) << "the provenance itself stays";

  // A native reflection's edit (its source case is this machine's) confirms too.
  EXPECT_TRUE(item(blocked)->foreign);
  LessonDelta edit;
  edit.op = LessonDelta::Op::edit;
  edit.lesson_id = blocked;
  edit.lesson.text = "Process four rows at once to reuse the loaded weights; here it gained 1.5x";
  edit.source_case = native;
  edit.reason = "reflection on softmax";
  ASSERT_TRUE(b.store->apply(edit));
  EXPECT_FALSE(item(blocked)->foreign);
  // On another target neither is confirmed.
  q.target = "x86_64-avx512";
  EXPECT_TRUE(item(online)->foreign);
  EXPECT_TRUE(item(blocked)->foreign);
  EXPECT_TRUE(b.store->check()->ok());
}

}  // namespace
}  // namespace kope::memory
