// tests/e2e/e2e_fixture.h — what the end-to-end tests share: the fake model server
// (fake_llm_server.py) on 127.0.0.1, one per test suite, and a fixture with a private project
// directory per test that runs the kope executable there.
#pragma once

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "util/fs.h"
#include "util/strings.h"
#include "util/subprocess.h"

extern char** environ;

namespace kope {

namespace fs = std::filesystem;
using nlohmann::json;

const fs::path k_e2e = fs::path(KOPE_SOURCE_DIR) / "tests/e2e";
const fs::path k_scale = k_e2e / "ops/elementwise/e2e_scale";
const fs::path k_softmax = k_e2e / "ops/normalization/e2e_softmax";

// Loose timing keeps the tests quick on a busy 2-core machine. --no-starter: these tests count
// what their own runs put into memory (tests/starter/ covers the shipped starter experience).
const std::vector<std::string> k_quick = {"--eval-ci", "0.2", "--eval-max-seconds", "0.5", "--patience", "0",
                                          "--roofline-target", "0", "--no-starter"};

struct Output {
  int code = -1;
  std::string out, err;
};

class FakeServer {
 public:
  void start(const fs::path& dir) {
    m_log = dir / "requests.jsonl";
    fs::path port_file = dir / "port";
    util::SpawnOptions so;
    so.argv = {"python3", (k_e2e / "fake_llm_server.py").string(), "--fixtures", (k_e2e / "fixtures").string(),
               "--port-file", port_file.string(), "--log", m_log.string()};
    so.capture_stdout = false;
    so.capture_stderr = false;
    auto p = util::Process::spawn(so);
    ASSERT_TRUE(p) << p.error().message;
    m_process.emplace(std::move(*p));
    for (int i = 0; i < 200 && !fs::exists(port_file); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    auto port = util::read_file(port_file);
    ASSERT_TRUE(port) << "the fake model server did not start";
    m_port = std::stoi(*port);
  }
  void stop() {
    if (m_process) {
      m_process->kill_group(SIGTERM);
      m_process->wait();
      m_process.reset();
    }
  }
  int port() const { return m_port; }
  const fs::path& log() const { return m_log; }

 private:
  std::optional<util::Process> m_process;
  int m_port = 0;
  fs::path m_log;
};

class E2ETest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    s_dir.emplace(*util::TempDir::create("kope-e2e-server"));
    s_server.start(s_dir->path());
  }
  static void TearDownTestSuite() {
    s_server.stop();
    s_dir.reset();
  }

  void SetUp() override {
    m_dir.emplace(*util::TempDir::create("kope-e2e"));
    fs::create_directories(project() / "xdg");
  }

  // KOPE_E2E_SAVE_RESULTS=<dir>: every results.json the test's runs wrote is copied to
  // <dir>/<test>/<run dir>/results.json, so two builds' figures can be compared
  // (scripts/compare_results.py); with KOPE_E2E_SAVE_ALL set, every file of the project.
  void TearDown() override {
    const char* save = std::getenv("KOPE_E2E_SAVE_RESULTS");
    if (!save || !*save || !m_dir) return;
    fs::path to = fs::path(save) / ::testing::UnitTest::GetInstance()->current_test_info()->name();
    bool everything = std::getenv("KOPE_E2E_SAVE_ALL") != nullptr;  // transcripts too, to read them
    for (const auto& e : fs::recursive_directory_iterator(project())) {
      if (!e.is_regular_file() || (!everything && e.path().filename() != "results.json")) continue;
      fs::path dest = to / fs::relative(e.path(), project());
      fs::create_directories(dest.parent_path());
      fs::copy_file(e.path(), dest, fs::copy_options::overwrite_existing);
    }
  }

  fs::path project() const { return m_dir->path(); }
  fs::path memory_path() const { return project() / "memory.db"; }

