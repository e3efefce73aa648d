// The roofline note, the library configuration a baseline records and its "forced" marking.
// Tests leave the environment's OpenBLAS/oneDNN variables as they are: expectations follow
// whatever the environment sets, and an explicit configuration goes only to a runner a test
// starts.
#include "eval/library.h"

#include <cstdlib>

#include <gtest/gtest.h>

#include "eval/native.h"
#include "eval/sandbox.h"
#include "eval/session.h"
#include "util/strings.h"

namespace kope::eval {
namespace {

CaseTiming timing(double median_us, double ci95_us) {
  CaseTiming t;
  t.case_index = 3;
  t.label = "N=4096";
  t.median_us = median_us;
  t.ci95_us = ci95_us;
  return t;
}

spec::OpSpec scale_op(const char* dtype) {
  std::string text = fmt::format(R"(name = "scale"
category = "elementwise"
level = 1
summary = "y = 2 x"
dims = ["N"]
inputs  = [{{ name = "x", dtype = "{0}", shape = ["N"] }}]
outputs = [{{ name = "y", dtype = "{0}", shape = ["N"] }}]
flops = "N"
bytes = "16*N"
tolerance = {{ atol = 0, rtol = 0 }}
cases = [{{ N = 65536, timed = true }}]
)", dtype);
  auto op = spec::parse_op(text, "scale/op.toml", false);
  EXPECT_TRUE(op) << op.error().message;
  return *op;
}

HardwareProfile profile() {
  HardwareProfile p;
  p.peak_gflops = 100;
  p.peak_gflops_f64 = 50;
  p.peak_gbps = 10;
  p.bandwidth = {{1 << 20, 100}, {1 << 30, 10}};
  return p;
}

// A time beyond the roof by more than its CI is reported as a bug of the model, naming the
// case, the roof and the figure; within the CI it is not.
TEST(RooflineModel, BeyondTheRoofByMoreThanTheCiIsTheModelsBug) {
  spec::OpSpec op = scale_op("f32");
  // 1 MiB a call, read at the bandwidth of the 2 MiB the two timed data sets take: 91 GB/s
  // (100 at 1 MiB, 10 at 1 GiB, a tenth of the way in log2).
  Roof roof = case_roofline(profile(), op, op.cases[0]);
  EXPECT_EQ(roof.bound(), "memory");
  double roof_us = roof.seconds * 1e6;
  CaseTiming within = timing(roof_us * 0.97, roof_us * 0.05);
  EXPECT_FALSE(apply_roofline(within, roof, op));
  EXPECT_FALSE(within.beyond_roofline);
  EXPECT_GT(within.fraction_of_roofline, 1.0);  // above 100%, but not beyond its CI
  EXPECT_EQ(within.roofline_bound, "memory");
  EXPECT_NEAR(within.roofline_gbps, 91, 1e-9);
  EXPECT_EQ(within.roofline_working_set_bytes, uint64_t{2} << 20);

  CaseTiming beyond = timing(roof_us * 0.5, roof_us * 0.01);
  auto note = apply_roofline(beyond, roof, op);
  ASSERT_TRUE(note);
  EXPECT_TRUE(beyond.beyond_roofline);
  EXPECT_NEAR(beyond.fraction_of_roofline, 2.0, 1e-9);
  EXPECT_NE(note->find("case N=4096 of scale"), std::string::npos) << *note;
  EXPECT_NE(note->find("200% of the roofline"), std::string::npos) << *note;
  EXPECT_NE(note->find("memory roof: 1.0 MiB at 91.0 GB/s (the bandwidth of a 2.0 MiB working set)"), std::string::npos) << *note;
  // The note names the count the roof assumes (memory-bound: the bytes) and says a kernel beyond
  // it moves less than the count, instead of blaming the model alone.
  EXPECT_NE(note->find("bytes = 16*N"), std::string::npos) << *note;
  EXPECT_NE(note->find("moves fewer bytes than the count assumes"), std::string::npos) << *note;
  EXPECT_NE(note->find("no fault of the kernel"), std::string::npos) << *note;
}

// A bandwidth measured beside the timing replaces the profile's in the memory roof and its
// fraction, and the profile's figure is kept beside it; a time is beyond the roof only when it
// beats the faster of the two, so a host slower now than when it was profiled never sends an
// honest kernel the note that it skips work.
TEST(RooflineModel, ABandwidthMeasuredBesideTheTimingIsTheMemoryRoof) {
  spec::OpSpec op = scale_op("f32");
  Roof roof = case_roofline(profile(), op, op.cases[0]);  // 91 GB/s (the test above)
  double profile_us = roof.seconds * 1e6;

  CaseTiming slower_host = timing(profile_us * 1.5, profile_us * 0.01);  // 45.5 GB/s now: the kernel is at 100%
  EXPECT_FALSE(apply_roofline(slower_host, roof, op, 45.5));
  EXPECT_NEAR(slower_host.roofline_gbps, 45.5, 1e-9);
  EXPECT_NEAR(slower_host.roofline_gbps_profile, 91, 1e-9);
  EXPECT_NEAR(slower_host.roofline_us, profile_us * 2, 1e-6);
  EXPECT_NEAR(slower_host.fraction_of_roofline, 2.0 / 1.5, 1e-9);
  EXPECT_FALSE(slower_host.beyond_roofline);  // beyond the roof read now, not beyond the profile's

  CaseTiming faster_host = timing(profile_us * 0.8, profile_us * 0.01);  // beats the profile's roof, not today's
  EXPECT_FALSE(apply_roofline(faster_host, roof, op, 182));
  EXPECT_NEAR(faster_host.fraction_of_roofline, 0.5 / 0.8, 1e-9);  // at 182 GB/s the roof is half the profile's
  EXPECT_FALSE(faster_host.beyond_roofline);

  CaseTiming skips_work = timing(profile_us * 0.4, profile_us * 0.01);  // beats both roofs
  auto note = apply_roofline(skips_work, roof, op, 45.5);
  EXPECT_NEAR(skips_work.fraction_of_roofline, 2.0 / 0.4, 1e-9);
  ASSERT_TRUE(note);
  EXPECT_TRUE(skips_work.beyond_roofline);
  EXPECT_NE(note->find("250% of the roofline"), std::string::npos) << *note;  // of the faster roof, the profile's
  EXPECT_NE(note->find("at 91.0 GB/s"), std::string::npos) << *note;

  CaseTiming as_profiled = timing(profile_us, profile_us * 0.01);
  EXPECT_FALSE(apply_roofline(as_profiled, roof, op));
  EXPECT_DOUBLE_EQ(as_profiled.roofline_gbps_profile, 0);  // nothing measured: the profile's figure alone
}

// The bandwidth is read beside a timing only on the CPU, for a memory-bound case whose working
// set is past the last-level cache (32 MiB when the profile does not know it); inside the caches
// the probe's curve stands.
TEST(RooflineModel, TheBandwidthIsReadNowOnlyPastTheLastLevelCache) {
  HardwareProfile p = profile();
  Roof memory;
  memory.gbps = 50;
  memory.memory_seconds = 1e-3;
  memory.compute_seconds = 1e-4;
  memory.working_set_bytes = uint64_t{64} << 20;
  EXPECT_TRUE(bandwidth_now_applies("cpu", p, memory));
  EXPECT_FALSE(bandwidth_now_applies("opencl", p, memory));
  EXPECT_FALSE(bandwidth_now_applies("cuda", p, memory));
  Roof cached = memory;
  cached.working_set_bytes = uint64_t{16} << 20;
  EXPECT_FALSE(bandwidth_now_applies("cpu", p, cached));
  p.l3_bytes = uint64_t{8} << 20;  // a known last-level cache: past it is past the caches
  EXPECT_TRUE(bandwidth_now_applies("cpu", p, cached));
  Roof compute = memory;
  compute.compute_seconds = 2e-3;
  EXPECT_FALSE(bandwidth_now_applies("cpu", p, compute));
}

// A compute-bound kernel beyond the roof is told it may do fewer flops than the spec counts,
// naming the count (issue 29: a GEMM form needs 2 flops per (i, j, k) where a spec counted 3).
TEST(RooflineModel, BeyondAComputeRoofNamesTheFlopCount) {
  spec::OpSpec op = scale_op("f32");
  op.flops = *spec::Expr::parse("3*N*N");
  HardwareProfile p = profile();
  Roof roof = case_roofline(p, op, op.cases[0]);
  ASSERT_EQ(roof.bound(), "compute");
  CaseTiming t = timing(roof.seconds * 1e6 / 1.3, 0.01);
  t.case_index = 0;
  t.label = "N=65536";
  auto note = apply_roofline(t, roof, op);
  ASSERT_TRUE(note);
  EXPECT_NE(note->find("case N=65536 of scale: "), std::string::npos) << *note;
  EXPECT_NE(note->find("130% of the roofline"), std::string::npos) << *note;
  EXPECT_NE(note->find("flops = 3*N*N = 1.288e+10 here"), std::string::npos) << *note;
  EXPECT_NE(note->find("does fewer operations than the count assumes"), std::string::npos) << *note;
  EXPECT_EQ(note->find("a kope bug"), std::string::npos) << *note;
}

TEST(RooflineModel, F64OpsUseTheFp64Peak) {
  HardwareProfile p = profile();
  p.bandwidth = {{1 << 10, 1e6}};  // memory never bounds
  p.peak_gbps = 1e6;
  spec::OpSpec f32 = scale_op("f32"), f64 = scale_op("f64");
  EXPECT_DOUBLE_EQ(case_roofline(p, f32, f32.cases[0]).gflops, 100);
  EXPECT_DOUBLE_EQ(case_roofline(p, f64, f64.cases[0]).gflops, 50);
  EXPECT_DOUBLE_EQ(case_roofline(p, f64, f64.cases[0]).seconds, 65536 / 50e9);
}

// Format v2 dtypes: f16/bf16 use the FP32 peak; integer ops have no compute roof (no integer
// peak is measured) and say so; only all-f32/f64 ops get the compute floor.
TEST(RooflineModel, EachDtypeHasItsRoof) {
  HardwareProfile p = profile();
  p.bandwidth = {{1 << 10, 1e6}};
  p.peak_gbps = 1e6;
  spec::OpSpec bf16 = scale_op("bf16"), i8 = scale_op("i8"), f32 = scale_op("f32");
  EXPECT_DOUBLE_EQ(case_roofline(p, bf16, bf16.cases[0]).gflops, 100);
  EXPECT_FALSE(case_roofline(p, bf16, bf16.cases[0]).memory_only);
  Roof integer = case_roofline(p, i8, i8.cases[0]);
  EXPECT_TRUE(integer.memory_only);
  EXPECT_DOUBLE_EQ(integer.compute_seconds, 0);
  EXPECT_EQ(integer.bound(), "memory");
  EXPECT_NE(integer.describe().find("no integer peak is measured"), std::string::npos) << integer.describe();
  EXPECT_TRUE(compute_floor_applies(f32));
  EXPECT_FALSE(compute_floor_applies(bf16));
  EXPECT_FALSE(compute_floor_applies(i8));
}

// With an integer peak in the profile (probe version 4), an op without float tensors gets a
// compute roof from it.
TEST(RooflineModel, IntegerOpsUseTheIntegerPeak) {
  HardwareProfile p = profile();
  p.bandwidth = {{1 << 10, 1e6}};  // memory never bounds
  p.peak_gbps = 1e6;
  p.peak_giops = 400;
  spec::OpSpec i8 = scale_op("i8");
  Roof r = case_roofline(p, i8, i8.cases[0]);
  EXPECT_FALSE(r.memory_only);
  EXPECT_TRUE(r.integer);
  EXPECT_DOUBLE_EQ(r.gflops, 400);
  EXPECT_DOUBLE_EQ(r.compute_seconds, i8.flops_for(i8.cases[0]) / 400e9);
  EXPECT_EQ(r.bound(), "compute");
  EXPECT_NE(r.describe().find("GOP/s integer"), std::string::npos) << r.describe();
  EXPECT_FALSE(compute_floor_applies(i8));  // the floor stays the memory floor
}

// An int8 GEMM with a float scale per output column (gemm_u8s8_requant) does integer work: the
// integer inputs outweigh the float ones, so the integer peak is its compute roof. A float table
// gathered by integer indices stays a float op.
TEST(RooflineModel, MostlyIntegerInputsUseTheIntegerPeak) {
  HardwareProfile p = profile();
  p.bandwidth = {{1 << 10, 1e6}};
  p.peak_gbps = 1e6;
  p.peak_giops = 400;
  auto parse = [](std::string_view inputs, std::string_view outputs) {
    std::string text = fmt::format(R"(name = "mixed"
category = "matmul"
level = 1
summary = "mixed dtypes"
dims = ["M", "N", "K"]
inputs  = [{}]
outputs = [{}]
flops = "2*M*N*K"
bytes = "M*K + K*N + 4*N + M*N"
tolerance = {{ atol = 0, rtol = 0 }}
cases = [{{ M = 64, N = 64, K = 256, timed = true }}]
)", inputs, outputs);
    auto op = spec::parse_op(text, "mixed/op.toml", false);
    EXPECT_TRUE(op) << op.error().message;
    return *op;
  };
  spec::OpSpec requant = parse(R"({ name = "x", dtype = "u8", shape = ["M", "K"] }, { name = "w", dtype = "i8", shape = ["K", "N"] },
                                  { name = "scale", dtype = "f32", shape = ["N"] })",
                               R"({ name = "y", dtype = "i8", shape = ["M", "N"] })");
  Roof r = case_roofline(p, requant, requant.cases[0]);
  EXPECT_TRUE(r.integer);
  EXPECT_DOUBLE_EQ(r.gflops, 400);
  spec::OpSpec gather = parse(R"({ name = "table", dtype = "f32", shape = ["K", "N"] }, { name = "idx", dtype = "i64", shape = ["M"] })",
                              R"({ name = "y", dtype = "f32", shape = ["M", "N"] })");
  Roof g = case_roofline(p, gather, gather.cases[0]);
  EXPECT_FALSE(g.integer);
  EXPECT_DOUBLE_EQ(g.gflops, 100);
}

TEST(LibraryConfig, ParsesTheRunnersReport) {
  LibraryEnv env = {{"OPENBLAS_CORETYPE", "SkylakeX"}, {"ONEDNN_MAX_CPU_ISA", std::nullopt}};
  std::string report = "openblas core=SkylakeX threads=2 version=0.3.21; onednn isa=0x27 threads=2;";
  LibraryConfig b = parse_library_report(report, "openblas", "openblas:SkylakeX", env, 2);
  EXPECT_EQ(b.library, "openblas");
  EXPECT_EQ(b.core, "SkylakeX");
  EXPECT_EQ(b.threads, 2);
  EXPECT_EQ(b.version, "0.3.21");
  EXPECT_EQ(b.env, "OPENBLAS_CORETYPE=SkylakeX");
  EXPECT_FALSE(b.forced);  // a setting chosen by --library-config best is not the environment's
  EXPECT_EQ(b.forced_note(), "");
  EXPECT_NE(b.describe().find("OpenBLAS 0.3.21 core SkylakeX, 2 threads"), std::string::npos) << b.describe();
  EXPECT_NE(b.describe().find("openblas:SkylakeX"), std::string::npos) << b.describe();

  LibraryConfig d = parse_library_report(report, "onednn", "auto", env, 2);
  EXPECT_EQ(d.core, "avx512_core");
  EXPECT_EQ(d.env, "");
  EXPECT_EQ(onednn_isa_name(0x7), "avx2");
  EXPECT_EQ(onednn_isa_name(0x407), "avx2_vnni");
  EXPECT_EQ(onednn_isa_name(0x12345), "0x12345");

  // A library that runs with another thread count than the candidates is forced, whatever set it.
  LibraryConfig t = parse_library_report("openblas core=Haswell threads=1 version=0.3.21;", "openblas", "auto", env, 2);
  EXPECT_TRUE(t.forced);
  EXPECT_NE(t.forced_by.find("1 library threads for 2 candidate threads"), std::string::npos) << t.forced_by;
  EXPECT_NE(t.forced_note().find("[library forced: "), std::string::npos);

  LibraryConfig none = parse_library_report("", "openblas", "environment", {}, 2);
  EXPECT_EQ(none.core, "");
  EXPECT_EQ(none.threads, 0);
}

// The default configuration is marked forced exactly when the environment sets the library's
// variables (checked against whatever this environment sets).
TEST(LibraryConfig, TheEnvironmentsSettingIsMarkedForced) {
  const char* core = std::getenv("OPENBLAS_CORETYPE");
  LibraryEnv env = library_env_default();
  std::string report = fmt::format("openblas core={} threads=2 version=0.3.21;", core && *core ? core : "Haswell");
  LibraryConfig c = parse_library_report(report, "openblas", "environment", env, 2);
  if (core && *core) {
    EXPECT_TRUE(c.forced);
    EXPECT_EQ(c.forced_by, std::string("OPENBLAS_CORETYPE=") + core);
    EXPECT_NE(c.forced_note().find(std::string("OPENBLAS_CORETYPE=") + core), std::string::npos);
    EXPECT_NE(c.describe().find("forced by OPENBLAS_CORETYPE="), std::string::npos) << c.describe();
    EXPECT_EQ(library_forced_by_environment("openblas"), std::string("OPENBLAS_CORETYPE=") + core);
    EXPECT_EQ(c.env, std::string("OPENBLAS_CORETYPE=") + core);
  } else {
    EXPECT_FALSE(c.forced);
    EXPECT_EQ(library_forced_by_environment("openblas"), "");
    // Unset: kope's pick for this ISA (OpenBLAS 0.3.21 misdetects newer CPUs).
    if (auto host = openblas_coretype_for_host()) {
      EXPECT_EQ(c.env, "OPENBLAS_CORETYPE=" + *host);
    }
  }
  // The same report under a setting best chose is never marked as forced by the environment.
  EXPECT_FALSE(parse_library_report(report, "openblas", "auto", env, 2).forced);
  // The environment's text is part of baseline cache keys.
  EXPECT_EQ(library_env_text({{"ONEDNN_MAX_CPU_ISA", "AVX2"}, {"OPENBLAS_CORETYPE", "Zen"}, {"DNNL_MAX_CPU_ISA", std::nullopt}}),
            "OPENBLAS_CORETYPE=Zen ONEDNN_MAX_CPU_ISA=AVX2");
}

TEST(LibraryConfig, SettingsToTryFollowTheCpu) {
  auto names = [](std::string_view lib) {
    std::vector<std::string> n;
    for (const auto& s : library_settings_to_try(lib)) n.push_back(s.name);
    return n;
  };
  auto blas = names("openblas");
  ASSERT_GE(blas.size(), 2u);
  EXPECT_EQ(blas[0], "environment");
  EXPECT_EQ(blas[1], "auto");
  auto has = [](const std::vector<std::string>& v, std::string_view x) { return std::find(v.begin(), v.end(), x) != v.end(); };
  EXPECT_EQ(has(blas, "openblas:Haswell"), __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"));
  EXPECT_EQ(has(blas, "openblas:SkylakeX"), __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                                                __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
                                                __builtin_cpu_supports("avx512cd"));
  for (const auto& s : library_settings_to_try("openblas")) {
    if (s.name == "auto") {
      for (const auto& [n, v] : s.env) {
        if (n == "OPENBLAS_CORETYPE") {
          EXPECT_FALSE(v);  // auto: unset, the library detects
        }
      }
    }
    if (s.name == "openblas:Haswell") {
      EXPECT_EQ(s.expect_core, "Haswell");
    }
  }
  auto dnn = names("onednn");
  EXPECT_EQ(has(dnn, "onednn:AVX2"), static_cast<bool>(__builtin_cpu_supports("avx2")));
  EXPECT_EQ(library_env_for_setting("openblas", "nonsense"), std::nullopt);
  EXPECT_TRUE(library_env_for_setting("openblas", "environment"));
}

// Below native the libraries are held to the level: under x86-64-v3 no setting above AVX2 is
// tried (nor the library's own choice, which uses all of this CPU), and the environment's
// setting is capped at the level's.
TEST(LibraryConfig, SettingsBelowNativeStayWithinTheLevel) {
  if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma")) GTEST_SKIP() << "this CPU is not x86-64-v3";
  const char* old = std::getenv("KOPE_ISA");
  std::string saved = old ? old : "";
  ::setenv("KOPE_ISA", "x86-64-v3", 1);
  std::vector<std::string> blas, dnn;
  for (const auto& s : library_settings_to_try("openblas")) blas.push_back(s.name);
  for (const auto& s : library_settings_to_try("onednn")) dnn.push_back(s.name);
  LibraryEnv env = library_env_default();
  if (old) {
    ::setenv("KOPE_ISA", saved.c_str(), 1);
  } else {
    ::unsetenv("KOPE_ISA");
  }
  auto has = [](const std::vector<std::string>& v, std::string_view x) { return std::find(v.begin(), v.end(), x) != v.end(); };
  EXPECT_EQ(blas.front(), "environment");
  EXPECT_FALSE(has(blas, "auto"));
  EXPECT_TRUE(has(blas, "openblas:Haswell"));
  for (const char* above : {"openblas:SkylakeX", "openblas:Cooperlake", "openblas:SapphireRapids"}) EXPECT_FALSE(has(blas, above)) << above;
  EXPECT_TRUE(has(dnn, "onednn:AVX2"));
  for (const char* above : {"auto", "onednn:AVX2_VNNI", "onednn:AVX512_CORE", "onednn:AVX512_CORE_BF16"}) EXPECT_FALSE(has(dnn, above)) << above;
  for (const auto& [name, value] : env) {
    if (name == "OPENBLAS_CORETYPE") {
      ASSERT_TRUE(value);
      EXPECT_TRUE(*value == "Haswell" || *value == "Zen" || *value == "Sandybridge") << *value;
    }
    if (name == "ONEDNN_MAX_CPU_ISA") {
      ASSERT_TRUE(value);
      EXPECT_TRUE(*value == "AVX2" || *value == "AVX" || *value == "SSE41") << *value;
    }
  }
}

// The trusted runner reports what OpenBLAS runs with, and a configuration given to a runner
// explicitly is the one it runs (the test process's own environment is left alone).
TEST(LibraryConfig, TheRunnerReportsTheLibrarysOwnConfiguration) {
  std::string why;
  if (!sandbox_available(&why)) GTEST_SKIP() << "no sandbox: " << why;
  if (!(__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))) GTEST_SKIP() << "needs AVX2+FMA for Haswell";
  auto op = spec::load_op(fs::path(KOPE_SOURCE_DIR) / "tests/ops/matmul/matmul_small");
  ASSERT_TRUE(op) << op.error().message;
  auto tc = cpu_toolchain();
  ASSERT_TRUE(tc) << tc.error().message;
  auto so = build_trusted(*op, *op->library_path, *tc, library_link_flags());
  ASSERT_TRUE(so) << so.error().message;
  auto runner = find_runner();
  ASSERT_TRUE(runner) << runner.error().message;
  RunnerOptions ro;
  ro.runner = *runner;
  ro.mode = proto::Mode::trusted;
  ro.threads = 2;
  ro.memory_bytes = 8ull << 30;
  ro.processes = 64;
  ro.library_env = LibraryEnv{{"OPENBLAS_CORETYPE", "Haswell"}};
  auto s = Session::start(*so, ro, 1 << 20, 1 << 20);
  ASSERT_TRUE(s) << s.error().message;
  ASSERT_FALSE((*s)->failure()) << (*s)->failure()->message;
  LibraryConfig c = parse_library_report((*s)->library_report(), "openblas", "openblas:Haswell", *ro.library_env, 2);
  EXPECT_EQ(c.core, "Haswell") << (*s)->library_report();
  EXPECT_EQ(c.threads, 2) << (*s)->library_report();
  EXPECT_FALSE(c.version.empty()) << (*s)->library_report();
  (*s)->close();

  // The default: the environment's variables (or kope's pick for this ISA when unset).
  ro.library_env.reset();
  auto d = Session::start(*so, ro, 1 << 20, 1 << 20);
  ASSERT_TRUE(d) << d.error().message;
  ASSERT_FALSE((*d)->failure());
  LibraryConfig dc = parse_library_report((*d)->library_report(), "openblas", "environment", library_env_default(), 2);
  const char* core = std::getenv("OPENBLAS_CORETYPE");
  std::string expected = core && *core ? core : openblas_coretype_for_host().value_or("");
  if (!expected.empty()) {
    EXPECT_EQ(util::to_lower(dc.core), util::to_lower(expected)) << (*d)->library_report();
  }
  EXPECT_EQ(dc.forced, core && *core);
  (*d)->close();
}

}  // namespace
}  // namespace kope::eval
