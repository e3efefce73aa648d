// memory/test_util.h — helpers shared by the memory tests: stores in temp dirs or fresh
// PostgreSQL databases, case builders, and the fixture that runs a suite against both kinds.
#pragma once

#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <unistd.h>

#include "kope/memory.h"
#include "memory/db.h"
#include "memory/sqlite_store.h"
#include "util/fs.h"

namespace kope::memory::testing {

inline constexpr const char* k_native = "x86_64-avx2-fma";
inline constexpr const char* k_foreign = "cuda-sm90";

inline TaskInfo task(const std::string& op, const std::string& category = "normalization", int level = 1) {
  TaskInfo t;
  t.op = op;
  t.spec_hash = "spec-" + op;
  t.category = category;
  t.level = level;
  t.signature = "extern \"C\" void kope_kernel(const float* x, float* y, int64_t N, int64_t D)";
  t.timed_dims = "[[4096, 1024]]";
  t.arithmetic_intensity = 0.6;
  t.log2_flops = 24;
  t.log2_bytes = 25;
  return t;
}

// A case for `op` on `target`; correct with the given speedup vs reference when speedup > 0,
// else a compile error.
inline CaseRecord make_case(const std::string& key, const std::string& op, double speedup,
                            const std::string& target = k_native, std::optional<int64_t> parent = std::nullopt) {
  CaseRecord c;
  c.natural_key = key;
  c.run_id = "run-1";
  c.task = task(op);
  c.hardware.target = target;
  c.hardware.cpu_model = target == k_native ? "Test CPU" : "Test GPU";
  c.hardware.cores = 8;
  c.hardware.peak_gflops = 500;
  c.hardware.peak_gbps = 40;
  c.toolchain.id = target == k_native ? "g++-12 -O3 -march=native" : "nvcc-12.4 -O3";
  c.toolchain.backend = target == k_native ? "cpu" : "cuda";
  c.parent_id = parent;
  c.stage = parent ? Stage::refine : Stage::draft;
  c.optimisation = "attempt " + key;
  c.code = "// kernel " + key + "\nextern \"C\" void kope_kernel(const float* x, float* y, int64_t N, int64_t D) {}\n";
  if (speedup > 0) {
    c.verdict = eval::Verdict::correct;
    c.message = "correct on 4 cases";
    c.speedup_vs_reference = speedup;
    c.fraction_of_roofline = 0.3;
    c.timings.push_back({3, 100.0 / speedup, 1.0, 100.0, std::nullopt, false, 0.0, std::nullopt});
  } else {
    c.verdict = eval::Verdict::compile_error;
    c.message = "compilation failed";
    c.diagnostics = "candidate.cpp:12:5: error: 'foo' was not declared in this scope\n   12 |     foo(x);\n";
  }
  c.journal = "strategy: " + c.optimisation;
  return c;
}

// The store kind temp_store() makes; set by StoreKindTest for each instantiation.
enum class StoreKind { sqlite, postgres };
inline StoreKind& current_store_kind() {
  static StoreKind kind = StoreKind::sqlite;
  return kind;
}

// The tests' PostgreSQL server ($KOPE_TEST_POSTGRES, a URL that scripts/services/postgres.sh
// prints), or nullopt with why there is none.
inline std::optional<std::string> test_postgres_url(std::string* why) {
  if (auto url = util::get_env("KOPE_TEST_POSTGRES"); url && !url->empty()) return *url;
  auto reason = util::get_env("KOPE_TEST_POSTGRES_SKIP");
  *why = fmt::format("no PostgreSQL server for the store tests: KOPE_TEST_POSTGRES is not set ({}); "
                     "run `scripts/services/postgres.sh start` or scripts/test.sh",
                     reason ? *reason : "start one with scripts/services/postgres.sh");
  return std::nullopt;
}

// `url` naming the database `name` instead of its own (the query string is dropped).
inline std::string with_database(const std::string& url, const std::string& name) {
  size_t scheme = url.find("://");
  size_t slash = url.find('/', scheme == std::string::npos ? 0 : scheme + 3);
  return (slash == std::string::npos ? url : url.substr(0, slash)) + "/" + name;
}

// A fresh, empty database on the test server, dropped (with any connection left) when the last
// owner lets go.
struct ScratchPostgres {
  std::string server;  // the server's own URL
  std::string name;
  std::string url;     // of the scratch database
  ~ScratchPostgres() {
    auto admin = Db::open_postgres(server);
    if (admin) (void)(*admin)->exec(fmt::format("DROP DATABASE IF EXISTS {} WITH (FORCE)", name));
  }
};

inline std::shared_ptr<ScratchPostgres> scratch_postgres() {
  std::string why;
  auto server = test_postgres_url(&why);
  EXPECT_TRUE(server.has_value()) << why;
  if (!server) return nullptr;
  static std::atomic<int> counter{0};
  auto pg = std::make_shared<ScratchPostgres>();
  pg->server = *server;
  pg->name = fmt::format("kope_test_{}_{}", getpid(), counter++);
  pg->url = with_database(*server, pg->name);
  auto admin = Db::open_postgres(*server);
  EXPECT_TRUE(admin.has_value()) << (admin ? "" : admin.error().message);
  if (!admin) return nullptr;
  // Two statements: PostgreSQL runs a multi-statement string as one transaction, and neither may
  // run inside one.
  auto dropped = (*admin)->exec(fmt::format("DROP DATABASE IF EXISTS {} WITH (FORCE)", pg->name));
  EXPECT_TRUE(dropped.has_value()) << (dropped ? "" : dropped.error().message);
  auto made = (*admin)->exec(fmt::format("CREATE DATABASE {}", pg->name));
  EXPECT_TRUE(made.has_value()) << (made ? "" : made.error().message);
  return pg;
}

struct TempStore {
  std::shared_ptr<ScratchPostgres> pg;  // first: dropped after the store closes
  util::TempDir dir;
  std::unique_ptr<Database> store;
  std::filesystem::path path;           // the file, or the PostgreSQL URL
};

// A fresh store of the current kind: a file `name` in a temp dir, or a fresh PostgreSQL
// database (one per call, so a test may hold several).
// `kind` overrides the current kind for this store alone.
inline TempStore temp_store(const std::string& name = "memory.db", std::optional<StoreKind> kind = std::nullopt) {
  auto dir = util::TempDir::create("kope-memory-test");
  EXPECT_TRUE(dir.has_value());
  std::shared_ptr<ScratchPostgres> pg;
  auto path = dir->path() / name;
  if (kind.value_or(current_store_kind()) == StoreKind::postgres) {
    pg = scratch_postgres();
    if (pg) path = pg->url;
  }
  auto store = open_store(path);
  // A store that did not open fails the test here (gtest reports the exception), not later
  // through a null pointer.
  if (!store) throw std::runtime_error("temp_store: " + store.error().message);
  return TempStore{std::move(pg), std::move(*dir), std::move(*store), path};
}

// Runs a suite's TEST_P tests once per store kind (KOPE_STORE_KINDS(Suite) instantiates it);
// the PostgreSQL instance skips, naming why, when the tests have no server.
class StoreKindTest : public ::testing::TestWithParam<StoreKind> {
 protected:
  void SetUp() override {
    current_store_kind() = GetParam();
    std::string why;
    if (GetParam() == StoreKind::postgres && !test_postgres_url(&why)) GTEST_SKIP() << why;
  }
  void TearDown() override { current_store_kind() = StoreKind::sqlite; }
};

inline std::string store_kind_name(const ::testing::TestParamInfo<StoreKind>& info) {
  return info.param == StoreKind::sqlite ? "SQLite" : "PostgreSQL";
}

#define KOPE_STORE_KINDS(Suite)                                                                    \
  INSTANTIATE_TEST_SUITE_P(Kinds, Suite, ::testing::Values(StoreKind::sqlite, StoreKind::postgres), \
                           store_kind_name)

inline SqliteStore& sqlite(Database& s) { return dynamic_cast<SqliteStore&>(s); }

}  // namespace kope::memory::testing
