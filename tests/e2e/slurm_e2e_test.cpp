// End-to-end: `kope run --executor slurm` on the real single-node Slurm that
// scripts/services/slurm.sh starts (scripts/test.sh does, and exports SLURM_CONF), against the
// fake model server, every array task a `kope run` sharing one memory. Skips when no Slurm runs.
//
// The memory the tasks share is the suite's parameter: an SQLite file (kope's SQLite store is
// safe for several processes), or a fresh database on the scratch PostgreSQL server that
// scripts/test.sh starts (KOPE_TEST_POSTGRES); that variant skips, naming why, without one.
#include <functional>
#include <map>
#include <memory>
#include <set>

#include "e2e_fixture.h"
#include "kope/memory.h"
#include "memory/test_util.h"

namespace kope {
namespace {

const fs::path k_double = k_e2e / "ops/elementwise/e2e_double";

// Where a test's memory lives: a fresh, empty memory for each (project directory, name), and
// why that kind cannot be used here ("" when it can).
struct MemoryKind {
  std::string name;
  std::function<std::string(const fs::path& project, const std::string& name)> location;
  std::function<std::string()> unavailable;
};

// gtest names a parameter by this (not by its bytes).
void PrintTo(const MemoryKind& k, std::ostream* os) { *os << k.name; }

std::string sqlite_memory(const fs::path& project, const std::string& name) { return (project / (name + ".db")).string(); }

// Scratch PostgreSQL databases made for this process's tests, dropped when it exits.
std::vector<std::shared_ptr<memory::testing::ScratchPostgres>>& postgres_databases() {
  static std::vector<std::shared_ptr<memory::testing::ScratchPostgres>> dbs;
  return dbs;
}

std::string postgres_memory(const fs::path&, const std::string&) {
  auto pg = memory::testing::scratch_postgres();
  if (!pg) return "postgresql://no-server-for-the-test/kope";  // scratch_postgres() failed the test already
  postgres_databases().push_back(pg);
  return pg->url;
}

std::string postgres_unavailable() {
  std::string why;
  return memory::testing::test_postgres_url(&why) ? "" : why;
}

// Runs a Slurm command; its output, or nullopt when it fails.
std::optional<std::string> slurm(const std::vector<std::string>& argv) {
  util::RunOptions ro;
  ro.spawn.argv = argv;
  ro.timeout = std::chrono::seconds(30);
  auto r = util::run(ro);
  if (!r || !r->status.success()) return std::nullopt;
  return r->out;
}

// Why Slurm cannot run the tests here, or "" when it can.
std::string slurm_unavailable() {
  const char* conf = std::getenv("SLURM_CONF");
  if (!conf || !*conf) return "SLURM_CONF is not set (scripts/test.sh starts Slurm with scripts/services/slurm.sh)";
  std::string state(util::trim(slurm({"sinfo", "--noheader", "--format=%t"}).value_or("")));
  if (state.empty()) return fmt::format("sinfo does not answer with SLURM_CONF={}", conf);
  // A node still ending the previous test's cancelled tasks ("comp") is usable in a moment.
  for (int t = 0; t < 600 && state.find("comp") != std::string::npos; ++t) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    state = util::trim(slurm({"sinfo", "--noheader", "--format=%t"}).value_or(""));
  }
  if (state.find("idle") == std::string::npos && state.find("mix") == std::string::npos &&
      state.find("alloc") == std::string::npos) {
    return "Slurm's node is not usable (sinfo says " + state + ")";
  }
  return "";
}

class SlurmE2E : public E2ETest, public ::testing::WithParamInterface<MemoryKind> {
 protected:
  void SetUp() override {
    E2ETest::SetUp();
    std::string why = slurm_unavailable();
    if (!why.empty()) GTEST_SKIP() << "no Slurm here: " << why;
    if (GetParam().unavailable) {
      if (std::string no = GetParam().unavailable(); !no.empty()) GTEST_SKIP() << no;
    }
    configure_model("fake-fixed-usage-model");  // token counts independent of the prompts' timings
  }

  // The memory called `name` in this test, made on first use.
  std::string memory(const std::string& name) {
    auto [it, fresh] = m_memories.try_emplace(name);
    if (fresh) it->second = GetParam().location(project(), name);
    return it->second;
  }

  // `kope run` of the three test operators, `iterations` each, in `dir` with memory `mem`.
  std::vector<std::string> three_ops(const fs::path& dir, const std::string& mem, int iterations,
                                     std::vector<std::string> extra = {}) {
    extra.insert(extra.end(), {"--quiet", "--suite", (k_e2e / "ops").string()});
    return run_args(dir, {k_scale.string(), k_softmax.string(), k_double.string()}, iterations, extra, fs::path(mem));
  }

