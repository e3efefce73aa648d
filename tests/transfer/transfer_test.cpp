// `kope transfer --from cpu --to opencl` end to end against the fake model server of tests/e2e
// (per-backend fixture answers): the source run and the four settings run for real (sandboxed
// C++ and OpenCL evaluation, SQLite memory), and the prompts the server received show that items
// from the foreign target (the CPU) reach the OpenCL prompts only in the feasibility section,
// never as speed evidence from "this machine". Skips where the OpenCL backend cannot run.
#include <signal.h>

#include <chrono>
#include <thread>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "kope/eval.h"
#include "kope/hw.h"
#include "util/fs.h"
#include "util/strings.h"
#include "util/subprocess.h"

extern char** environ;

namespace kope {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const fs::path k_src = KOPE_SOURCE_DIR;

// The section of a prompt that starts at `heading` and runs to the next "## " heading.
std::string section(const std::string& text, const std::string& heading) {
  size_t a = text.find(heading);
  if (a == std::string::npos) return "";
  size_t b = text.find("\n## ", a + heading.size());
  return text.substr(a, b == std::string::npos ? std::string::npos : b - a);
}

TEST(Transfer, FourSettingsAndForeignItemsOnlyAsFeasibility) {
  auto backends = eval::list_backends(describe_host());
  if (!backends[1].usable) GTEST_SKIP() << "the OpenCL backend cannot run here: " << backends[1].detail;
  auto dir = util::TempDir::create("kope-transfer-test");
  ASSERT_TRUE(dir);
  fs::path project = dir->path();
  fs::create_directories(project / "xdg");

  // The fake model server, with this test's fixtures (C++ answers and OpenCL answers).
  util::SpawnOptions so;
  so.argv = {"python3", (k_src / "tests/e2e/fake_llm_server.py").string(), "--fixtures", (k_src / "tests/transfer/fixtures").string(),
             "--port-file", (project / "port").string(), "--log", (project / "requests.jsonl").string()};
  so.capture_stdout = false;
  so.capture_stderr = false;
  auto server = util::Process::spawn(so);
  ASSERT_TRUE(server) << server.error().message;
  for (int i = 0; i < 200 && !fs::exists(project / "port"); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  auto port = util::read_file(project / "port");
  ASSERT_TRUE(port) << "the fake model server did not start";
  ASSERT_TRUE(util::write_file_atomic(project / "kope.toml",
                                      fmt::format("[llm.fake]\nbase_url = \"http://127.0.0.1:{}/v1\"\nmodel = \"fake-kernel-model\"\n"
                                                  "api_key_env = \"\"\ncontext_window = 32000\nmax_output_tokens = 2000\nmax_retries = 1\n",
                                                  *port)));

  util::RunOptions ro;
  ro.spawn.argv = {KOPE_EXE, "transfer", "--from", "cpu", "--to", "opencl", "--ops", "e2e_scale", "--suite",
                   (k_src / "tests/e2e/ops").string(), "--iterations", "2", "--llm", "fake", "--dir", (project / "exp").string(),
                   "--json",
                   // The paper's setting: each setting may use the same op's experience (the
                   // default --holdout would keep e2e_scale's earlier runs out of every prompt).
                   "--no-holdout"};
  for (const char* a : {"--eval-ci", "0.2", "--eval-max-seconds", "0.5", "--patience", "0", "--roofline-target", "0", "--no-reflect"}) {
    ro.spawn.argv.push_back(std::string("--run-arg=") + a);
  }
  ro.spawn.cwd = project;
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e) {
    std::string kv(*e);
    for (const char* drop : {"KOPE_MODEL=", "KOPE_PROFILE=", "OPENAI_BASE_URL=", "OPENAI_API_KEY=", "KOPE_MEMORY=", "XDG_CONFIG_HOME=",
                             "KOPE_PROVIDER="}) {
      if (kv.starts_with(drop)) kv.clear();
    }
    if (!kv.empty()) env.push_back(kv);
  }
  env.push_back("XDG_CONFIG_HOME=" + (project / "xdg").string());
  ro.spawn.env = env;
  ro.timeout = std::chrono::seconds(600);
  auto r = util::run(ro);
  struct StopServer {
    util::Process& p;
    ~StopServer() {
      p.kill_group(SIGTERM);
      p.wait();
    }
  } stop{*server};
  ASSERT_TRUE(r);
  ASSERT_TRUE(r->status.success()) << r->out << r->err;

  // The summary: four settings, each its own run directory, with figures.
  json t = json::parse(r->out);
  ASSERT_EQ(t["settings"].size(), 4u);
  std::vector<std::string> names;
  for (const auto& s : t["settings"]) {
    names.push_back(s["setting"].get<std::string>());
    EXPECT_TRUE(fs::exists(fs::path(s["run_dir"].get<std::string>()) / "results.json")) << s.dump();
    EXPECT_TRUE(s["pass_rate"].is_number()) << s.dump();
    EXPECT_EQ(s["ops"], 1);
  }
  EXPECT_EQ(names, (std::vector<std::string>{"cold", "foreign", "native", "both"}));
  EXPECT_TRUE(fs::exists(project / "exp" / "transfer.json"));

  // The prompts. Requests come in order: the CPU source run, then cold, foreign, native, both.
  auto log = util::read_file(project / "requests.jsonl");
  ASSERT_TRUE(log);
  std::vector<std::string> cpu_prompts, opencl_prompts;
  for (const auto& line : util::split(*log, '\n')) {
    if (util::trim(line).empty()) continue;
    json q = json::parse(line);
    if (q["purpose"] != "kernel") continue;
    std::string system, user;
    for (const auto& m : q["messages"]) {
      (m["role"] == "system" ? system : user) += m["content"].get<std::string>();
    }
    (system.find("OpenCL C") != std::string::npos ? opencl_prompts : cpu_prompts).push_back(user);
  }
  ASSERT_EQ(cpu_prompts.size(), 2u);
  ASSERT_EQ(opencl_prompts.size(), 8u);
  const std::string feasibility = "## Feasibility evidence from other hardware";
  std::string cpu_target = Target::host().str();
  for (size_t i = 0; i < opencl_prompts.size(); ++i) {
    const std::string& p = opencl_prompts[i];
    std::string setting = names[i / 2];
    // Never speed evidence: no item of the CPU target in the "this machine" sections.
    for (const char* heading : {"## Experience from this machine: kernels", "## Experience from this machine: earlier",
                                "## Lessons learned on this machine"}) {
      EXPECT_EQ(section(p, heading).find("(recorded on " + cpu_target), std::string::npos) << setting << " attempt " << i % 2 + 1 << ":\n" << p;
    }
    bool has_foreign = section(p, feasibility).find("(recorded on " + cpu_target) != std::string::npos;
    if (setting == "cold" || setting == "native") {
      EXPECT_FALSE(has_foreign) << setting << ": no foreign memory, yet:\n" << p;
    } else if (i % 2 == 0 && setting == "foreign") {
      // The first attempt of foreign: the CPU's e2e_scale kernels are the evidence there is.
      EXPECT_TRUE(has_foreign) << setting << ": the CPU's items should be feasibility evidence:\n" << p;
    } else if (i % 2 == 0) {
      // both: this machine's own attempts of the op come first; foreign experience is shown only
      // for a kind no native item covers (docs/design.md §5, forms), so never instead of them.
      EXPECT_NE(p.find("## Experience from this machine"), std::string::npos) << setting << ":\n" << p;
    }
  }
  // The native setting's prompts show the cold run's OpenCL attempts as this machine's experience.
  EXPECT_NE(opencl_prompts[4].find("## Experience from this machine"), std::string::npos) << opencl_prompts[4];

  // Given memories: no source run, and the settings start from them.
  util::RunOptions again = ro;
  for (auto& a : again.spawn.argv) {
    if (a == (project / "exp").string()) a = (project / "exp2").string();
  }
  again.spawn.argv.insert(again.spawn.argv.end(), {"--foreign-memory", (project / "exp/memory/cpu.db").string(), "--native-memory",
                                                   (project / "exp/memory/opencl-native.db").string()});
  auto r2 = util::run(again);
  ASSERT_TRUE(r2);
  ASSERT_TRUE(r2->status.success()) << r2->out << r2->err;
  EXPECT_FALSE(fs::exists(project / "exp2" / "source-cpu")) << "a source run was made although --foreign-memory was given";
  json t2 = json::parse(r2->out);
  EXPECT_EQ(t2["settings"].size(), 4u);
  EXPECT_EQ(t2["native_memory"], (project / "exp/memory/opencl-native.db").string());

  // A backend that cannot run here is refused before anything runs.
  util::RunOptions bad = ro;
  bad.spawn.argv = {KOPE_EXE, "transfer", "--from", "cpu", "--to", "vulkan", "--dir", (project / "exp3").string()};
  auto r3 = util::run(bad);
  ASSERT_TRUE(r3);
  EXPECT_EQ(r3->status.code, 2) << r3->err;
  EXPECT_FALSE(fs::exists(project / "exp3"));
}

}  // namespace
}  // namespace kope