  // A project with a kope.toml naming the fake server (`model` picks the usage mode).
  void configure_model(const std::string& model, int64_t window = 32000, int64_t max_output = 2000) {
    std::string toml = fmt::format(
        "[llm.fake]\nbase_url = \"http://127.0.0.1:{}/v1\"\nmodel = \"{}\"\napi_key_env = \"\"\n"
        "context_window = {}\nmax_output_tokens = {}\nmax_retries = 1\n",
        s_server.port(), model, window, max_output);
    ASSERT_TRUE(util::write_file_atomic(project() / "kope.toml", toml));
  }

  // Our environment without the model and memory settings, with the project's own config home.
  std::vector<std::string> child_env() const {
    std::vector<std::string> env;
    for (char** e = environ; *e; ++e) {
      std::string kv(*e);
      for (const char* drop : {"KOPE_MODEL=", "KOPE_PROFILE=", "OPENAI_BASE_URL=", "OPENAI_API_KEY=", "KOPE_MEMORY=",
                               "XDG_CONFIG_HOME=", "KOPE_PROVIDER="}) {
        if (kv.starts_with(drop)) kv.clear();
      }
      if (!kv.empty()) env.push_back(kv);
    }
    env.push_back("XDG_CONFIG_HOME=" + (project() / "xdg").string());
    return env;
  }

  util::Process spawn_kope(const std::vector<std::string>& args) {
    util::SpawnOptions so;
    so.argv = {KOPE_EXE};
    so.argv.insert(so.argv.end(), args.begin(), args.end());
    so.cwd = project();
    so.env = child_env();
    auto p = util::Process::spawn(so);
    if (!p) ADD_FAILURE() << p.error().message;
    return std::move(*p);
  }

  Output kope(const std::vector<std::string>& args, int timeout_s = 300) {
    util::RunOptions ro;
    ro.spawn.argv = {KOPE_EXE};
    ro.spawn.argv.insert(ro.spawn.argv.end(), args.begin(), args.end());
    ro.spawn.cwd = project();
    ro.spawn.env = child_env();
    ro.timeout = std::chrono::seconds(timeout_s);
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

  std::vector<std::string> run_args(const fs::path& run_dir, std::vector<std::string> ops, int iterations,
                                    std::vector<std::string> extra = {}, std::optional<fs::path> memory = {}) {
    std::vector<std::string> a = {"run", "--ops", util::join(ops, ","), "--iterations", std::to_string(iterations),
                                  "--memory", memory.value_or(memory_path()).string(), "--run-dir", run_dir.string(),
                                  "--seed", "7"};
    a.insert(a.end(), k_quick.begin(), k_quick.end());
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
  }

  static json read_json(const fs::path& p) {
    auto text = util::read_file(p);
    if (!text) {
      ADD_FAILURE() << text.error().message;
      return json();
    }
    return json::parse(*text);
  }

  static std::vector<json> events(const fs::path& run_dir, const std::string& type = "") {
    std::vector<json> out;
    auto text = util::read_file(run_dir / "events.jsonl");
    if (!text) return out;
    for (const auto& line : util::split(*text, '\n')) {
      auto j = json::parse(line, nullptr, false);
      if (j.is_object() && (type.empty() || j.value("type", "") == type)) out.push_back(j);
    }
    return out;
  }

  // Waits until the run in `dir` has logged an event of `type`; false when `p` ended first.
  static bool wait_for_event(const fs::path& dir, const std::string& type, util::Process& p) {
    for (int t = 0; t < 6000; ++t) {
      if (!events(dir, type).empty()) return true;
      if (p.try_wait()) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return false;
  }
  static const json& op_entry(const json& results, const std::string& name) {
    for (const auto& op : results["ops"]) {
      if (op["name"] == name) return op;
    }
    static json none;
    ADD_FAILURE() << "no op " << name << " in results";
    return none;
  }

  static inline std::optional<util::TempDir> s_dir;
  static inline FakeServer s_server;
  std::optional<util::TempDir> m_dir;
};

}  // namespace kope
