#include "memory/shared_db.h"

#include <gtest/gtest.h>

namespace kope::memory {
namespace {

// A SharedDb over a private in-memory SQLite database holding only what these tests touch.
std::unique_ptr<SharedDb> scratch() {
  auto db = Db::open(":memory:");
  EXPECT_TRUE(db) << db.error().message;
  auto shared = std::make_unique<SharedDb>(std::move(*db), ":memory:");
  EXPECT_TRUE(shared->db().exec("CREATE TABLE t(x INTEGER); "
                                "CREATE TABLE counters(name TEXT PRIMARY KEY, value INTEGER NOT NULL)"));
  return shared;
}

int64_t count(SharedDb& shared, const char* sql) { return shared.db().query_int(sql).value().value_or(-1); }

TEST(SharedDb, AWriteCommitsWhatSucceedsWithItsCounters) {
  auto shared = scratch();
  int resets = 0;
  shared->on_reset([&] { ++resets; });
  auto written = shared->write(SharedDb::Resend::idempotent, [&]() -> Result<int> {
    KOPE_TRY(shared->db().exec("INSERT INTO t(x) VALUES (1)"));
    shared->add_counter_locked("rows", 1);
    shared->add_counter_locked("rows", 2);
    return 7;
  });
  ASSERT_TRUE(written) << written.error().message;
  EXPECT_EQ(*written, 7);
  EXPECT_EQ(count(*shared, "SELECT count(*) FROM t"), 1);
  EXPECT_EQ(count(*shared, "SELECT value FROM counters WHERE name = 'rows'"), 3);
  EXPECT_EQ(resets, 0);
  EXPECT_FALSE(shared->db().in_transaction());
}

// A failed write leaves nothing: its rows roll back, its pending counters are dropped, and every
// registered cache is reset (a store must not remember ids of rows that are gone).
TEST(SharedDb, AFailedWriteRollsBackAndResetsEveryRegisteredCache) {
  auto shared = scratch();
  int case_resets = 0, lesson_resets = 0;
  shared->on_reset([&] { ++case_resets; });
  shared->on_reset([&] { ++lesson_resets; });
  Status failed = shared->write(SharedDb::Resend::only_unsent, [&]() -> Status {
    KOPE_TRY(shared->db().exec("INSERT INTO t(x) VALUES (1)"));
    shared->add_counter_locked("rows", 1);
    return fail(ErrorKind::usage, "the second row is bad");
  });
  ASSERT_FALSE(failed);
  EXPECT_EQ(failed.error().kind, ErrorKind::usage);
  EXPECT_EQ(count(*shared, "SELECT count(*) FROM t"), 0);
  EXPECT_EQ(case_resets, 1);
  EXPECT_EQ(lesson_resets, 1);
  EXPECT_FALSE(shared->db().in_transaction());

  // The counter queued by the failed write is not carried into the next one.
  ASSERT_TRUE(shared->write(SharedDb::Resend::idempotent, [&]() -> Status {
    shared->add_counter_locked("rows", 5);
    return {};
  }));
  EXPECT_EQ(count(*shared, "SELECT value FROM counters WHERE name = 'rows'"), 5);
}

}  // namespace
}  // namespace kope::memory
