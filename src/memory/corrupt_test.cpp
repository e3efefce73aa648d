#include <gtest/gtest.h>

#include <fstream>
#include <random>

#include "memory/db.h"
#include "memory/test_util.h"

namespace kope::memory {
namespace {

using namespace testing;

void write_bytes(const std::filesystem::path& p, const std::string& bytes) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

std::string random_bytes(size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::string s(n, '\0');
  for (auto& c : s) c = static_cast<char>(rng() & 0xff);
  return s;
}

// A real database with some content, closed (so everything is in the main file).
std::filesystem::path make_db(const util::TempDir& dir, const std::string& name = "m.db") {
  auto path = dir.path() / name;
  auto s = open_store(path);
  EXPECT_TRUE(s);
  for (int i = 0; i < 200; ++i) {
    CaseRecord c = make_case("k" + std::to_string(i), "softmax", 1.0 + i * 0.01);
    c.journal = std::string(500, 'j') + std::to_string(i);
    EXPECT_TRUE((*s)->record_case(c));
  }
  return path;
}

void expect_corrupt(const Result<std::unique_ptr<Database>>& r, const std::filesystem::path& path,
                    const std::string& words) {
  ASSERT_FALSE(r) << "opened a damaged file";
  EXPECT_EQ(r.error().kind, ErrorKind::corrupt) << r.error().message;
  EXPECT_NE(r.error().message.find(path.string()), std::string::npos) << r.error().message;
  EXPECT_NE(r.error().message.find(words), std::string::npos) << r.error().message;
}

TEST(Corrupt, RandomBytes) {
  auto dir = util::TempDir::create("kope-corrupt");
  ASSERT_TRUE(dir);
  for (unsigned seed = 1; seed <= 5; ++seed) {
    auto path = dir->path() / fmt::format("random{}.db", seed);
    write_bytes(path, random_bytes(4096 * seed, seed));
    expect_corrupt(open_store(path), path, "not an SQLite database");
  }
  auto tiny = dir->path() / "tiny.db";
  write_bytes(tiny, "kope");
  expect_corrupt(open_store(tiny), tiny, "not an SQLite database");
}

TEST(Corrupt, RandomBytesAfterAValidHeader) {
  auto dir = util::TempDir::create("kope-corrupt");
  ASSERT_TRUE(dir);
  auto good = make_db(*dir);
  auto bytes = util::read_file(good);
  ASSERT_TRUE(bytes);
  auto path = dir->path() / "header-only.db";
  write_bytes(path, bytes->substr(0, 100) + random_bytes(bytes->size() - 100, 7));
  auto r = open_store(path);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().kind, ErrorKind::corrupt) << r.error().message;
  EXPECT_NE(r.error().message.find(path.string()), std::string::npos);
}

TEST(Corrupt, TruncatedDatabase) {
  auto dir = util::TempDir::create("kope-corrupt");
  ASSERT_TRUE(dir);
  auto path = make_db(*dir);
  auto size = std::filesystem::file_size(path);
  std::filesystem::resize_file(path, size / 2);
  expect_corrupt(open_store(path), path, "truncated");
}

TEST(Corrupt, DamagedPagesAreReportedNeverACrash) {
  auto dir = util::TempDir::create("kope-corrupt");
  ASSERT_TRUE(dir);
  auto good = make_db(*dir);
  auto bytes = util::read_file(good);
  ASSERT_TRUE(bytes);
  size_t page = 4096;
  ASSERT_GT(bytes->size(), 8 * page);
  for (unsigned seed = 1; seed <= 6; ++seed) {
    std::string damaged = *bytes;
    size_t at = page * (2 + seed % (bytes->size() / page - 2));
    std::string noise = random_bytes(page, seed);
    damaged.replace(at, page, noise);
    auto path = dir->path() / fmt::format("damaged{}.db", seed);
    write_bytes(path, damaged);
    auto store = open_store(path);
    if (!store) {
      EXPECT_EQ(store.error().kind, ErrorKind::corrupt) << store.error().message;
      continue;
    }
    // Opened (the damage is in data pages): every operation either works or says corrupt,
    // and check() reports the damage.
    auto check = (*store)->check();
    if (check) {
      EXPECT_FALSE(check->ok()) << "seed " << seed;
    } else {
      EXPECT_EQ(check.error().kind, ErrorKind::corrupt) << check.error().message;
    }
    auto stats = (*store)->stats();
    if (!stats) {
      EXPECT_EQ(stats.error().kind, ErrorKind::corrupt) << stats.error().message;
    }
    CaseFilter f;
    f.limit = 0;
    auto cases = (*store)->cases(f);
    if (!cases) {
      EXPECT_EQ(cases.error().kind, ErrorKind::corrupt) << cases.error().message;
    }
  }
}

TEST(Corrupt, FutureSchemaVersion) {
  auto dir = util::TempDir::create("kope-corrupt");
  ASSERT_TRUE(dir);
  auto path = make_db(*dir);
  {
    auto db = Db::open(path);
    ASSERT_TRUE(db);
    ASSERT_TRUE((*db)->exec("PRAGMA user_version = 99"));
  }
  expect_corrupt(open_store(path), path, "newer kope");
}

TEST(Corrupt, ForeignSqliteDatabase) {
  auto dir = util::TempDir::create("kope-corrupt");
  ASSERT_TRUE(dir);
  auto path = dir->path() / "other.db";
  {
    auto db = Db::open(path);
    ASSERT_TRUE(db);
    ASSERT_TRUE((*db)->exec("CREATE TABLE invoices(id INTEGER PRIMARY KEY, total REAL); INSERT INTO invoices VALUES (1, 9.5);"));
  }
  expect_corrupt(open_store(path), path, "not a kope memory");
  // It was not touched.
  auto db = Db::open(path);
  ASSERT_TRUE(db);
  EXPECT_EQ(*(*db)->query_int("SELECT count(*) FROM invoices"), 1);
  EXPECT_EQ(*(*db)->query_int("PRAGMA application_id"), 0);
}

TEST(Corrupt, EmptyFileBecomesAFreshDatabaseAndDirectoriesAreRefused) {
  auto dir = util::TempDir::create("kope-corrupt");
  ASSERT_TRUE(dir);
  auto path = dir->path() / "empty.db";
  write_bytes(path, "");
  auto s = open_store(path);
  ASSERT_TRUE(s) << s.error().message;
  EXPECT_EQ((*s)->stats()->cases, 0);
  auto d = open_store(dir->path());
  ASSERT_FALSE(d);
  EXPECT_EQ(d.error().kind, ErrorKind::io);
}

}  // namespace
}  // namespace kope::memory
