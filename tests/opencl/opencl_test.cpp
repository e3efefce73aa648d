// The OpenCL backend for real: every kernel in corpus/ is built by PoCL in the compile sandbox,
// inspected, and run through the host shim in kope-runner, and must get the verdict its header
// names (the same headers as tests/adversarial: expect, op, time, message). After every run the
// machine must be intact. The launch-geometry parser and the launch table are tested directly.
// Skips (with the reason) where no OpenCL platform is installed.
#include <algorithm>
#include <fstream>
#include <map>
#include <regex>

#include <nlohmann/json.hpp>

#include <gtest/gtest.h>

#include "../adversarial/harness.h"
#include "eval/backend.h"
#include "eval/opencl/opencl.h"
#include "util/fs.h"
#include "util/subprocess.h"

namespace kope::testing {
namespace {

using Entry = CorpusEntry;

std::vector<Entry> corpus() { return read_corpus(fs::path(KOPE_SOURCE_DIR) / "tests" / "opencl" / "corpus", ".cl"); }

eval::Evaluator* opencl_evaluator(std::string* why) {
  static std::unique_ptr<eval::Evaluator> ev;
  static std::string problem;
  static bool tried = false;
  if (!tried) {
    tried = true;
    (void)world();
    auto e = eval::make_evaluator("opencl", test_profile(), test_options());
    if (e) {
      ev = std::move(*e);
    } else {
      problem = e.error().message;
    }
  }
  *why = problem;
  return ev.get();
}

spec::OpSpec op_for(const std::string& name) {
  std::error_code ec;
  for (const char* dir : {"elementwise", "matmul"}) {
    if (fs::exists(fs::path(KOPE_SOURCE_DIR) / "tests" / "ops" / dir / name, ec)) return test_op(name);
  }
  auto op = spec::resolve_op(name, fs::path(KOPE_SOURCE_DIR) / "ops");
  EXPECT_TRUE(op) << op.error().message;
  return *op;
}

class OpenClCorpus : public ::testing::TestWithParam<Entry> {};

TEST_P(OpenClCorpus, GetsItsVerdict) {
  const Entry& e = GetParam();
  std::string why;
  eval::Evaluator* ev = opencl_evaluator(&why);
  if (ev == nullptr) GTEST_SKIP() << "no usable OpenCL platform: " << why;
  ASSERT_TRUE(e.headers.contains("expect")) << e.path << " has no `// expect:` header";
  ASSERT_TRUE(e.headers.contains("op")) << e.path << " has no `// op:` header";
  auto source = util::read_file(e.path);
  ASSERT_TRUE(source) << source.error().message;
  spec::OpSpec op = op_for(e.headers.at("op"));
  auto r = ev->evaluate(op, *source, test_eval_options(e.headers.contains("time")));
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(eval::verdict_name(r->verdict), e.headers.at("expect")) << r->message << "\n" << r->diagnostics;
  if (e.headers.contains("message")) {
    EXPECT_NE(r->message.find(e.headers.at("message")), std::string::npos) << r->message;
  }
  EXPECT_EQ(r->target, "opencl-pocl-cpu");
  if (r->verdict == eval::Verdict::correct && e.headers.contains("time")) {
    ASSERT_FALSE(r->timing.empty());
    EXPECT_GT(r->timing[0].median_us, 0);
    EXPECT_GT(r->timing[0].reference_us, 0);
    EXPECT_TRUE(r->speedup_vs_reference.has_value());
  }
  EXPECT_EQ(machine_damage(), "");
}

INSTANTIATE_TEST_SUITE_P(Corpus, OpenClCorpus, ::testing::ValuesIn(corpus()),
                         [](const ::testing::TestParamInfo<Entry>& i) { return i.param.name; });

TEST(OpenClLaunch, ParsesGeometryHeaders) {
  auto l = eval::opencl::parse_launch("// kope: global=(cdiv(N, 4), M)\n// kope: local=(16, 4)\n__kernel void kope_kernel() {}\n");
  ASSERT_TRUE(l) << l.error().message;
  EXPECT_EQ(l->work_dim, 2);
  EXPECT_EQ(l->local, (std::vector<int64_t>{16, 4, 1}));
  EXPECT_EQ(l->global[0].eval({{"N", 10}, {"M", 3}}), 3);
  auto d = eval::opencl::parse_launch("  //kope: global=(N)\n");
  ASSERT_TRUE(d) << d.error().message;
  EXPECT_EQ(d->local, (std::vector<int64_t>{64, 1, 1}));  // the 1-D default
}

TEST(OpenClLaunch, RejectsBadHeadersNamingTheLine) {
  auto missing = eval::opencl::parse_launch("__kernel void kope_kernel() {}\n");
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.error().message.find("no launch geometry"), std::string::npos);
  auto bad = eval::opencl::parse_launch("// x\n// kope: global=(N\n");
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("line 2"), std::string::npos) << bad.error().message;
  auto big = eval::opencl::parse_launch("// kope: global=(N, N)\n// kope: local=(128, 64)\n");
  ASSERT_FALSE(big);
  EXPECT_NE(big.error().message.find("4096"), std::string::npos);
  auto mismatch = eval::opencl::parse_launch("// kope: global=(N, N)\n// kope: local=(64)\n");
  ASSERT_FALSE(mismatch);
  auto twice = eval::opencl::parse_launch("// kope: global=(N)\n// kope: global=(N)\n");
  ASSERT_FALSE(twice);
  EXPECT_NE(twice.error().message.find("twice"), std::string::npos);
}

