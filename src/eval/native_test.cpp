#include "eval/native.h"

#include <algorithm>
#include <cstdlib>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "util/fs.h"

namespace kope::eval {
namespace {

const char* k_spec = R"TOML(name = "scale"
category = "elementwise"
level = 1
summary = "y = f * x"
dims = ["N"]
inputs  = [{ name = "x", dtype = "f32", shape = ["N"] }]
outputs = [{ name = "y", dtype = "f32", shape = ["N"] }]
flops = "N"
bytes = "8*N"
tolerance = { atol = 0, rtol = 0 }
cases = [{ N = 4096 }]
)TOML";

// Regression: trusted kernels that use OpenMP are loaded, called and unloaded one after
// another (kope_reference_times, the suite checks). Unloading the only kernel that pulled in
// libgomp used to unload libgomp under its live worker threads and crash the process.
TEST(NativeKernel, OpenMpKernelsLoadOneAfterAnother) {
  auto op = spec::parse_op(k_spec, "scale/op.toml", false);
  ASSERT_TRUE(op) << op.error().message;
  auto tc = cpu_toolchain();
  ASSERT_TRUE(tc) << tc.error().message;
  auto tmp = util::TempDir::create("kope-native-test-");
  ASSERT_TRUE(tmp) << tmp.error().message;
  std::vector<float> x(4096), y(4096);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i);
  for (int factor : {2, 3, 5}) {
    SCOPED_TRACE(factor);
    auto src = tmp->path() / ("scale" + std::to_string(factor) + ".cpp");
    std::string code = "#include <cstdint>\n"
                       "extern \"C\" void kope_kernel(const float* x, float* y, int64_t N) {\n"
                       "#pragma omp parallel for\n"
                       "  for (int64_t i = 0; i < N; ++i) y[i] = " + std::to_string(factor) + " * x[i];\n"
                       "}\n";
    ASSERT_TRUE(util::write_file_atomic(src, code));
    auto so = build_trusted(*op, src, *tc);
    ASSERT_TRUE(so) << so.error().message;
    auto kernel = NativeKernel::load(*so);
    ASSERT_TRUE(kernel) << kernel.error().message;
    void* buffers[] = {x.data(), y.data()};
    const int64_t dims[] = {4096};
    kernel->call(buffers, dims);
    EXPECT_EQ(y[4095], static_cast<float>(factor) * 4095.0f);
  }
}

// Loading a trusted kernel pins OpenBLAS to the kernels this CPU's ISA supports unless the
// user chose a core type (OpenBLAS 0.3.21 misdetects newer CPUs as "Prescott").
TEST(NativeKernel, PinsTheOpenBlasCoreTypeBeforeLoading) {
  const char* before = std::getenv("OPENBLAS_CORETYPE");
  const std::string user_choice = before ? before : "";
  auto op = spec::parse_op(k_spec, "scale/op.toml", false);
  ASSERT_TRUE(op) << op.error().message;
  auto tc = cpu_toolchain();
  ASSERT_TRUE(tc) << tc.error().message;
  auto tmp = util::TempDir::create("kope-native-test-");
  ASSERT_TRUE(tmp) << tmp.error().message;
  auto src = tmp->path() / "copy.cpp";
  ASSERT_TRUE(util::write_file_atomic(
      src, "#include <cstdint>\nextern \"C\" void kope_kernel(const float* x, float* y, int64_t N) {\n"
           "  for (int64_t i = 0; i < N; ++i) y[i] = x[i];\n}\n"));
  auto so = build_trusted(*op, src, *tc);
  ASSERT_TRUE(so) << so.error().message;
  ASSERT_TRUE(NativeKernel::load(*so));
  const char* after = std::getenv("OPENBLAS_CORETYPE");
  if (!user_choice.empty()) {
    ASSERT_NE(after, nullptr);
    EXPECT_EQ(std::string(after), user_choice);  // a user's choice is kept
  } else if (auto expected = openblas_coretype_for_host()) {
    ASSERT_NE(after, nullptr);
    EXPECT_EQ(std::string(after), *expected);
  } else {
    EXPECT_EQ(after, nullptr);
  }
}

// The hardware guide lists what the compile flags enable, asked of the compiler itself.
TEST(CompilerTarget, ListsEveryExtensionTheFlagsEnable) {
  Toolchain tc;
  tc.compiler = "g++";
  tc.flags = {"-O3", "-march=sapphirerapids"};
  auto t = compiler_target(tc);
  ASSERT_TRUE(t) << t.error().message;
  for (const char* ext : {"avx2", "fma", "avx512f", "avx512cd", "avx512bw", "avx512dq", "avx512vl", "avx512ifma",
                          "avx512vbmi", "avx512vbmi2", "avx512bitalg", "avx512vpopcntdq", "avx512bf16", "avx512vnni",
                          "avx512fp16", "amx-tile"}) {
    EXPECT_NE(std::find(t->isa_extensions.begin(), t->isa_extensions.end(), ext), t->isa_extensions.end()) << ext;
  }
  EXPECT_EQ(t->tune, "sapphirerapids");
  tc.flags = {"-O3", "-march=x86-64"};
  auto base = compiler_target(tc);
  ASSERT_TRUE(base) << base.error().message;
  EXPECT_EQ(std::find(base->isa_extensions.begin(), base->isa_extensions.end(), "avx2"), base->isa_extensions.end());
  EXPECT_NE(std::find(base->isa_extensions.begin(), base->isa_extensions.end(), "sse2"), base->isa_extensions.end());
  tc.compiler = "/nonexistent/g++";
  EXPECT_FALSE(compiler_target(tc));
}

TEST(CompilerTarget, ParsesPredefinedMacros) {
  auto t = compiler_target_from_macros("#define __AVX512F__ 1\n#define __GNUC__ 12\n#define __tune_znver4__ 1\n#define __AVX2__ 1\n");
  EXPECT_EQ(t.isa_extensions, (std::vector<std::string>{"avx2", "avx512f"}));
  EXPECT_EQ(t.tune, "znver4");
}

}  // namespace
}  // namespace kope::eval
