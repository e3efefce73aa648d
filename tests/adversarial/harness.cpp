#include "harness.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <regex>
#include <thread>

#include <gtest/gtest.h>

#include "util/fs.h"
#include "util/strings.h"

namespace kope::testing {

namespace {

std::atomic<int> g_connections{0};

// The uid range the sandbox allocates for this process (see eval/sandbox.cpp).
bool in_our_uid_range(uint64_t uid) {
  uint64_t base = 1'500'000'000ULL + ((static_cast<uint64_t>(::getpid()) & 0xffff) << 12);
  return uid >= base && uid < base + 4096;
}

std::string leftover_processes(const fs::path& tmp_root) {
  std::string found;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator("/proc", ec)) {
    std::string name = e.path().filename().string();
    if (name.empty() || !std::isdigit(static_cast<unsigned char>(name[0]))) continue;
    auto status = util::read_file(e.path() / "status");
    if (!status) continue;
    uint64_t uid = 0;
    for (auto& line : util::split(*status, '\n')) {
      if (line.starts_with("Uid:")) uid = std::strtoull(line.c_str() + 4, nullptr, 10);
    }
    auto cmd = util::read_file(e.path() / "cmdline");
    std::string cmdline = cmd ? util::replace_all(*cmd, std::string(1, '\0'), " ") : std::string();
    bool ours = (::geteuid() == 0 && in_our_uid_range(uid)) || cmdline.find(tmp_root.string()) != std::string::npos;
    if (ours) found += fmt::format("pid {} uid {}: {}\n", name, uid, cmdline.substr(0, 200));
  }
  return found;
}

void listen_forever(int fd) {
  for (;;) {
    struct pollfd p = {fd, POLLIN, 0};
    if (::poll(&p, 1, -1) > 0) {
      int c = ::accept(fd, nullptr, nullptr);
      if (c >= 0) {
        ++g_connections;
        ::close(c);
      }
    }
  }
}

AdversarialWorld make_world() {
  AdversarialWorld w;
  fs::path build = KOPE_BINARY_DIR;
  w.tmp_root = build / "adversarial-tmp" / std::to_string(::getpid());
  std::error_code ec;
  fs::remove_all(w.tmp_root, ec);
  fs::create_directories(w.tmp_root);
  ::setenv("TMPDIR", w.tmp_root.c_str(), 1);
  // Private caches and data unless the test script set them.
  if (!util::get_env("KOPE_CACHE_DIR")) ::setenv("KOPE_CACHE_DIR", (build / "test-cache").c_str(), 1);
  if (!util::get_env("KOPE_DATA_DIR")) ::setenv("KOPE_DATA_DIR", (build / "test-data").c_str(), 1);
  // Each test process plants its own secret (ctest runs several at once).
  fs::path secret_dir = util::data_dir() / fmt::format("adversarial-{}", ::getpid());
  fs::create_directories(secret_dir);
  w.secret_path = secret_dir / "memory.db";
  w.secret = "KOPE-SECRET-" + std::to_string(::getpid());
  if (!util::write_file_atomic(w.secret_path, w.secret)) ADD_FAILURE() << "cannot plant the secret";
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(fd, 16) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    ADD_FAILURE() << "cannot start the listener";
  } else {
    w.port = ntohs(a.sin_port);
    std::thread(listen_forever, fd).detach();
  }
  return w;
}

}  // namespace

// Removes the planted secret and the scratch root when the test process ends.
struct WorldHolder {
  AdversarialWorld w = make_world();
  ~WorldHolder() {
    std::error_code ec;
    fs::remove_all(w.secret_path.parent_path(), ec);
    fs::remove_all(w.tmp_root, ec);
  }
};

const AdversarialWorld& world() {
  static WorldHolder holder;
  return holder.w;
}

int listener_connections() { return g_connections.load(); }

HardwareProfile test_profile() {
  HardwareProfile p = describe_host();
  p.cores = 2;
  p.peak_gflops = 1e6;
  p.peak_gflops_core = 1e6;
  p.peak_gflops_f64 = 1e6;
  p.peak_gflops_f64_core = 1e6;
  p.peak_gbps = 1e6;
  p.probe_version = k_hw_probe_version;  // a current profile: the CLI uses it as it is
  return p;
}

eval::EvaluatorOptions test_options(bool inspect) {
  eval::EvaluatorOptions o;
  o.cpu.threads = 2;
  o.inspect = inspect;
  o.min_call_timeout = std::chrono::milliseconds(3000);
  o.cpu.memory_bytes = 512ull << 20;
  o.cpu.compile_timeout = std::chrono::seconds(60);
  o.cpu.compile_memory_bytes = 1536ull << 20;
  o.opencl.compile_timeout = std::chrono::seconds(60);
  o.cuda.compile_timeout = std::chrono::seconds(120);
  o.min_samples = 6;
  return o;
}

eval::EvalOptions test_eval_options(bool time) {
  eval::EvalOptions e;
  e.time = time;
  e.max_seconds_per_case = 1.0;
  e.target_ci = 0.05;
  return e;
}

eval::Evaluator& evaluator(bool inspect) {
  static std::mutex mu;
  static std::unique_ptr<eval::Evaluator> with, without;
  std::lock_guard lock(mu);
  (void)world();
  auto& slot = inspect ? with : without;
  if (!slot) {
    auto e = eval::make_cpu_evaluator(test_profile(), test_options(inspect));
    if (!e) {
      ADD_FAILURE() << e.error().message;
      std::abort();
    }
    slot = std::move(*e);
  }
  return *slot;
}

spec::OpSpec test_op(const std::string& name) {
  auto ops = spec::load_suite(fs::path(KOPE_SOURCE_DIR) / "tests" / "ops");
  EXPECT_TRUE(ops) << ops.error().message;
  const spec::OpSpec* op = ops->find(name);
  EXPECT_NE(op, nullptr) << name;
  return *op;
}

std::string machine_damage() {
  const AdversarialWorld& w = world();
  std::string damage;
  // Sandboxes die with their parent; give the kernel a moment to finish reaping a pid namespace.
  std::string procs;
  for (int i = 0; i < 40; ++i) {
    procs = leftover_processes(w.tmp_root);
    if (procs.empty()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  if (!procs.empty()) damage += "processes left behind:\n" + procs;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(w.tmp_root, ec)) damage += "scratch left behind: " + e.path().string() + "\n";
  for (const char* p : {"/tmp/kope-adversarial-bomb-0", "/tmp/kope-adversarial-pwned"}) {
    if (fs::exists(p, ec)) damage += fmt::format("a kernel wrote {}\n", p);
  }
  auto secret = util::read_file(w.secret_path);
  if (!secret || *secret != w.secret) damage += "the secret in the data directory changed\n";
  if (listener_connections() != 0) damage += fmt::format("the host listener was reached {} times\n", listener_connections());
  return damage;
}

std::vector<CorpusEntry> read_corpus(const fs::path& dir, const std::string& extension) {
  std::vector<CorpusEntry> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    if (e.path().extension() != extension) continue;
    CorpusEntry en{e.path().stem().string(), e.path(), {}};
    std::ifstream in(e.path());
    std::string line;
    static const std::regex k_header(R"(^// ([a-z-]+): (.*)$)");
    while (std::getline(in, line) && line.starts_with("//")) {
      std::smatch m;
      if (std::regex_match(line, m, k_header)) en.headers[m[1]] = m[2];
    }
    out.push_back(std::move(en));
  }
  std::sort(out.begin(), out.end(), [](const CorpusEntry& a, const CorpusEntry& b) { return a.name < b.name; });
  return out;
}

}  // namespace kope::testing