TEST(OpenClLaunch, TableHasEveryCaseAndAttr) {
  spec::OpSpec op = test_op("scale_shift");
  auto l = eval::opencl::parse_launch("// kope: global=(cdiv(N, 2))\n");
  ASSERT_TRUE(l);
  auto t = eval::opencl::render_launch_table(op, *l);
  ASSERT_TRUE(t) << t.error().message;
  EXPECT_NE(t->find("tensors 2 2\n"), std::string::npos) << *t;
  EXPECT_NE(t->find("attr f64 0x1.4p+1 0\n"), std::string::npos) << *t;  // alpha = 2.5
  EXPECT_NE(t->find("case 17 9 1 1\n"), std::string::npos) << *t;        // cdiv(17, 2) = 9
  EXPECT_EQ(std::count(t->begin(), t->end(), '\n'), 4 + 3 + static_cast<long>(op.cases.size()));
  auto frac = eval::opencl::parse_launch("// kope: global=(N / 2)\n");
  ASSERT_TRUE(frac);
  auto bad = eval::opencl::render_launch_table(op, *frac);  // 17 / 2 is not whole
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("whole number"), std::string::npos);
}

TEST(OpenClLaunch, SignatureAndOptions) {
  spec::OpSpec op = test_op("scale_shift");
  EXPECT_EQ(eval::opencl::render_signature(op),
            "__kernel void kope_kernel(__global const double* x, __global const long* k, __global double* y, __global long* m, "
            "long N, double alpha, double beta, long shift)");
  EXPECT_EQ(eval::opencl::option_problem("-cl-fast-relaxed-math"), "");
  EXPECT_EQ(eval::opencl::option_problem("-DTILE=16"), "");
  EXPECT_NE(eval::opencl::option_problem("-I/etc"), "");
  EXPECT_NE(eval::opencl::option_problem("-D'x"), "");
}

TEST(OpenClBackends, ListedWithReasons) {
  auto list = eval::list_backends(test_profile());
  ASSERT_EQ(list.size(), 4u);
  EXPECT_EQ(list[0].name, "cpu");
  EXPECT_EQ(list[1].name, "opencl");
  EXPECT_EQ(list[2].name, "cuda");
  EXPECT_EQ(list[3].name, "ascend");
  for (const auto& b : list) {
    EXPECT_FALSE(b.detail.empty()) << b.name;
    if (b.usable) {
      EXPECT_TRUE(b.can_compile) << b.name;
    }
  }
  EXPECT_FALSE(list[3].usable);  // a definition only
  auto unknown = eval::make_evaluator("vulkan", test_profile());
  ASSERT_FALSE(unknown);
  EXPECT_EQ(unknown.error().kind, ErrorKind::usage);
}

util::RunResult kope_cli(const std::vector<std::string>& args) {
  util::RunOptions ro;
  ro.spawn.argv = {KOPE_EXE};
  ro.spawn.argv.insert(ro.spawn.argv.end(), args.begin(), args.end());
  ro.timeout = std::chrono::seconds(300);
  auto r = util::run(ro);
  EXPECT_TRUE(r) << r.error().message;
  return r ? *r : util::RunResult{};
}

TEST(OpenClCli, EvalWithBackendAndBackendsList) {
  (void)world();
  auto list = kope_cli({"backends", "--json"});
  ASSERT_TRUE(list.status.success()) << list.err;
  auto j = nlohmann::json::parse(list.out);
  ASSERT_EQ(j.size(), 4u);
  EXPECT_EQ(j[1]["name"], "opencl");
  if (!j[1]["usable"].get<bool>()) GTEST_SKIP() << "no usable OpenCL platform: " << j[1]["detail"].get<std::string>();
  fs::path corpus = fs::path(KOPE_SOURCE_DIR) / "tests" / "opencl" / "corpus";
  std::string vadd = (fs::path(KOPE_SOURCE_DIR) / "tests" / "ops" / "elementwise" / "vadd").string();
  auto ok = kope_cli({"eval", "--backend", "opencl", (corpus / "honest_vadd.cl").string(), "--op", vadd, "--json", "--no-time"});
  EXPECT_EQ(ok.status.code, 0) << ok.out << ok.err;
  auto r = nlohmann::json::parse(ok.out);
  EXPECT_EQ(r["verdict"], "correct");
  EXPECT_EQ(r["target"], "opencl-pocl-cpu");
  auto bad = kope_cli({"eval", "--backend", "opencl", (corpus / "wrong_result.cl").string(), "--op", vadd, "--no-time"});
  EXPECT_EQ(bad.status.code, 1);
  EXPECT_NE(bad.out.find("wrong_result"), std::string::npos) << bad.out;
  // A backend that cannot run here says why, as a usage-free error.
  if (!j[2]["usable"].get<bool>()) {
    auto cuda = kope_cli({"eval", "--backend", "cuda", (corpus / "honest_vadd.cl").string(), "--op", vadd});
    EXPECT_NE(cuda.status.code, 0);
    EXPECT_NE(cuda.err.find("the CUDA backend cannot run kernels here"), std::string::npos) << cuda.err;
  }
}

}  // namespace
}  // namespace kope::testing