  static json slurm_plan(const fs::path& dir) { return read_json(dir / "slurm.json"); }

  // The states of array `job`'s tasks as squeue lists them ("12_0|COMPLETED" lines).
  static std::string queue_of(const std::string& job) {
    return slurm({"squeue", "--noheader", "--array", "--states=all", "--jobs=" + job, "--format=%i|%T"}).value_or("");
  }

  // Every attempt of every task's run is in memory `mem` once: as many cases as attempts, each
  // found under its natural key.
  static void expect_every_attempt_once(const fs::path& dir, const std::string& mem) {
    auto store = memory::open_store(mem);
    ASSERT_TRUE(store) << store.error().message;
    int64_t attempts = 0;
    for (int i = 0; i < 3; ++i) {
      json r = read_json(dir / "tasks" / std::to_string(i) / "results.json");
      for (const auto& op : r["ops"]) {
        int n = op["attempts"].get<int>();
        attempts += n;
        for (int k = 1; k <= n; ++k) {
          std::string key = fmt::format("{}/{}/{}", r["run_id"].get<std::string>(), op["name"].get<std::string>(), k);
          auto c = (*store)->find_case(key);
          EXPECT_TRUE(c && *c) << key << " is not in memory";
        }
      }
    }
    auto stats = (*store)->stats();
    ASSERT_TRUE(stats);
    EXPECT_EQ(stats->cases, attempts) << "a case is missing or recorded twice";
  }

