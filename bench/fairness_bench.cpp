// kope_fairness_bench: how often the evaluator rejects honest kernels, and how many cheats it
// catches, on a quiet machine and with CPU hogs running beside it.
//
//   build/bench/kope_fairness_bench [--repeats R] [--suite-refs N] [--hogs H] [--max-seconds S]
//                                   [--only-honest] [--source DIR]
//
// Honest kernels (each must be judged `correct`; anything else is a false rejection):
//   - tests/real-model/<op>/<n>.cpp, kernels a real model wrote, expected verdicts in
//     verdicts.tsv (a listed `wrong_result` must stay wrong_result and is not counted as honest);
//     they use AVX-512 and are left out (and counted) on a target without it, where
//     tests/real-model-avx2/ (the same kernels ported to AVX2) stands in;
//   - the suite's references used as candidates of their own op (ops/**/reference.cpp), the N
//     with the cheapest timed cases (an estimate from their flops and bytes), so a run stays short;
//   - the adversarial corpus's kernels whose header expects `correct`.
// Cheats: every other kernel of tests/adversarial/corpus: caught when not judged `correct`, and
// counted apart when the verdict is the one its header expects (the bench's limits are the
// evaluator's defaults, not the adversarial test's, so e.g. a memory bomb may time out first).
// Every honest kernel is evaluated R times in each condition (every cheat once): quiet, then with
// H processes spinning on the CPUs (the bench starts and stops them). Timing is on with a cap of S seconds per timed case
// (so the fresh-data check runs). Prints one line per disagreement and the counts per condition.
// The machine's other load is not under the bench's control: say how loaded it was.
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "kope/eval.h"
#include "kope/hw.h"
#include "kope/spec.h"
#include "util/fs.h"
#include "util/strings.h"

using namespace kope;
namespace fs = std::filesystem;

namespace {

using Clock = std::chrono::steady_clock;

struct Kernel {
  std::string name;
  const spec::OpSpec* op = nullptr;
  std::string source;
  eval::Verdict expected = eval::Verdict::correct;
  bool honest = true;
};

int die(const std::string& m) {
  std::fprintf(stderr, "kope_fairness_bench: %s\n", m.c_str());
  return 2;
}

std::map<std::string, std::string> headers_of(const std::string& text) {
  std::map<std::string, std::string> h;
  for (const auto& line : util::split(text, '\n')) {
    if (!line.starts_with("// ")) break;
    auto colon = line.find(": ");
    if (colon == std::string::npos) continue;
    std::string key = line.substr(3, colon - 3);
    if (key.find(' ') != std::string::npos) continue;
    h.emplace(key, std::string(util::trim(line.substr(colon + 2))));
  }
  return h;
}

// Seconds an evaluation of the op's reference may need: its calls on the timed cases (1 GFLOP/s,
// 2 GB/s) and generating, verifying and moving the data of every case (~6 sets, 0.5 GB/s).
double cost_estimate(const spec::OpSpec& op) {
  double s = 0;
  for (const spec::Case* c : op.timed_cases()) s += op.flops_for(*c) / 1e9 + op.bytes_for(*c) / 2e9;
  for (const spec::Case& c : op.cases) s += 6.0 * static_cast<double>(op.case_buffer_bytes(c)) / 0.5e9;
  return s;
}

class Hogs {
 public:
  explicit Hogs(int n) {
    for (int i = 0; i < n; ++i) {
      pid_t p = ::fork();
      if (p == 0) {
        ::prctl(PR_SET_PDEATHSIG, SIGKILL);
        volatile unsigned long x = 0;
        for (;;) x = x + 1;
      }
      if (p > 0) m_pids.push_back(p);
    }
  }
  ~Hogs() {
    for (pid_t p : m_pids) ::kill(p, SIGKILL);
    for (pid_t p : m_pids) ::waitpid(p, nullptr, 0);
  }
  Hogs(const Hogs&) = delete;
  Hogs& operator=(const Hogs&) = delete;

