// The starter experience kope ships (docs/design.md §12), driven as a new user meets it: a clean
// data directory, no model, `kope run` on two starter ops imports the starter once, replays
// it, solves both and writes report.html; the export imports cleanly, passes `kope memory
// check`, carries its provenance, and a sample of its kernels (each op's fastest one this CPU
// runs) is `correct` by `kope eval` here; bench/starter_verify.sh judges every kernel.
//
// The file under test is the shipped one (share/kope/starter/memory.json.zst) when it exists,
// else the dev fixture tests/starter/dev_starter.json.zst (reference kernels recorded by
// `kope run` against tests/e2e/fake_llm_server.py --echo-reference; see tests/starter/README.md).
#include <atomic>
#include <chrono>
#include <thread>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <set>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "agent/replay.h"
#include "hw/isa.h"
#include "memory/starter.h"
#include "util/fs.h"
#include "util/hash.h"
#include "util/strings.h"
#include "util/subprocess.h"

extern char** environ;

namespace kope {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const fs::path k_source = KOPE_SOURCE_DIR;

fs::path starter_under_test() {
  fs::path shipped = k_source / "share/kope/starter/memory.json.zst";
  if (fs::exists(shipped)) return shipped;
  return k_source / "tests/starter/dev_starter.json.zst";
}

struct Output {
  int code = -1;
  std::string out, err;
};

// A clean machine for kope: its own share directory (the suite, the prompts and the starter file,
// laid out as an installed tree), data directory and config home, no model in the environment.
class Starter : public ::testing::Test {
 protected:
  void SetUp() override {
    auto d = util::TempDir::create("kope-starter");
    ASSERT_TRUE(d) << d.error().message;
    m_dir.emplace(std::move(*d));
    for (const char* sub : {"share/starter", "data", "xdg", "project"}) fs::create_directories(path() / sub);
    fs::create_directory_symlink(k_source / "ops", path() / "share/ops");
    fs::create_directory_symlink(k_source / "prompts", path() / "share/prompts");
    fs::copy_file(starter_under_test(), path() / "share/starter/memory.json.zst");
  }

  fs::path path() const { return m_dir->path(); }
  fs::path memory() const { return path() / "data/memory.db"; }

  Output kope(const std::vector<std::string>& args, int timeout_s = 600) {
    util::RunOptions ro;
    ro.spawn.argv = {KOPE_EXE};
    ro.spawn.argv.insert(ro.spawn.argv.end(), args.begin(), args.end());
    ro.spawn.cwd = path() / "project";
    std::vector<std::string> env;
    for (char** e = environ; *e; ++e) {
      std::string kv(*e);
      bool drop = false;
      for (const char* name : {"KOPE_MODEL=", "KOPE_PROFILE=", "OPENAI_BASE_URL=", "OPENAI_API_KEY=", "KOPE_MEMORY=",
                               "XDG_CONFIG_HOME=", "KOPE_PROVIDER=", "KOPE_DATA_DIR=", "KOPE_SHARE_DIR=",
                               "ANTHROPIC_API_KEY=", "ANTHROPIC_BASE_URL="}) {
        drop = drop || kv.starts_with(name);
      }
      if (!drop) env.push_back(kv);
    }
    env.push_back("XDG_CONFIG_HOME=" + (path() / "xdg").string());
    env.push_back("KOPE_DATA_DIR=" + (path() / "data").string());
    env.push_back("KOPE_SHARE_DIR=" + (path() / "share").string());
    ro.spawn.env = env;
    ro.timeout = std::chrono::seconds(timeout_s);
    ro.stdout_cap = 16 << 20;
    auto r = util::run(ro);
    Output o;
    if (!r) {
      ADD_FAILURE() << r.error().message;
      return o;
    }
    o.code = r->status.exited ? r->status.code : 128 + r->status.signal;
    o.out = r->out;
    o.err = r->err;
    return o;
  }

  static json parse(const std::string& text) {
    json j = json::parse(text, nullptr, false);
    EXPECT_FALSE(j.is_discarded()) << text.substr(0, 400);
    return j;
  }