  // Spawns `args` and waits until task `index` of the run in `dir` has logged an event of
  // `type`; false when the coordinator ended first.
  bool spawn_until_task_event(util::Process& p, const fs::path& dir, int index, const std::string& type) {
    for (int t = 0; t < 6000; ++t) {  // 10 minutes: the tasks before it run first (exclusive nodes)
      if (!events(dir / "tasks" / std::to_string(index), type).empty()) return true;
      if (p.try_wait()) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return false;
  }

  std::map<std::string, std::string> m_memories;

  static std::string read_stderr(util::Process& p) {
    std::string err;
    char buf[4096];
    for (ssize_t n; (n = ::read(p.stderr_fd(), buf, sizeof buf)) > 0;) err.append(buf, static_cast<size_t>(n));
    return err;
  }
};

// Three operators through Slurm: three array tasks, every attempt in the shared memory once,
// and the merged results.json equal, figure for figure (scripts/compare_results.py: all but the
// measured values), to the same run done locally.
TEST_P(SlurmE2E, ThreeOperatorsMatchTheSameRunDoneLocally) {
  // One attempt per operator: no incumbent is ever compared with a faster candidate, a decision
  // timing noise on a loaded machine can flip between any two runs, local or not.
  fs::path local = project() / "local", slurm = project() / "slurm";
  Output l = kope(three_ops(local, memory("local"), 1), 900);
  ASSERT_EQ(l.code, 0) << l.err;
  Output s = kope(three_ops(slurm, memory("slurm"), 1, {"--executor", "slurm"}), 900);
  ASSERT_EQ(s.code, 0) << s.err;

  json plan = slurm_plan(slurm);
  ASSERT_EQ(plan["tasks"].size(), 3u);
  ASSERT_EQ(plan["submissions"].size(), 1u);
  std::string job = plan["submissions"][0]["job_id"];
  for (int i = 0; i < 3; ++i) {
    SCOPED_TRACE(i);
    fs::path task = slurm / "tasks" / std::to_string(i);
    EXPECT_TRUE(read_json(task / "results.json")["complete"].get<bool>());
    EXPECT_TRUE(fs::exists(task / fmt::format("slurm-{}.log", job)));
    EXPECT_EQ(plan["tasks"][i]["state"], "COMPLETED");
    EXPECT_EQ(plan["tasks"][i]["ops"].size(), 1u);
  }
  json merged = read_json(slurm / "results.json");
  EXPECT_TRUE(merged["complete"].get<bool>());
  EXPECT_EQ(merged["ops"].size(), 3u);
  EXPECT_TRUE(fs::exists(slurm / "report.html"));
  expect_every_attempt_once(slurm, memory("slurm"));

  util::RunOptions ro;
  ro.spawn.argv = {"python3", (fs::path(KOPE_SOURCE_DIR) / "scripts/compare_results.py").string(),
                   (local / "results.json").string(), (slurm / "results.json").string()};
  auto cmp = util::run(ro);
  ASSERT_TRUE(cmp);
  EXPECT_TRUE(cmp->status.success()) << cmp->out << cmp->err;
  EXPECT_NE(cmp->out.find("0 figure(s) differ"), std::string::npos) << cmp->out;

  // `kope report` reads the Slurm run like any other: its operators come from the tasks.
  Output rep = kope({"report", slurm.string(), "--json"});
  ASSERT_EQ(rep.code, 0) << rep.err;
  EXPECT_NE(rep.out.find("e2e_softmax"), std::string::npos);
}

// scancel of one array task: the coordinator reports it with its Slurm state and the tail of its
// log, and --resume submits only that task again, which resumes its run: no case twice.
TEST_P(SlurmE2E, ACancelledTaskIsReportedAndResumeFinishesItAlone) {
  fs::path dir = project() / "run";
  std::string mem = memory("shared");
  util::Process p = spawn_kope(three_ops(dir, mem, 4, {"--executor", "slurm"}));
  bool started = spawn_until_task_event(p, dir, 1, "attempt");
  std::string job;
  if (started) {
    job = slurm_plan(dir)["submissions"][0]["job_id"];
    ASSERT_TRUE(slurm({"scancel", job + "_1"})) << "scancel " << job << "_1 failed";
  }
  ASSERT_TRUE(started) << "task 1 did not start before the run ended";
  util::ExitStatus st = p.wait();
  std::string err = read_stderr(p);
  EXPECT_TRUE(st.exited && st.code == 1) << st.describe() << "\n" << err;
  EXPECT_NE(err.find(fmt::format("task 1 [e2e_softmax] did not finish: Slurm job {}_1 CANCELLED", job)), std::string::npos)
      << err;
  EXPECT_NE(err.find("the last lines of " + (dir / "tasks/1").string() + "/slurm-" + job + ".log"), std::string::npos) << err;
  EXPECT_NE(err.find("kope run --resume " + dir.string()), std::string::npos) << err;
  EXPECT_FALSE(read_json(dir / "results.json")["complete"].get<bool>());

  Output resumed = kope({"run", "--resume", dir.string(), "--quiet"}, 900);
  ASSERT_EQ(resumed.code, 0) << resumed.err;
  json plan = slurm_plan(dir);
  ASSERT_EQ(plan["submissions"].size(), 2u);
  EXPECT_EQ(plan["submissions"][1]["indices"], json::array({1}));
  for (int i : {0, 2}) {
    EXPECT_EQ(events(dir / "tasks" / std::to_string(i), "run_started").size(), 1u) << i;
    EXPECT_TRUE(events(dir / "tasks" / std::to_string(i), "run_resumed").empty()) << i << " ran again";
  }
  EXPECT_EQ(events(dir / "tasks/1", "run_resumed").size(), 1u);
  json merged = read_json(dir / "results.json");
  EXPECT_TRUE(merged["complete"].get<bool>());
  for (const auto& op : merged["ops"]) EXPECT_EQ(op["attempts"], 4) << op["name"];
  expect_every_attempt_once(dir, mem);
}

// Ctrl-C on the coordinator cancels the array: it exits 130 once no task of it is left pending
// or running, and says how to resume. Task 0 has far more attempts than it can make before the
// cancel reaches it (with two, a fast machine finished it first and it was rightly reported done).
TEST_P(SlurmE2E, CtrlCOnTheCoordinatorCancelsTheArray) {
  fs::path dir = project() / "interrupted";
  util::Process p = spawn_kope(three_ops(dir, memory("shared"), 40, {"--executor", "slurm"}));
  bool started = spawn_until_task_event(p, dir, 0, "op_started");
  if (started) p.kill_group(SIGINT);
  ASSERT_TRUE(started) << "task 0 did not start before the run ended";
  util::ExitStatus st = p.wait();
  std::string err = read_stderr(p);
  EXPECT_TRUE(st.exited && st.code == 130) << st.describe() << "\n" << err;
  std::string job = slurm_plan(dir)["submissions"][0]["job_id"];
  EXPECT_NE(err.find(fmt::format("Slurm job {}_0 CANCELLED", job)), std::string::npos) << err;
  EXPECT_NE(err.find("kope run --resume " + dir.string()), std::string::npos) << err;
  std::string queue = queue_of(job);
  EXPECT_NE(queue.find("CANCELLED"), std::string::npos) << queue;
  for (const char* active : {"PENDING", "RUNNING", "COMPLETING"}) EXPECT_EQ(queue.find(active), std::string::npos) << queue;
}

INSTANTIATE_TEST_SUITE_P(Memory, SlurmE2E,
                         ::testing::Values(MemoryKind{"SQLite", sqlite_memory, nullptr},
                                           MemoryKind{"PostgreSQL", postgres_memory, postgres_unavailable}),
                         [](const ::testing::TestParamInfo<MemoryKind>& p) { return p.param.name; });

}  // namespace
}  // namespace kope
