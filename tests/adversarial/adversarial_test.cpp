// The adversarial corpus: every kernel in corpus/ is evaluated for real (sandboxed compile,
// inspection, runner in bubblewrap with seccomp) and must get the verdict its header names.
// Headers:
//   // expect: <verdict>              the verdict with the inspection on
//   // op: <name>                     a test op from tests/ops
//   // time: yes                      time the timed cases too (some cheats only show there)
//   // message: <text>                the verdict message must contain this
//   // expect-uninspected: <verdict>  also run with the object inspection off: the runtime
//                                     sandbox alone must still stop it
//   // message-uninspected: <text>
//   // call-timeout-s: <seconds>      a longer per-call timeout than the harness's 3 s, for a
//                                     kernel whose verdict needs time to show (one that page-
//                                     faults its way to the memory limit is slow on a busy VM)
// After every run the machine must be intact (harness.h).
#include <algorithm>
#include <fstream>
#include <map>
#include <regex>

#include <gtest/gtest.h>

#include "eval/measure.h"
#include "harness.h"
#include "util/fs.h"
#include "util/strings.h"

namespace kope::testing {
namespace {

using Entry = CorpusEntry;

fs::path corpus_dir() { return fs::path(KOPE_SOURCE_DIR) / "tests" / "adversarial" / "corpus"; }

std::vector<Entry> corpus() { return read_corpus(corpus_dir(), ".cpp"); }

std::string source_of(const Entry& e) {
  auto text = util::read_file(e.path);
  EXPECT_TRUE(text) << text.error().message;
  std::string s = *text;
  s = util::replace_all(s, "@SECRET_PATH@", world().secret_path.string());
  s = util::replace_all(s, "@PORT@", std::to_string(world().port));
  return s;
}

void run_and_check(const Entry& e, bool inspect) {
  std::string expect_key = inspect ? "expect" : "expect-uninspected";
  std::string message_key = inspect ? "message" : "message-uninspected";
  ASSERT_TRUE(e.headers.contains(expect_key)) << e.path << " has no '// " << expect_key << ":' header";
  auto expected = eval::parse_verdict(e.headers.at(expect_key));
  ASSERT_TRUE(expected) << "unknown verdict " << e.headers.at(expect_key);
  ASSERT_TRUE(e.headers.contains("op")) << e.path << " has no '// op:' header";
  spec::OpSpec op = test_op(e.headers.at("op"));
  bool time = e.headers.contains("time") && e.headers.at("time") == "yes";
  std::unique_ptr<eval::Evaluator> own;
  if (e.headers.contains("call-timeout-s")) {
    eval::EvaluatorOptions o = test_options(inspect);
    o.min_call_timeout = std::chrono::milliseconds(static_cast<int64_t>(1000 * std::stod(e.headers.at("call-timeout-s"))));
    auto made = eval::make_cpu_evaluator(test_profile(), o);
    ASSERT_TRUE(made) << made.error().message;
    own = std::move(*made);
  }
  eval::Evaluator& ev = own ? *own : evaluator(inspect);
  size_t deferred = eval::deferred_sets_made();
  auto r = ev.evaluate(op, source_of(e), test_eval_options(time));
  ASSERT_TRUE(r) << r.error().message;
  // The fresh-data check rejects only once a confirmation round agrees, on never-seen sets made
  // for it then (CaseData::deferred_sets).
  if (r->message.find("never-seen inputs") != std::string::npos) {
    EXPECT_GT(eval::deferred_sets_made(), deferred) << e.name;
  }
  EXPECT_EQ(eval::verdict_name(r->verdict), eval::verdict_name(*expected))
      << (inspect ? "" : "[inspection off] ") << e.name << ": " << r->message << "\n" << r->diagnostics;
  if (e.headers.contains(message_key)) {
    EXPECT_NE(r->message.find(e.headers.at(message_key)), std::string::npos)
        << "message should mention '" << e.headers.at(message_key) << "': " << r->message;
  }
  if (r->verdict == eval::Verdict::correct) {
    EXPECT_EQ(r->cases.size(), op.cases.size());
    for (const auto& c : r->cases) EXPECT_TRUE(c.ok) << c.label;
    if (time) {
      EXPECT_EQ(r->timing.size(), static_cast<size_t>(op.timed_case_count()));
      EXPECT_TRUE(r->speedup_vs_reference.has_value());
    }
  } else {
    EXPECT_FALSE(r->speedup_vs_reference.has_value());
    EXPECT_FALSE(r->speedup_vs_library.has_value());
  }
  std::string damage = machine_damage();
  EXPECT_TRUE(damage.empty()) << e.name << " left damage:\n" << damage;
}

class Corpus : public ::testing::TestWithParam<Entry> {};

TEST_P(Corpus, GetsItsVerdict) {
  const Entry& e = GetParam();
  run_and_check(e, true);
  if (e.headers.contains("expect-uninspected")) run_and_check(e, false);
}

INSTANTIATE_TEST_SUITE_P(Adversarial, Corpus, ::testing::ValuesIn(corpus()),
                         [](const ::testing::TestParamInfo<Entry>& p) { return p.param.name; });

TEST(Corpus, CoversTheRequiredAttacks) {
  std::set<std::string> names;
  for (const auto& e : corpus()) names.insert(e.name);
  for (const char* required : {"noop", "constant_output", "copy_input", "input_mutation", "oob_one_past_end", "shape_specialised",
                               "cache_by_pointer", "cache_by_content", "background_thread", "timer_interposition",
                               "stdout_fake_result", "read_passwd", "read_memory_db", "network", "fork_bomb", "infinite_loop",
                               "sleep", "memory_bomb", "disk_bomb", "output_flood", "segfault", "abort", "early_exit",
                               "include_system_file", "template_bomb", "raw_syscall_asm", "honest_vadd_naive",
                               "honest_matmul_tiled_omp"}) {
    EXPECT_TRUE(names.contains(required)) << required;
  }
}

}  // namespace
}  // namespace kope::testing
