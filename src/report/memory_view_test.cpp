#include "report/memory_view.h"

#include <gtest/gtest.h>

#include "memory/test_util.h"
#include "report/figures.h"
#include "report/html.h"
#include "report/tables.h"

namespace kope::report {
namespace {

using memory::LessonDelta;

std::string add_lesson(memory::Store& s, memory::LessonKind kind, const std::string& title,
                       const std::string& category) {
  LessonDelta d;
  d.op = LessonDelta::Op::add;
  d.lesson.kind = kind;
  d.lesson.title = title;
  d.lesson.text = title + ": a lesson for the report test, long enough to stand on its own.";
  d.lesson.scope.category = category;
  d.lesson.scope.backend = category.empty() ? "" : "cpu";
  d.reason = "test";
  auto id = s.apply(d);
  EXPECT_TRUE(id) << id.error().message;
  return id ? *id : "";
}

void vote(memory::Store& s, const std::string& id, LessonDelta::Op op, int times) {
  for (int i = 0; i < times; ++i) {
    LessonDelta d;
    d.op = op;
    d.lesson_id = id;
    d.reason = "test vote";
    auto r = s.apply(d);
    EXPECT_TRUE(r) << r.error().message;
  }
}

TEST(MemoryView, LessonsHelpfulHarmfulAndQuarantinedWins) {
  auto ts = memory::testing::temp_store();
  auto& s = *ts.store;
  ASSERT_TRUE(s.record_case(memory::testing::make_case("r/softmax/1", "softmax", 2.0)));
  // A speedup far beyond anything plausible for a root case: quarantined by the store.
  ASSERT_TRUE(s.record_case(memory::testing::make_case("r/softmax/2", "softmax", 5000.0)));
  std::string good =
      add_lesson(s, memory::LessonKind::strategy, "Parallelise rows", "normalization");
  std::string bad = add_lesson(s, memory::LessonKind::pitfall, "Unroll everything by 64", "");
  std::string old =
      add_lesson(s, memory::LessonKind::recipe, "Two-pass softmax recipe", "normalization");
  vote(s, good, LessonDelta::Op::upvote, 3);
  vote(s, bad, LessonDelta::Op::downvote, 2);
  vote(s, old, LessonDelta::Op::deprecate, 1);
  ts.store.reset();

  auto m = load_memory_overview(ts.path);
  ASSERT_TRUE(m) << m.error().message;
  EXPECT_EQ(m->cases, 2);
  EXPECT_EQ(m->lessons, 3);
  ASSERT_EQ(m->all_lessons.size(), 3u);
  std::map<std::string, MemoryLesson> by_id;
  for (const auto& l : m->all_lessons) by_id[l.id] = l;
  EXPECT_EQ(by_id[good].helpful, 3);
  EXPECT_EQ(by_id[good].scope, "normalization · cpu");
  EXPECT_EQ(by_id[bad].harmful, 2);
  EXPECT_EQ(by_id[bad].scope, "any");
  EXPECT_EQ(by_id[old].status, "deprecated");
  ASSERT_EQ(m->quarantined.size(), 1u);
  EXPECT_EQ(m->quarantined[0].op, "softmax");
  EXPECT_EQ(m->quarantined[0].status, "quarantined");
  EXPECT_FALSE(m->quarantined[0].reason.empty());
  EXPECT_DOUBLE_EQ(*m->quarantined[0].speedup_vs_reference, 5000.0);

  // The memory section of a report: the same records in every format.
  std::vector<RunData> runs;
  runs.push_back(
      *load_run(std::filesystem::path(KOPE_SOURCE_DIR) / "tests/report/fixtures/run-none"));
  auto an = analyse(std::move(runs), {});
  ASSERT_TRUE(an);
  an->memory = *m;
  auto tables = build_tables(*an);
  auto find = [&](const std::string& id) -> const Table& {
    for (const auto& t : tables) {
      if (t.id == id) return t;
    }
    ADD_FAILURE() << id;
    return tables.front();
  };
  EXPECT_EQ(find("memory_lessons").rows.size(), 3u);
  const Table& helpful = find("memory_helpful");
  ASSERT_EQ(helpful.rows.size(), 1u);
  EXPECT_EQ(std::get<std::string>(helpful.rows[0][static_cast<size_t>(helpful.column("id"))]),
            good);
  const Table& harmful = find("memory_harmful");
  ASSERT_EQ(harmful.rows.size(), 1u);
  EXPECT_EQ(std::get<std::string>(harmful.rows[0][static_cast<size_t>(harmful.column("id"))]), bad);
  EXPECT_EQ(find("memory_quarantined").rows.size(), 1u);
  std::string page = render_html(*an, tables);
  EXPECT_NE(page.find("id=\"memory\""), std::string::npos);
  EXPECT_NE(page.find("Parallelise rows"), std::string::npos);
  EXPECT_NE(report_text(*an, tables, false).find("Memory: quarantined wins"), std::string::npos);
}

TEST(MemoryView, AMissingDatabaseIsNotCreated) {
  auto dir = util::TempDir::create("kope-report-memory");
  ASSERT_TRUE(dir);
  auto path = dir->path() / "none.db";
  auto m = load_memory_overview(path);
  ASSERT_FALSE(m);
  EXPECT_EQ(m.error().kind, ErrorKind::not_found);
  EXPECT_FALSE(std::filesystem::exists(path));
}

}  // namespace
}  // namespace kope::report
