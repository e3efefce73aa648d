// The GPU vendor baselines and the GPU roofline probe. Without a GPU (label integration): every
// suite op's gpu_library.cu is built exactly as the CUDA backend builds it for an evaluation
// (build_trusted_baseline: nvcc, the trusted host shim, the entry shim, linked with cuBLASLt,
// cuBLAS and cuDNN) and exports what kope-runner looks up; the probe compiles. Skipped without
// nvcc. With a GPU (label gpu, kope_cuda_gpu_tests): every baseline is verified against the
// op's reference and timed by the device clock through `measure_baselines("cuda", ...)`, and
// the probe's measurement is plausible.
#include <ostream>
#include <set>

#include <gtest/gtest.h>

#include "../adversarial/harness.h"
#include "eval/backend.h"
#include "eval/cuda/cuda.h"
#include "eval/cuda/gpu_probe.h"
#include "eval/elf.h"
#include "util/fs.h"

namespace kope::spec {
// Test parameters are printed by name, not as the bytes of an OpSpec.
[[maybe_unused]] static void PrintTo(const OpSpec& op, std::ostream* os) { *os << op.name; }
}  // namespace kope::spec

namespace kope::testing {
namespace {

std::vector<spec::OpSpec> ops_with_gpu_baselines() {
  std::vector<spec::OpSpec> out;
  auto ops = spec::select_ops({"all"}, fs::path(KOPE_SOURCE_DIR) / "ops");
  if (!ops) return out;
  for (auto& op : *ops) {
    if (op.gpu_library_path) out.push_back(std::move(op));
  }
  return out;
}

#ifndef KOPE_CUDA_GPU_TESTS

class GpuBaselineBuild : public ::testing::TestWithParam<spec::OpSpec> {};

TEST_P(GpuBaselineBuild, BuildsAsTheBackendBuildsIt) {
  const spec::OpSpec& op = GetParam();
  (void)world();
  const auto& tk = eval::cuda::toolkit();
  if (!tk.problem.empty()) GTEST_SKIP() << tk.problem;
  auto so = eval::cuda::build_trusted_baseline(op, *op.gpu_library_path);
  ASSERT_TRUE(so) << so.error().message;
  ASSERT_TRUE(fs::exists(*so));
  // What kope-runner looks up in a trusted host object, and the library it reports.
  auto names = eval::elf::exported_names(*so);
  ASSERT_TRUE(names) << names.error().message;
  std::set<std::string> exported(names->begin(), names->end());
  for (const char* sym : {"kope_entry", "kope_host_prepare", "kope_host_map", "kope_host_counters", "kope_host_describe", "kope_kernel"}) {
    EXPECT_TRUE(exported.contains(sym)) << op.name << " lacks " << sym;
  }
  // A second build is the cached one.
  auto again = eval::cuda::build_trusted_baseline(op, *op.gpu_library_path);
  ASSERT_TRUE(again);
  EXPECT_EQ(*again, *so);
}

INSTANTIATE_TEST_SUITE_P(Suite, GpuBaselineBuild, ::testing::ValuesIn(ops_with_gpu_baselines()),
                         [](const ::testing::TestParamInfo<spec::OpSpec>& i) { return i.param.name; });

TEST(GpuProbeBuild, Compiles) {
  const auto& tk = eval::cuda::toolkit();
  if (!tk.problem.empty()) GTEST_SKIP() << tk.problem;
  auto dir = util::TempDir::create("kope-gpu-probe-test-");
  ASSERT_TRUE(dir);
  auto exe = eval::cuda::build_gpu_probe(tk, dir->path());
  ASSERT_TRUE(exe) << exe.error().message;
  EXPECT_TRUE(fs::exists(*exe));
}

#else  // KOPE_CUDA_GPU_TESTS

bool have_gpu() { return eval::cuda_backend_info().usable; }

TEST(GpuProbeRun, MeasuresPlausibleFigures) {
  if (!have_gpu()) GTEST_SKIP() << "no GPU here: " << eval::cuda_backend_info().detail;
  auto m = eval::cuda::run_gpu_probe(eval::cuda::toolkit());
  ASSERT_TRUE(m) << m.error().message;
  EXPECT_GT(m->sms, 0);
  EXPECT_GT(m->fp32_gflops, 1000);
  EXPECT_GT(m->hbm_gbps(), 100);
  // A table entry, when there is one, is the spec sheet: the probe reaches most of it.
  HardwareProfile table = eval::cuda::gpu_profile(eval::cuda::toolkit().gpus.front(), eval::cuda::toolkit().arch);
  if (table.peak_gflops < 200000) {
    EXPECT_GT(m->fp32_gflops, 0.6 * table.peak_gflops);
    EXPECT_GT(m->hbm_gbps(), 0.5 * table.peak_gbps);
  }
}

class GpuBaselineRun : public ::testing::TestWithParam<spec::OpSpec> {};

TEST_P(GpuBaselineRun, VerifiedAndTimedOnTheDevice) {
  const spec::OpSpec& op = GetParam();
  (void)world();
  if (!have_gpu()) GTEST_SKIP() << "no GPU here: " << eval::cuda_backend_info().detail;
  eval::EvalOptions timing;
  timing.max_seconds_per_case = 1;
  timing.target_ci = 0.05;
  auto r = eval::measure_baselines("cuda", test_profile(), op, test_options(), timing);
  ASSERT_TRUE(r) << r.error().message;
  for (const auto& cb : *r) {
    EXPECT_TRUE(cb.library_problem.empty()) << op.name << " " << cb.label << ": " << cb.library_problem;
    ASSERT_TRUE(cb.library) << op.name << " " << cb.label;
    EXPECT_GT(cb.library->median_us, 0);
    ASSERT_TRUE(cb.library_config);
    EXPECT_EQ(cb.library_config->library, op.gpu_library_name);
  }
}

INSTANTIATE_TEST_SUITE_P(Suite, GpuBaselineRun, ::testing::ValuesIn(ops_with_gpu_baselines()),
                         [](const ::testing::TestParamInfo<spec::OpSpec>& i) { return i.param.name; });

#endif

}  // namespace
}  // namespace kope::testing
