// Crash safety: a writer process is killed with SIGKILL at random moments, many times; every
// case it acknowledged (printed after its commit returned) must be present exactly once, with
// the acknowledged id, and the database must pass the integrity check and kope's invariants.
#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <random>
#include <sstream>

#include "memory/test_util.h"
#include "util/subprocess.h"

namespace kope::memory {
namespace {

using namespace testing;

TEST(CrashSafety, KilledWritersLoseNothingAcknowledged) {
  auto dir = util::TempDir::create("kope-crash");
  ASSERT_TRUE(dir);
  auto path = dir->path() / "crash.db";
  double budget_s = 25;
  if (auto v = util::get_env("KOPE_CRASH_SECONDS")) budget_s = std::stod(*v);
  std::mt19937 rng(20240601);
  std::uniform_int_distribution<int> delay_ms(5, 400);

  std::map<std::string, int64_t> acked;
  int64_t next = 0;
  int runs = 0, killed = 0;
  auto start = std::chrono::steady_clock::now();
  while (std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() < budget_s) {
    util::RunOptions o;
    o.spawn.argv = {KOPE_CRASH_WRITER, path.string(), std::to_string(next)};
    o.timeout = std::chrono::milliseconds(delay_ms(rng));
    auto r = util::run(o);
    ASSERT_TRUE(r) << r.error().message;
    ++runs;
    if (r->timed_out) {
      ++killed;
      EXPECT_FALSE(r->status.exited);
      EXPECT_EQ(r->status.signal, SIGKILL);
    } else {
      FAIL() << "the writer stopped by itself: " << r->status.describe() << "\n" << r->err;
    }
    std::istringstream lines(r->out);
    std::string line;
    while (std::getline(lines, line)) {
      if (lines.eof()) break;  // a partial last line was cut by the kill
      std::istringstream words(line);
      std::string what, key;
      words >> what;
      if (what == "try") {
        int64_t i = 0;
        words >> i;
        next = std::max(next, i + 1);
      } else if (what == "ack") {
        int64_t id = 0;
        words >> key >> id;
        auto [it, inserted] = acked.emplace(key, id);
        EXPECT_EQ(it->second, id) << key << " was acknowledged with two ids";
      }
    }
  }
  std::printf("%d writer runs, %d killed, %zu cases acknowledged\n", runs, killed, acked.size());
  EXPECT_GT(killed, 20);
  EXPECT_GT(acked.size(), 50u);

  auto store = open_store(path);
  ASSERT_TRUE(store) << store.error().message;
  auto check = (*store)->check();
  ASSERT_TRUE(check) << check.error().message;
  EXPECT_TRUE(check->ok()) << check->problems.front();
  auto& db = sqlite(**store).db();
  auto count_stmt = db.prepare("SELECT count(*), min(id) FROM cases WHERE natural_key = ?");
  ASSERT_TRUE(count_stmt);
  for (const auto& [key, id] : acked) {
    count_stmt->reset().bind(1, key);
    auto row = count_stmt->step();
    ASSERT_TRUE(row && *row);
    EXPECT_EQ(count_stmt->int64(0), 1) << key;
    EXPECT_EQ(count_stmt->int64(1), id) << key;
  }
  auto stats = (*store)->stats();
  ASSERT_TRUE(stats);
  EXPECT_GE(stats->cases, static_cast<int64_t>(acked.size()));
}

}  // namespace
}  // namespace kope::memory
