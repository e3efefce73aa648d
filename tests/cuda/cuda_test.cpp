// The CUDA backend. Without a GPU: every corpus kernel is really built by nvcc in the compile
// sandbox and inspected, and must reach the build outcome its `// build:` header names (ok,
// compile_error, rejected); the GPU check script passes `bash -n` and its dry run. With a GPU
// (the `gpu` label, kope_cuda_gpu_tests): every kernel is evaluated and must get its
// `// expect:` verdict; without one those tests skip, saying why.
#include <algorithm>
#include <fstream>
#include <map>
#include <regex>

#include <gtest/gtest.h>

#include "../adversarial/harness.h"
#include "eval/backend.h"
#include "eval/cuda/cuda.h"
#include "util/fs.h"
#include "util/subprocess.h"

namespace kope::testing {
namespace {

using Entry = CorpusEntry;

std::vector<Entry> corpus() { return read_corpus(fs::path(KOPE_SOURCE_DIR) / "tests" / "cuda" / "corpus", ".cu"); }

#ifndef KOPE_CUDA_GPU_TESTS
const char* status_name(eval::BuildOutcome::Status s) {
  switch (s) {
    case eval::BuildOutcome::Status::ok: return "ok";
    case eval::BuildOutcome::Status::compile_error: return "compile_error";
    case eval::BuildOutcome::Status::rejected: return "rejected";
  }
  return "?";
}

class CudaBuild : public ::testing::TestWithParam<Entry> {};

TEST_P(CudaBuild, ReachesItsBuildOutcome) {
  const Entry& e = GetParam();
  (void)world();
  auto backend = eval::make_cuda_backend(test_profile(), test_options());
  if (!backend) GTEST_SKIP() << "the CUDA backend cannot build here: " << backend.error().message;
  ASSERT_TRUE(e.headers.contains("build")) << e.path;
  auto source = util::read_file(e.path);
  ASSERT_TRUE(source);
  spec::OpSpec op = test_op(e.headers.at("op"));
  auto b = (*backend)->build_candidate(op, *source, {});
  ASSERT_TRUE(b) << b.error().message;
  EXPECT_STREQ(status_name(b->status), e.headers.at("build").c_str()) << b->message << "\n" << b->diagnostics;
  if (e.headers.contains("message") && b->status != eval::BuildOutcome::Status::ok) {
    EXPECT_NE((b->message + "\n" + b->diagnostics).find(e.headers.at("message")), std::string::npos) << b->message << "\n" << b->diagnostics;
  }
  if (b->status == eval::BuildOutcome::Status::ok) {
    EXPECT_TRUE(fs::exists(b->shared_object));
  }
  EXPECT_EQ(machine_damage(), "");
}

INSTANTIATE_TEST_SUITE_P(Corpus, CudaBuild, ::testing::ValuesIn(corpus()),
                         [](const ::testing::TestParamInfo<Entry>& i) { return i.param.name; });

TEST(CudaToolkit, TargetAndProfile) {
  const auto& t = eval::cuda::toolkit();
  if (!t.problem.empty()) GTEST_SKIP() << t.problem;
  EXPECT_FALSE(t.arch.empty());
  EXPECT_NE(t.toolchain_id().find(t.arch), std::string::npos);
  eval::cuda::Gpu h200{"NVIDIA H200", "9.0", 141ull << 30};
  HardwareProfile p = eval::cuda::gpu_profile(h200, "sm_90");
  EXPECT_EQ(p.target.str(), "cuda-sm90");
  EXPECT_DOUBLE_EQ(p.peak_gbps, 4800);
  // An unknown part gets a generous peak, so the floor stays far below any honest kernel.
  EXPECT_GE(eval::cuda::gpu_profile({"Some Future GPU", "12.0", 0}, "sm_120").peak_gbps, 10000);
}

TEST(GpuCheckScript, SyntaxAndDryRun) {
  fs::path script = fs::path(KOPE_SOURCE_DIR) / "scripts" / "gpu_check.sh";
  ASSERT_TRUE(fs::exists(script));
  util::RunOptions syntax;
  syntax.spawn.argv = {"/bin/bash", "-n", script.string()};
  syntax.timeout = std::chrono::seconds(30);
  auto s = util::run(syntax);
  ASSERT_TRUE(s);
  EXPECT_TRUE(s->status.success()) << s->err;
  util::RunOptions dry;
  dry.spawn.argv = {"/bin/bash", script.string(), "--dry-run", "--build-dir", KOPE_BINARY_DIR};
  dry.timeout = std::chrono::seconds(120);
  auto d = util::run(dry);
  ASSERT_TRUE(d);
  EXPECT_TRUE(d->status.success()) << d->out << d->err;
  // Every corpus kernel is planned, with the verdict it must get.
  for (const auto& e : corpus()) EXPECT_NE(d->out.find(e.path.filename().string()), std::string::npos) << d->out;
  EXPECT_NE(d->out.find("dry run"), std::string::npos) << d->out;
  // So is every op with a GPU baseline, with its library, and the bench and run steps.
  auto ops = spec::select_ops({"all"}, fs::path(KOPE_SOURCE_DIR) / "ops");
  ASSERT_TRUE(ops) << ops.error().message;
  for (const auto& op : *ops) {
    if (!op.gpu_library_path) continue;
    EXPECT_NE(d->out.find(op.dir.string().substr(std::string(KOPE_SOURCE_DIR).size() + 1)), std::string::npos) << op.name << "\n" << d->out;
  }
  for (const char* step : {"bench --backend cuda", "fake_llm_server.py", "run --backend cuda"}) {
    EXPECT_NE(d->out.find(step), std::string::npos) << step << "\n" << d->out;
  }
}

#else  // KOPE_CUDA_GPU_TESTS: evaluation on a GPU

class CudaEval : public ::testing::TestWithParam<Entry> {};

TEST_P(CudaEval, GetsItsVerdict) {
  const Entry& e = GetParam();
  (void)world();
  static auto ev = eval::make_evaluator("cuda", test_profile(), test_options());
  if (!ev) GTEST_SKIP() << "no GPU here, CUDA kernels are only compiled: " << ev.error().message;
  auto source = util::read_file(e.path);
  ASSERT_TRUE(source);
  spec::OpSpec op = test_op(e.headers.at("op"));
  auto r = (*ev)->evaluate(op, *source, test_eval_options(true));
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(eval::verdict_name(r->verdict), e.headers.at("expect")) << r->message << "\n" << r->diagnostics;
  if (e.headers.contains("message")) {
    EXPECT_NE((r->message + r->diagnostics).find(e.headers.at("message")), std::string::npos) << r->message;
  }
  if (r->verdict == eval::Verdict::correct && !r->timing.empty()) {
    EXPECT_TRUE(r->timing[0].wall_us.has_value());
    EXPECT_LE(r->timing[0].median_us, *r->timing[0].wall_us * 1.05 + 100);
  }
  EXPECT_EQ(machine_damage(), "");
}

INSTANTIATE_TEST_SUITE_P(Corpus, CudaEval, ::testing::ValuesIn(corpus()),
                         [](const ::testing::TestParamInfo<Entry>& i) { return i.param.name; });

#endif

}  // namespace
}  // namespace kope::testing