  std::optional<util::TempDir> m_dir;
};

json load_export() {
  auto text = memory::read_export_file(starter_under_test());
  EXPECT_TRUE(text) << text.error().message;
  return text ? json::parse(*text) : json();
}

// Two ops of the starter for the first-use test: cheap ones, far from the roofline (a kernel near
// it can be rejected as faster than the hardware allows when a loaded machine measured a low
// bandwidth), when the starter has them.
std::vector<std::string> two_starter_ops(const json& doc) {
  std::set<std::string> solved;
  for (const auto& c : doc["cases"]) {
    if (c.value("verdict", "") == "correct" && c["toolchain"].value("backend", "cpu") == "cpu") {
      solved.insert(c["task"]["op"].get<std::string>());
    }
  }
  std::vector<std::string> out;
  for (const char* cheap : {"softmax", "transpose2d", "layernorm", "cumsum", "log_softmax", "sum_rows"}) {
    if (solved.contains(cheap) && out.size() < 2) out.emplace_back(cheap);
  }
  for (const auto& op : solved) {
    if (out.size() < 2 && std::find(out.begin(), out.end(), op) == out.end()) out.push_back(op);
  }
  return out;
}

fs::path only_run_dir(const fs::path& runs, const std::set<fs::path>& except = {}) {
  std::vector<fs::path> found;
  for (const auto& e : fs::directory_iterator(runs)) {
    if (!except.contains(e.path())) found.push_back(e.path());
  }
  EXPECT_EQ(found.size(), 1u);
  return found.empty() ? fs::path() : found.front();
}

// In a replay run's event log: every attempt replays a kernel of its own op (never another op's
// with the same signature), and an op's attempts stop at its first correct one that is at least
// 0.9x the library's speed and faster than the reference here (design.md §9).
void expect_replays_own_kernels_until_one_is_correct(const fs::path& run_dir) {
  auto text = util::read_file(run_dir / "events.jsonl");
  ASSERT_TRUE(text) << text.error().message;
  std::map<std::string, std::vector<json>> attempts;
  for (const auto& line : util::split(*text, '\n')) {
    json e = json::parse(line, nullptr, false);
    if (e.is_object() && e.value("type", "") == "attempt") attempts[e["op"].get<std::string>()].push_back(e["attempt"]);
  }
  for (const auto& [op, list] : attempts) {
    for (size_t i = 0; i < list.size(); ++i) {
      std::string what = list[i].value("optimisation", "");
      EXPECT_NE(what.find("(" + op + " on "), std::string::npos) << op << " replayed another op's kernel: " << what;
      bool correct = list[i].value("verdict", "") == "correct";
      const json& lib = list[i]["speedup_vs_library"];
      const json& ref = list[i]["speedup_vs_reference"];
      bool trails = (lib.is_number() && lib.get<double>() < agent::k_replay_library_floor) ||
                    (ref.is_number() && ref.get<double>() < 1.0);
      if (i + 1 < list.size()) {
        EXPECT_TRUE(!correct || trails) << op << ": attempt " << i + 1 << " was correct at " << lib.dump()
                                        << "x the library and " << ref.dump() << "x the reference, yet replay went on";
      }
    }
  }
}

TEST_F(Starter, FirstRunWithoutAModelImportsOnceReplaysSolvesAndReports) {
  json doc = load_export();
  std::vector<std::string> ops = two_starter_ops(doc);
  ASSERT_EQ(ops.size(), 2u) << "the starter under test has fewer than two solved CPU ops";
  std::vector<std::string> args = {"run", "--ops", util::join(ops, ","), "--seed", "7", "--eval-ci", "0.2",
                                   "--eval-max-seconds", "0.5"};

  Output first = kope(args);
  ASSERT_EQ(first.code, 0) << first.err << first.out;
  EXPECT_NE(first.err.find("no model is configured"), std::string::npos) << first.err;
  EXPECT_NE(first.err.find("imported the starter experience"), std::string::npos) << first.err;
  EXPECT_NE(first.err.find("re-verified on every case"), std::string::npos) << first.err;
  EXPECT_NE(first.out.find("configure a model"), std::string::npos) << first.out;
  fs::path run1 = only_run_dir(path() / "data/runs");
  json r1 = parse(*util::read_file(run1 / "results.json"));
  EXPECT_EQ(r1["policy"], "replay");
  for (const auto& op : r1["ops"]) {
    EXPECT_TRUE(op["solved"].get<bool>()) << op.dump();
    EXPECT_EQ(op["best_policy"], "replay");
    EXPECT_EQ(op["tokens_prompt"], 0);
    EXPECT_TRUE(op["best_speedup_vs_reference"].is_number()) << op.dump();
  }
  // The report and the one-screen table.
  EXPECT_TRUE(fs::exists(run1 / "report.html"));
  EXPECT_GT(fs::file_size(run1 / "report.html"), 1000u);
  EXPECT_NE(first.out.find("report: " + (run1 / "report.html").string()), std::string::npos) << first.out;
  EXPECT_NE(first.out.find("kernel from"), std::string::npos) << first.out;
  for (const auto& op : ops) EXPECT_NE(first.out.find(op), std::string::npos) << first.out;
  EXPECT_NE(first.out.find("starter (re-verified here)"), std::string::npos) << first.out;

  Output stats1 = kope({"memory", "stats", "--json", "--memory", memory().string()});
  ASSERT_EQ(stats1.code, 0) << stats1.err;
  json s1 = parse(stats1.out);
  ASSERT_EQ(s1["imports"].size(), 1u) << s1.dump();
  EXPECT_TRUE(s1["imports"][0]["foreign"].get<bool>());
  EXPECT_NE(s1["imports"][0]["source"].get<std::string>().find("starter"), std::string::npos);
  EXPECT_EQ(s1["imports"][0]["provenance"], doc["provenance"]);
  EXPECT_GT(s1["foreign_cases"].get<int64_t>(), 0);

  // The import says truly where the starter was recorded: on this machine's target or not.
  json config1 = parse(*util::read_file(run1 / "config.json"));
  std::string here = config1["target"].get<std::string>();
  std::set<std::string> recorded = doc["provenance"]["targets"].get<std::set<std::string>>();
  if (recorded == std::set<std::string>{here}) {
    EXPECT_NE(first.err.find("recorded on the same target as this machine (" + here + ")"), std::string::npos) << first.err;
    EXPECT_EQ(first.err.find("other hardware"), std::string::npos) << first.err;
  } else if (!recorded.contains(here)) {
    EXPECT_NE(first.err.find("recorded on other hardware ("), std::string::npos) << first.err;
  }
  EXPECT_NE(first.err.find("counts as foreign experience until re-timed here"), std::string::npos) << first.err;

  // Every replayed attempt began from a starter case of its own op and is a native record of
  // this machine; an op's replay ends at its first kernel correct here.
  int64_t attempts1 = 0;
  for (const auto& op : r1["ops"]) attempts1 += op["attempts"].get<int64_t>();
  expect_replays_own_kernels_until_one_is_correct(run1);

  // A second run imports nothing again and replays what is now native experience.
  Output second = kope(args);
  ASSERT_EQ(second.code, 0) << second.err << second.out;
  EXPECT_EQ(second.err.find("imported the starter experience"), std::string::npos) << second.err;
  fs::path run2 = only_run_dir(path() / "data/runs", {run1});
  json r2 = parse(*util::read_file(run2 / "results.json"));
  int64_t attempts2 = 0;
  for (const auto& op : r2["ops"]) {
    EXPECT_TRUE(op["solved"].get<bool>()) << op.dump();
    attempts2 += op["attempts"].get<int64_t>();
  }
  EXPECT_TRUE(fs::exists(run2 / "report.html"));
  expect_replays_own_kernels_until_one_is_correct(run2);
  // The kernels now replayed are this machine's records, re-verifications of starter kernels.
  EXPECT_NE(second.out.find("starter (re-verified here)"), std::string::npos) << second.out;
  json s2 = parse(kope({"memory", "stats", "--json", "--memory", memory().string()}).out);
  EXPECT_EQ(s2["imports"].size(), 1u);
  EXPECT_EQ(s2["foreign_cases"], s1["foreign_cases"]);
  EXPECT_EQ(s2["cases"].get<int64_t>(), s1["cases"].get<int64_t>() + attempts2);
  EXPECT_EQ(s1["cases"].get<int64_t>() - s1["foreign_cases"].get<int64_t>(), attempts1);

  Output check = kope({"memory", "check", "--memory", memory().string()});
  EXPECT_EQ(check.code, 0) << check.out << check.err;

  // --no-starter on a fresh memory: nothing imported, nothing to replay.
  fs::path fresh = path() / "fresh.db";
  Output none = kope({"run", "--ops", ops[0], "--memory", fresh.string(), "--no-starter", "--seed", "7"});
  ASSERT_EQ(none.code, 0) << none.err;
  EXPECT_EQ(none.err.find("imported the starter experience"), std::string::npos) << none.err;
  EXPECT_NE(none.out.find("nothing to replay"), std::string::npos) << none.out;
}

TEST_F(Starter, ExportCarriesProvenanceImportsCleanlyAndPassesCheck) {
  fs::path file = path() / "share/starter/memory.json.zst";
  Output described = kope({"memory", "stats", file.string(), "--json"});
  ASSERT_EQ(described.code, 0) << described.err;
  json d = parse(described.out);
  ASSERT_TRUE(d["provenance"].is_object()) << d.dump();
  for (const char* key : {"kope_version", "date", "model", "targets", "runs"}) {
    EXPECT_TRUE(d["provenance"].contains(key)) << key << " missing from the provenance: " << d["provenance"].dump();
  }
  EXPECT_GE(d["solved_ops"].size(), 2u);
  Output human = kope({"memory", "stats", file.string()});
  EXPECT_NE(human.out.find("provenance  kope "), std::string::npos) << human.out;

  fs::path db = path() / "imported.db";
  Output imp = kope({"memory", "import", file.string(), "--foreign", "--memory", db.string(), "--json"});
  ASSERT_EQ(imp.code, 0) << imp.err;
  json ij = parse(imp.out);
  EXPECT_EQ(ij["cases_added"], d["cases"]);
  EXPECT_EQ(ij["provenance"], d["provenance"]);
  Output again = kope({"memory", "import", file.string(), "--foreign", "--memory", db.string(), "--json"});
  ASSERT_EQ(again.code, 0) << again.err;
  EXPECT_EQ(parse(again.out)["cases_added"], 0);  // idempotent
  Output check = kope({"memory", "check", "--memory", db.string()});
  EXPECT_EQ(check.code, 0) << check.out << check.err;
  Output stats = kope({"memory", "stats", "--memory", db.string()});
  EXPECT_NE(stats.out.find("provenance: kope "), std::string::npos) << stats.out;
}

// A sample of the starter's kernels, judged by `kope eval` on their ops: per op, its fastest
// correct kernel whose recorded target this CPU runs (the one replay tries first here), compiled
// for the ISA level it was recorded at; verification of every case (two at a time), timing for
// the first two. bench/starter_verify.sh judges every kernel the same way.
TEST_F(Starter, ASampleOfItsKernelsIsCorrectHere) {
  json doc = load_export();
  Target here = host_cpu_target();
  struct Kernel {
    std::string op, backend, key, isa;
    double speedup = 0;
    fs::path file;
  };
  std::map<std::string, Kernel> best;  // by op
  int not_here = 0, other_backend = 0;
  std::set<std::string> distinct;
  for (const auto& c : doc["cases"]) {
    if (c.value("verdict", "") != "correct" || c.value("quarantined", false)) continue;
    std::string backend = c["toolchain"].value("backend", "cpu");
    if (backend.empty()) backend = "cpu";
    std::string op = c["task"]["op"].get<std::string>();
    std::string code = c.value("code", "");
    if (!distinct.insert(op + "\n" + util::sha256_hex(code)).second) continue;
    if (backend != "cpu") {  // an OpenCL or CUDA starter is judged where that backend runs
      ++other_backend;
      continue;
    }
    std::string recorded = c["hardware"].value("target", "");
    auto built_for = Target::parse(recorded);
    if (!built_for || !target_runs_on(*built_for, here)) {  // an AVX-512 kernel on an AVX2 CPU
      ++not_here;
      continue;
    }
    // A kernel recorded for exactly the x86-64-v3 target is compiled for that level again.
    std::string isa = "native";
    if (auto v3 = target_at_level(here, IsaLevel::x86_64_v3); v3 && v3->str() == recorded) isa = "x86-64-v3";
    double speedup = c.value("speedup_vs_reference", json()).is_number() ? c["speedup_vs_reference"].get<double>() : 0;
    auto it = best.find(op);
    if (it != best.end() && it->second.speedup >= speedup) continue;
    const char* ext = ".cpp";
    fs::path f = path() / fmt::format("k-{}{}", op, ext);
    ASSERT_TRUE(util::write_file_atomic(f, code));
    best[op] = Kernel{op, backend, c.value("natural_key", ""), isa, speedup, f};
  }
  ASSERT_FALSE(best.empty()) << "no kernel of the starter runs on this CPU (" << here.str() << ")";
  std::vector<const Kernel*> todo;
  for (const auto& [op, k] : best) todo.push_back(&k);
  // An op of the built-in suite by name; one of ops-kernelbench (the starter holds both) by its folder.
  auto op_arg = [](const std::string& op) -> std::string {
    std::error_code ec;
    for (const auto& category : fs::directory_iterator(k_source / "ops-kernelbench", ec)) {
      if (fs::exists(category.path() / op / "op.toml")) return (category.path() / op).string();
    }
    return op;
  };
  auto eval_args = [&](const Kernel& k, bool timed) {
    std::vector<std::string> a = {KOPE_EXE, "eval", k.file.string(), "--op", op_arg(k.op), "--backend", k.backend, "--isa", k.isa, "--json"};
    if (timed) {
      a.insert(a.end(), {"--max-seconds", "0.5", "--target-ci", "0.2"});
    } else {
      a.push_back("--no-time");
    }
    return a;
  };
  auto judge = [&](const Kernel& k, util::RunResult r) {
    json j = json::parse(r.out, nullptr, false);
    EXPECT_EQ(r.status.exited ? r.status.code : -1, 0) << k.key << " (" << k.op << "): " << r.err.substr(0, 800);
    EXPECT_TRUE(j.is_object() && j.value("verdict", "") == "correct")
        << k.key << " (" << k.op << ", --isa " << k.isa << ") is not correct here: " << r.out.substr(0, 800);
  };
  // Two evaluations at a time (verification only: no timing lock held), judged afterwards.
  std::vector<Result<util::RunResult>> results(todo.size(), fail(ErrorKind::internal, "not run"));
  std::atomic<size_t> next{0};
  auto worker = [&] {
    for (size_t i; (i = next.fetch_add(1)) < todo.size();) {
      util::RunOptions ro;
      ro.spawn.argv = eval_args(*todo[i], false);
      ro.timeout = std::chrono::seconds(300);
      results[i] = util::run(ro);
    }
  };
  std::thread a(worker), b(worker);
  a.join();
  b.join();
  for (size_t i = 0; i < todo.size(); ++i) {
    ASSERT_TRUE(results[i]) << results[i].error().message;
    judge(*todo[i], std::move(*results[i]));
  }
  for (size_t i = 0; i < todo.size() && i < 2; ++i) {
    util::RunOptions ro;
    ro.spawn.argv = eval_args(*todo[i], true);
    ro.timeout = std::chrono::seconds(300);
    auto r = util::run(ro);
    ASSERT_TRUE(r) << r.error().message;
    judge(*todo[i], std::move(*r));
  }
  std::printf("[starter] %zu kernels judged, one per op, of %zu distinct correct kernels in %s (%d recorded for a "
              "target this CPU does not run, %d of other backends: skipped)\n",
              todo.size(), distinct.size(), starter_under_test().string().c_str(), not_here, other_backend);
}

}  // namespace
}  // namespace kope
