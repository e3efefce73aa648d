// The classifier of instructions above an ISA level, on literal `objdump -d -w` lines (binutils
// 2.40, AT&T syntax), with and without raw bytes.
#include "eval/isa_check.h"

#include <regex>

#include <gtest/gtest.h>

namespace kope::eval {
namespace {

constexpr IsaLevel v3 = IsaLevel::x86_64_v3;
constexpr IsaLevel v4 = IsaLevel::x86_64_v4;

// What gcc -O3 -march=x86-64-v3 emits (and scalar code) is within both levels.
TEST(IsaCheck, HonestAvx2CodeIsWithinBothLevels) {
  for (const char* line : {
           "   0:\tc5 fc 10 04 07       \tvmovups (%rdi,%rax,1),%ymm0",
           "   5:\tc5 fc 58 04 06       \tvaddps (%rsi,%rax,1),%ymm0,%ymm0",
           "   a:\tc4 e2 7d 18 05 00 00 00 00 \tvbroadcastss 0x0(%rip),%ymm0",
           "  13:\tc4 e2 75 b8 c2       \tvfmadd231ps %ymm2,%ymm1,%ymm0",
           "  18:\tc4 e2 7d 58 c0       \tvpbroadcastd %xmm0,%ymm0",
           "  1d:\tc4 e3 7d 39 c1 01    \tvextracti128 $0x1,%ymm0,%xmm1",
           "  23:\tc4 e2 7d 13 c0       \tvcvtph2ps %xmm0,%ymm0",
           "  28:\tc4 e3 7d 1d c0 00    \tvcvtps2ph $0x0,%ymm0,%xmm0",
           "  2e:\tc4 e2 f5 90 04 c8    \tvpgatherdq %ymm1,(%rax,%xmm1,8),%ymm0",
           "  34:\tc5 7c 28 ff          \tvmovaps %ymm7,%ymm15",
           "  38:\tc4 e2 f8 f2 c1       \tandn   %rcx,%rax,%rax",
           "  3d:\tf3 48 0f bc c0       \ttzcnt  %rax,%rax",
           "  42:\tc5 f8 77             \tvzeroupper",
           "  45:\te8 00 00 00 00       \tcall   4a <kope_kernel+0x4a>",
           "  4a:\tf3 0f 1e fa          \tendbr64",
           "  4e:\t2e 0f 1f 84 00 00 00 00 00 \tcs nopw 0x0(%rax,%rax,1)",
           "  57:\tvmovdqu %ymm1,(%rdx)",
           "0000000000000000 <kope_kernel._omp_fn.0>:",
       }) {
    EXPECT_EQ(isa_extension_above(line, v3), "") << line;
    EXPECT_EQ(isa_extension_above(line, v4), "") << line;
  }
}

// AVX-512 F/BW/CD/DQ/VL is above x86-64-v3 and within x86-64-v4, in every form: zmm, mask
// registers (also in VEX-encoded kmov), xmm16-31, and EVEX encodings that name only AVX2's
// registers (seen in the raw bytes).
TEST(IsaCheck, Avx512IsAboveV3AndWithinV4) {
  for (const char* line : {
           "   0:\t62 f1 74 48 58 c0    \tvaddps %zmm0,%zmm1,%zmm0",
           "   6:\tvaddps %zmm0,%zmm1,%zmm0",
           "   c:\t62 f1 6c 29 58 d9    \tvaddps %ymm1,%ymm2,%ymm3{%k1}",
           "  12:\tc5 f8 92 c8          \tkmovw  %eax,%k1",
           "  16:\t62 a1 7c 28 58 c1    \tvaddps %ymm17,%ymm0,%ymm0",
           "  1c:\t62 f1 6c 28 58 d9    \t{evex} vaddps %ymm1,%ymm2,%ymm3",
           "  22:\t62 f3 6d 28 25 d9 96 \tvpternlogd $0x96,%ymm1,%ymm2,%ymm3",
           "  29:\t62 f1 fe 28 6f d1    \tvmovdqu64 %ymm1,%ymm2",
           "  2f:\t67 62 f1 74 48 58 10 \tvaddps (%eax),%zmm1,%zmm2",
           "  36:\t64 62 f1 74 48 58 10 \tvaddps %fs:(%rax),%zmm1,%zmm2",
           "  3d:\t62                   \t(bad)",
           "  3e:\t62 f1 7d 48 11 04 02 \tvmovups %zmm0,(%rdx,%rax,1)",
       }) {
    EXPECT_EQ(isa_extension_above(line, v3), "AVX-512") << line;
    EXPECT_EQ(isa_extension_above(line, v4), "") << line;
    EXPECT_EQ(isa_extension_above(line, IsaLevel::native), "") << line;
  }
}

// Extensions beyond AVX-512 F/BW/CD/DQ/VL are above both levels, VEX-encoded ones included.
TEST(IsaCheck, ExtensionsBeyondV4AreAboveBothLevels) {
  struct Case {
    const char* line;
    const char* extension;
  };
  for (const Case& c : std::initializer_list<Case>{
           {"  11:\tc4 e2 6d 50 d9       \t{vex} vpdpbusd %ymm1,%ymm2,%ymm3", "VNNI"},
           {"  16:\t62 f2 6d 48 50 d9    \tvpdpbusd %zmm1,%zmm2,%zmm3", "VNNI"},
           {"  1c:\tvpdpwssds %zmm1,%zmm2,%zmm3", "VNNI"},
           {"  34:\t62 f2 ed 28 b4 d9    \tvpmadd52luq %ymm1,%ymm2,%ymm3", "IFMA"},
           {"  3f:\t62 f2 7e 28 72 d1    \tvcvtneps2bf16 %ymm1,%xmm2", "BF16"},
           {"  40:\tvcvtne2ps2bf16 %zmm1,%zmm2,%zmm3", "BF16"},
           {"  b7:\t62 f2 6e 28 52 d9    \tvdpbf16ps %ymm1,%ymm2,%ymm3", "BF16"},
           {"  4a:\t62 f5 6c 48 58 d9    \tvaddph %zmm1,%zmm2,%zmm3", "FP16"},
           {"  50:\t62 f5 6e 08 58 d9    \tvaddsh %xmm1,%xmm2,%xmm3", "FP16"},
           {"  51:\tvfmadd231ph %zmm1,%zmm2,%zmm3", "FP16"},
           {"  52:\tvcvtph2psx %xmm1,%ymm2", "FP16"},
           {"  53:\tvcvtsi2shl %eax,%xmm1,%xmm2", "FP16"},
           {"  9a:\t62 f2 6d 28 8d d9    \tvpermb %ymm1,%ymm2,%ymm3", "VBMI"},
           {"  a0:\t62 f2 6d 28 53 d9    \tvpshldvd %ymm1,%ymm2,%ymm3", "VBMI"},
           {"  8e:\t62 f2 7d 28 55 d1    \tvpopcntd %ymm1,%ymm2", "VPOPCNTDQ/BITALG"},
           {"  94:\t62 f2 6d 28 8f c9    \tvpshufbitqmb %ymm1,%ymm2,%k1", "VPOPCNTDQ/BITALG"},
           {"  88:\t62 f2 6f 48 68 d1    \tvp2intersectd %zmm1,%zmm2,%k2", "VP2INTERSECT"},
           {"  73:\tc4 e2 7b 4b 0c 18    \ttileloadd (%rax,%rbx,1),%tmm1", "AMX"},
           {"  79:\tc4 e2 63 5e ca       \ttdpbssd %tmm1,%tmm2,%tmm3", "AMX"},
           {"  7e:\tc4 e2 78 49 00       \tldtilecfg (%rax)", "AMX"},
           {"  a6:\tc4 e3 ed ce d9 00    \tvgf2p8affineqb $0x0,%ymm1,%ymm2,%ymm3", "AES/PCLMUL/GFNI/SHA/SM"},
           {"  ac:\tc4 e2 6d dc d9       \tvaesenc %ymm1,%ymm2,%ymm3", "AES/PCLMUL/GFNI/SHA/SM"},
           {"  b1:\tc4 e3 6d 44 d9 00    \tvpclmullqlqdq %ymm1,%ymm2,%ymm3", "AES/PCLMUL/GFNI/SHA/SM"},
           {"  b2:\t0f 38 cb c1          \tsha256rnds2 %xmm0,%xmm1,%xmm0", "AES/PCLMUL/GFNI/SHA/SM"},
           {"  b3:\tc4 e3 f5 68 c2 30    \tvfmaddps %ymm3,%ymm2,%ymm1,%ymm0", "FMA4"},
       }) {
    EXPECT_EQ(isa_extension_above(c.line, v3), c.extension) << c.line;
    EXPECT_EQ(isa_extension_above(c.line, v4), c.extension) << c.line;
  }
}

// The build script's grep filter keeps exactly the lines the classifier flags (and function
// headers, which it reads for the names); natively there is none.
TEST(IsaCheck, FilterAgreesWithTheClassifier) {
  EXPECT_EQ(isa_disassembly_filter(IsaLevel::native), "");
  for (IsaLevel level : {v3, v4}) {
    std::regex filter(isa_disassembly_filter(level), std::regex::extended);
    for (const char* line : {
             "   0:\t62 f1 74 48 58 c0    \tvaddps %zmm0,%zmm1,%zmm0",
             "  12:\tc5 f8 92 c8          \tkmovw  %eax,%k1",
             "  22:\t62 f3 6d 28 25 d9 96 \tvpternlogd $0x96,%ymm1,%ymm2,%ymm3",
             "  11:\tc4 e2 6d 50 d9       \t{vex} vpdpbusd %ymm1,%ymm2,%ymm3",
             "  4a:\t62 f5 6c 48 58 d9    \tvaddph %zmm1,%zmm2,%zmm3",
             "  73:\tc4 e2 7b 4b 0c 18    \ttileloadd (%rax,%rbx,1),%tmm1",
             "   5:\tc5 fc 58 04 06       \tvaddps (%rsi,%rax,1),%ymm0,%ymm0",
             "  23:\tc4 e2 7d 13 c0       \tvcvtph2ps %xmm0,%ymm0",
             "  28:\tc4 e3 7d 1d c0 00    \tvcvtps2ph $0x0,%ymm0,%xmm0",
             "  45:\te8 00 00 00 00       \tcall   4a <vpdpbusd_emulated+0x4a>",
         }) {
      bool kept = std::regex_search(std::string(line), filter);
      EXPECT_EQ(kept, !isa_extension_above(line, level).empty()) << isa_level_name(level) << ": " << line;
    }
  }
}

TEST(IsaCheck, MessageNamesTheLevelTheInstructionsAndTheirFunctions) {
  std::string disassembly =
      "0000000000000000 <kope_kernel>:\n"
      "   6:\t62 f1 7c 48 10 04 07 \tvmovups (%rdi,%rax,1),%zmm0\n"
      "   d:\t62 f1 7c 48 58 04 06 \tvaddps (%rsi,%rax,1),%zmm0,%zmm0\n"
      "  14:\t62 f1 7c 48 11 04 02 \tvmovups %zmm0,(%rdx,%rax,1)\n"
      "  1b:\t62 f1 7c 48 10 04 07 \tvmovups (%rdi,%rax,1),%zmm0\n"
      "0000000000000040 <_ZL6helperPKfS0_Pf>:\n"
      "  44:\tc4 e2 6d 50 d9       \t{vex} vpdpbusd %ymm1,%ymm2,%ymm3\n";
  auto found = instructions_above_level(disassembly, v3);
  ASSERT_EQ(found.size(), 5u);
  EXPECT_EQ(found[0].instruction, "vmovups (%rdi,%rax,1),%zmm0");
  EXPECT_EQ(found[0].function, "kope_kernel");
  EXPECT_EQ(found[4].extension, "VNNI");
  EXPECT_EQ(found[4].function, "helper(float const*, float const*, float*)");
  std::string m = above_level_message(found, v3, {"-O3", "-march=x86-64-v3", "-mtune=native"});
  EXPECT_NE(m.find("AVX-512 and VNNI instructions (vmovups (%rdi,%rax,1),%zmm0, vaddps (%rsi,%rax,1),%zmm0,%zmm0, "
                   "vmovups %zmm0,(%rdx,%rax,1), and 1 more) in kope_kernel, helper(float const*, float const*, float*) "
                   "are above the target level x86-64-v3"),
            std::string::npos)
      << m;
  EXPECT_NE(m.find("#pragma GCC target, target attributes and inline asm cannot lift a kernel above the level"), std::string::npos) << m;
  EXPECT_NE(m.find("-march=x86-64-v3 -mtune=native"), std::string::npos) << m;
  EXPECT_NE(above_level_diagnostics(found).find("vpdpbusd %ymm1,%ymm2,%ymm3 in helper("), std::string::npos);

  // Under x86-64-v4 only the VNNI instruction is above the level; natively nothing is.
  auto v4_found = instructions_above_level(disassembly, v4);
  ASSERT_EQ(v4_found.size(), 1u);
  EXPECT_EQ(v4_found[0].extension, "VNNI");
  EXPECT_TRUE(instructions_above_level(disassembly, IsaLevel::native).empty());
  EXPECT_EQ(instructions_above_level(disassembly, v3, 2).size(), 2u);
}

}  // namespace
}  // namespace kope::eval
