// Diagnostics for the model and the flags it may add.
#include "eval/cpu/compile.h"

#include <gtest/gtest.h>

namespace kope::eval {
namespace {

TEST(Diagnostics, ScrubsPathsAndPutsErrorsFirst) {
  std::string raw =
      "/tmp/kope-cc-AbC123/kernel.cpp: In function 'void kope_kernel(const float*, float*, int64_t)':\n"
      "/tmp/kope-cc-AbC123/kernel.cpp:3:7: warning: unused variable 'q' [-Wunused-variable]\n"
      "    3 |   int q;\n"
      "      |       ^\n"
      "/build/kernel.cpp:5:3: error: 'foo' was not declared in this scope\n"
      "    5 |   foo();\n"
      "      |   ^~~\n"
      "/usr/bin/ld: /tmp/ccAbCdEf.o: in function `x':\n";
  std::string out = scrub_diagnostics(raw, {"/build", "/tmp/kope-cc-AbC123"});
  EXPECT_EQ(out.find("/tmp/kope-cc-"), std::string::npos) << out;
  EXPECT_EQ(out.find("/build/"), std::string::npos) << out;
  EXPECT_NE(out.find("<temporary file>"), std::string::npos) << out;
  size_t err = out.find("kernel.cpp:5:3: error");
  size_t warn = out.find("warning: unused variable");
  ASSERT_NE(err, std::string::npos) << out;
  ASSERT_NE(warn, std::string::npos) << out;
  EXPECT_LT(err, warn) << out;
  // The error keeps its source excerpt and caret lines.
  EXPECT_NE(out.find("  foo();"), std::string::npos);
}

TEST(Diagnostics, TrimsToLinesAndBytes) {
  std::string raw;
  for (int i = 0; i < 500; ++i) raw += "kernel.cpp:" + std::to_string(i + 1) + ":1: error: bad thing number " + std::to_string(i) + "\n";
  std::string out = scrub_diagnostics(raw, {}, 20, 100000);
  EXPECT_NE(out.find("bad thing number 0\n"), std::string::npos);
  EXPECT_EQ(out.find("bad thing number 25\n"), std::string::npos);
  EXPECT_NE(out.find("[... 480 more lines]"), std::string::npos) << out;
  std::string small = scrub_diagnostics(raw, {}, 1000, 300);
  EXPECT_LE(small.size(), 300u + 40u);
}

// GCC 12's error for an AVX-512 intrinsic under -march=x86-64-v3 becomes a message naming the
// instruction set, the intrinsics and the level.
TEST(Diagnostics, NamesInstructionsAboveTheIsaLevel) {
  std::string diag =
      "In file included from /usr/lib/gcc/x86_64-linux-gnu/12/include/immintrin.h:49,\n"
      "                 from kernel.cpp:1:\n"
      "/usr/lib/gcc/x86_64-linux-gnu/12/include/avx512fintrin.h:12598:1: error: inlining failed in call to "
      "‘always_inline’ ‘__m512 _mm512_add_ps(__m512, __m512)’: target specific "
      "option mismatch\n"
      "kernel.cpp:2:85: note: called from here\n"
      "/usr/lib/gcc/x86_64-linux-gnu/12/include/avx512fintrin.h:6331:1: error: inlining failed in call to 'always_inline' "
      "'__m512 _mm512_loadu_ps(const void*)': target specific option mismatch\n";
  Toolchain tc;
  tc.flags = {"-O3", "-march=x86-64-v3", "-mtune=native", "-fopenmp"};
  std::string m = isa_mismatch_message(diag, tc);
  EXPECT_EQ(m,
            "the kernel uses AVX-512 instructions (avx512f: _mm512_add_ps, _mm512_loadu_ps) that the target level x86-64-v3 "
            "does not have (kernels are compiled with -O3 -march=x86-64-v3 -mtune=native -fopenmp): use only the ISA "
            "extensions the hardware section lists");
  tc.flags = {"-O3", "-march=native"};
  EXPECT_NE(isa_mismatch_message(diag, tc).find("that the compile flags (-O3 -march=native) do not enable"), std::string::npos);
  EXPECT_EQ(isa_mismatch_message("kernel.cpp:5:3: error: 'foo' was not declared in this scope\n", tc), "");
  std::string clang =
      "kernel.cpp:9:16: error: always_inline function '_mm512_add_ps' requires target feature 'avx512f', but would be "
      "inlined into function 'kope_kernel' that is compiled without support for 'avx512f'\n";
  EXPECT_NE(isa_mismatch_message(clang, tc).find("AVX-512 instructions (avx512f: _mm512_add_ps)"), std::string::npos);
}

TEST(ExtraFlags, OnlyCodeGenerationFlags) {
  for (const char* ok : {"-O2", "-ffast-math", "-funroll-loops", "-mavx2", "-DBLOCK=64", "-Wall", "-g"}) {
    EXPECT_EQ(extra_flag_problem(ok), "") << ok;
  }
  for (const char* bad : {"-Wl,-rpath,/x", "-fplugin=/usr/lib/x.so", "-include/etc/passwd", "-I/etc", "-o", "@/etc/passwd",
                          "-lopenblas", "-save-temps", "-B/tmp", "-specs=/x", "-fdump-tree-all", "-DX=/etc/passwd", "-std=c++20", ""}) {
    EXPECT_NE(extra_flag_problem(bad), "") << bad;
  }
}

}  // namespace
}  // namespace kope::eval