 private:
  std::vector<pid_t> m_pids;
};

struct Tally {
  int honest = 0, false_rejections = 0, other_honest_misses = 0;
  int cheats = 0, caught = 0, caught_as_expected = 0;  // caught: not judged correct
  std::vector<double> fresh_ratio;  // fresh call (CPU time) / batch median, honest timed cases
  std::vector<double> wall_s;
  int disturbed = 0;
};

double median_of(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

}  // namespace

int main(int argc, char** argv) {
  int repeats = 1, suite_refs = 40, hogs = 2;
  double max_seconds = 0.3;
  bool only_honest = false;
  fs::path source_dir = KOPE_SOURCE_DIR;
  for (int i = 1; i < argc; ++i) {
    std::string k = argv[i];
    auto value = [&]() -> std::string { return i + 1 < argc ? argv[++i] : ""; };
    if (k == "--repeats") repeats = std::max(1, std::atoi(value().c_str()));
    else if (k == "--suite-refs") suite_refs = std::max(0, std::atoi(value().c_str()));
    else if (k == "--hogs") hogs = std::max(0, std::atoi(value().c_str()));
    else if (k == "--max-seconds") max_seconds = std::atof(value().c_str());
    else if (k == "--only-honest") only_honest = true;
    else if (k == "--source") source_dir = value();
    else return die("unknown option " + k + " (see the file header)");
  }
  auto suite = spec::load_suite(source_dir / "ops");
  if (!suite) return die(suite.error().message);
  auto test_ops = spec::load_suite(source_dir / "tests" / "ops");
  if (!test_ops) return die(test_ops.error().message);

  auto hw = load_hardware_profile();
  HardwareProfile profile = hw ? *hw : describe_host();
  eval::EvaluatorOptions options;
  options.min_samples = 6;
  options.min_call_timeout = std::chrono::milliseconds(5000);
  auto ev = eval::make_cpu_evaluator(profile, options);
  if (!ev) return die(ev.error().message);
  bool avx512 = (*ev)->target().str().find("avx512") != std::string::npos;

  std::vector<Kernel> kernels;
  int skipped_avx512 = 0;
  // The real model's kernels (and their AVX2 ports).
  for (const char* corpus : {"real-model", "real-model-avx2"}) {
    std::ifstream in(source_dir / "tests" / corpus / "verdicts.tsv");
    std::string line;
    while (std::getline(in, line)) {
      if (line.empty() || line[0] == '#') continue;
      auto cols = util::split(line, '\t');
      if (cols.size() < 4) continue;
      const spec::OpSpec* op = suite->find(cols[0]);
      auto text = util::read_file(source_dir / "tests" / corpus / cols[0] / cols[1]);
      auto v = eval::parse_verdict(util::trim(cols[3]));
      if (op == nullptr || !text || !v) return die(fmt::format("tests/{}: cannot use {}/{}", corpus, cols[0], cols[1]));
      if (!avx512 && (text->find("_mm512_") != std::string::npos || text->find("__m512") != std::string::npos)) {
        ++skipped_avx512;
        continue;
      }
      kernels.push_back({fmt::format("{}/{}/{}", corpus, cols[0], cols[1]), op, *text, *v, *v == eval::Verdict::correct});
    }
  }
  // The suite's references as candidates, cheapest first.
  {
    std::vector<const spec::OpSpec*> ops;
    for (const auto& op : suite->ops) {
      if (!op.timed_cases().empty()) ops.push_back(&op);
    }
    std::sort(ops.begin(), ops.end(), [](const spec::OpSpec* a, const spec::OpSpec* b) { return cost_estimate(*a) < cost_estimate(*b); });
    for (int i = 0; i < suite_refs && i < static_cast<int>(ops.size()); ++i) {
      auto text = util::read_file(ops[static_cast<size_t>(i)]->reference_path);
      if (!text) return die(text.error().message);
      kernels.push_back({"reference/" + ops[static_cast<size_t>(i)]->name, ops[static_cast<size_t>(i)], *text, eval::Verdict::correct, true});
    }
  }
  // The adversarial corpus: honest kernels and cheats.
  fs::path scratch = fs::temp_directory_path() / fmt::format("kope-fairness-{}", ::getpid());
  fs::create_directories(scratch);
  fs::path secret = scratch / "memory.db";
  { std::ofstream(secret) << "kope-fairness-secret\n"; }
  {
    std::vector<fs::path> files;
    for (const auto& e : fs::directory_iterator(source_dir / "tests" / "adversarial" / "corpus")) {
      if (e.path().extension() == ".cpp") files.push_back(e.path());
    }
    std::sort(files.begin(), files.end());
    for (const auto& f : files) {
      auto text = util::read_file(f);
      if (!text) return die(text.error().message);
      auto h = headers_of(*text);
      auto v = eval::parse_verdict(h.contains("expect") ? h["expect"] : std::string());
      const spec::OpSpec* op = h.contains("op") ? test_ops->find(h["op"]) : nullptr;
      if (!v || op == nullptr) return die(f.string() + ": no usable expect/op header");
      eval::Verdict expected = *v;
      bool honest = expected == eval::Verdict::correct;
      if (!honest && only_honest) continue;
      std::string src = util::replace_all(util::replace_all(*text, "@SECRET_PATH@", secret.string()), "@PORT@", "9");
      kernels.push_back({"adversarial/" + f.filename().string(), op, src, expected, honest});
    }
  }

  eval::EvalOptions eo;
  eo.time = true;
  eo.max_seconds_per_case = max_seconds;
  eo.target_ci = 0.1;

  int honest_kernels = static_cast<int>(std::count_if(kernels.begin(), kernels.end(), [](const Kernel& k) { return k.honest; }));
  std::printf("kope_fairness_bench: %d kernels (%d honest, %zu others), %d repeat(s) per condition, timing cap %.2g s per case, "
              "%d thread(s) per kernel, target %s\n",
              static_cast<int>(kernels.size()), honest_kernels, kernels.size() - static_cast<size_t>(honest_kernels), repeats,
              max_seconds, profile.cores, (*ev)->target().str().c_str());
  {
    std::string refs;
    for (const auto& k : kernels) {
      if (k.name.starts_with("reference/")) refs += (refs.empty() ? "" : " ") + k.name.substr(10);
    }
    std::printf("suite references as candidates: %s\n", refs.c_str());
  }
  if (skipped_avx512 > 0) std::printf("left out: %d real-model kernels that need AVX-512 (the target lacks it)\n", skipped_avx512);
  std::fflush(stdout);
  std::map<std::string, Tally> tallies;
  std::vector<std::string> conditions = {"quiet"};
  if (hogs > 0) conditions.push_back(fmt::format("{} CPU hogs", hogs));
  auto t0 = Clock::now();
  int evaluations = 0;
  // Repeats outermost, so a run cut short still has figures for both conditions.
  for (int rep = 0; rep < repeats; ++rep) {
    for (const auto& cond : conditions) {
      std::unique_ptr<Hogs> running;
      if (cond != "quiet") running = std::make_unique<Hogs>(hogs);
      Tally& t = tallies[cond];
      for (const auto& k : kernels) {
        if (!k.honest && rep > 0) continue;
        auto r = (*ev)->evaluate(*k.op, k.source, eo);
        double elapsed = std::chrono::duration<double>(Clock::now() - t0).count();
        if (!r) {
          std::printf("[%7.1f s] %-10s %-48s ERROR %s\n", elapsed, cond.c_str(), k.name.c_str(), r.error().message.c_str());
          if (k.honest) ++t.honest, ++t.other_honest_misses;
          else ++t.cheats;
          continue;
        }
        bool as_expected = r->verdict == k.expected;
        if (k.honest) {
          ++t.honest;
          if (!as_expected) {
            if (r->verdict == eval::Verdict::rejected) ++t.false_rejections;
            else ++t.other_honest_misses;
          }
          for (const auto& ct : r->timing) {
            if (ct.median_us > 0 && ct.fresh_us > 0) t.fresh_ratio.push_back(ct.fresh_us / ct.median_us);
          }
          t.disturbed += r->disturbed ? 1 : 0;
          t.wall_s.push_back(r->wall_seconds);
        } else {
          ++t.cheats;
          t.caught += r->verdict != eval::Verdict::correct ? 1 : 0;
          t.caught_as_expected += as_expected ? 1 : 0;
        }
        if (!as_expected) {
          std::printf("[%7.1f s] %-10s %-48s expected %s, got %s: %s\n", elapsed, cond.c_str(), k.name.c_str(),
                      std::string(eval::verdict_name(k.expected)).c_str(), std::string(eval::verdict_name(r->verdict)).c_str(),
                      util::truncate_text(r->message, 600, 4).c_str());
        } else {
          std::fprintf(stderr, "[%7.1f s] %s %s: %s\n", elapsed, cond.c_str(), k.name.c_str(), std::string(eval::verdict_name(r->verdict)).c_str());
        }
        if (++evaluations % 20 == 0) {
          std::printf("[%7.1f s] so far: %s: %d honest verdicts, %d false rejections, %d other misses; %d/%d cheats caught\n", elapsed,
                      cond.c_str(), t.honest, t.false_rejections, t.other_honest_misses, t.caught, t.cheats);
        }
        std::fflush(stdout);
      }
    }
  }
  std::error_code ec;
  fs::remove_all(scratch, ec);
  std::printf("\n%-12s %8s %16s %14s %9s %14s %12s %22s %12s\n", "condition", "honest", "false rejections", "other misses", "cheats",
              "cheats caught", "as expected", "fresh/batch (med, max)", "disturbed");
  int total_honest = 0, total_false = 0;
  for (const auto& cond : conditions) {
    const Tally& t = tallies[cond];
    total_honest += t.honest;
    total_false += t.false_rejections + t.other_honest_misses;
    double mx = t.fresh_ratio.empty() ? 0 : *std::max_element(t.fresh_ratio.begin(), t.fresh_ratio.end());
    std::printf("%-12s %8d %16d %14d %9d %14d %12d %14.2f, %5.2f %12d\n", cond.c_str(), t.honest, t.false_rejections, t.other_honest_misses,
                t.cheats, t.caught, t.caught_as_expected, median_of(t.fresh_ratio), mx, t.disturbed);
  }
  std::printf("honest verdicts %d, wrong %d; total %.0f s\n", total_honest, total_false,
              std::chrono::duration<double>(Clock::now() - t0).count());
  return total_false == 0 ? 0 : 1;
}
