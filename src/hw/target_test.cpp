#include "kope/target.h"

#include <fmt/format.h>
#include <cmath>

#include <gtest/gtest.h>

#include "hw/isa.h"
#include "kope/hw.h"

namespace kope {
namespace {

TEST(Target, RoundTripsCanonically) {
  for (const char* s : {"x86_64-avx2-fma", "x86_64", "cuda-sm90", "opencl-pocl-cpu", "ascend-910c",
                        "x86_64-avx2-fma-avx512-avx512vnni"}) {
    auto t = Target::parse(s);
    ASSERT_TRUE(t) << s;
    EXPECT_EQ(t->str(), s);
    EXPECT_EQ(Target::parse(t->str())->str(), t->str());
  }
}

TEST(Target, CanonicalisesFeatureOrder) {
  EXPECT_EQ(Target::parse("x86_64-fma-avx2")->str(), "x86_64-avx2-fma");
  EXPECT_EQ(Target::parse("x86_64-fma-fma")->str(), "x86_64-fma");
}

TEST(Target, RejectsMalformed) {
  EXPECT_FALSE(Target::parse(""));
  EXPECT_FALSE(Target::parse("x86_64--fma"));
  EXPECT_FALSE(Target::parse("X86"));
  EXPECT_FALSE(Target::parse("x86 64"));
}

TEST(IsaLevel, NamesRoundTrip) {
  for (const auto& name : isa_level_names()) {
    auto level = parse_isa_level(name);
    ASSERT_TRUE(level) << name;
    EXPECT_EQ(isa_level_name(*level), name);
  }
  auto bad = parse_isa_level("x86-64-v9");
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("x86-64-v3"), std::string::npos) << bad.error().message;
  EXPECT_EQ(isa_level_flags(IsaLevel::native), std::vector<std::string>{"-march=native"});
  EXPECT_EQ(isa_level_flags(IsaLevel::x86_64_v3), (std::vector<std::string>{"-march=x86-64-v3", "-mtune=native"}));
  EXPECT_EQ(isa_level_of_flags({"-O3", "-march=x86-64-v3", "-mtune=native"}), IsaLevel::x86_64_v3);
  EXPECT_EQ(isa_level_of_flags({"-O3", "-march=native"}), IsaLevel::native);
  EXPECT_EQ(isa_level_of_flags({"-O3"}), IsaLevel::native);
}

// A level names the target a CPU of exactly that level has, so memory recorded under it is
// what such a CPU reads.
TEST(IsaLevel, TargetIsTheOneACpuOfTheLevelHas) {
  Target zen5 = *Target::parse("x86_64-avx2-fma-avx512-avx512vnni-avx512bf16");
  EXPECT_EQ(target_at_level(zen5, IsaLevel::x86_64_v3)->str(), "x86_64-avx2-fma");
  EXPECT_EQ(target_at_level(zen5, IsaLevel::x86_64_v4)->str(), "x86_64-avx2-fma-avx512");
  EXPECT_EQ(target_at_level(zen5, IsaLevel::native)->str(), zen5.str());
  Target avx2 = *Target::parse("x86_64-avx2-fma");
  EXPECT_EQ(target_at_level(avx2, IsaLevel::x86_64_v3)->str(), "x86_64-avx2-fma");
}

TEST(Target, RunsOnTargetsWithItsFeatures) {
  Target avx2 = *Target::parse("x86_64-avx2-fma"), zen5 = *Target::parse("x86_64-avx2-fma-avx512-avx512vnni");
  EXPECT_TRUE(target_runs_on(avx2, zen5));
  EXPECT_TRUE(target_runs_on(avx2, avx2));
  EXPECT_FALSE(target_runs_on(zen5, avx2));
  EXPECT_FALSE(target_runs_on(avx2, *Target::parse("aarch64-neon")));
}

TEST(IsaLevel, RefusedWhereTheCpuLacksItOrIsNotX86) {
  auto v4 = target_at_level(*Target::parse("x86_64-avx2-fma"), IsaLevel::x86_64_v4);
  ASSERT_FALSE(v4);
  EXPECT_EQ(v4.error().kind, ErrorKind::config);
  EXPECT_NE(v4.error().message.find("lacks avx512"), std::string::npos) << v4.error().message;
  EXPECT_NE(v4.error().message.find("x86-64-v3 or native"), std::string::npos) << v4.error().message;
  auto arm = target_at_level(*Target::parse("aarch64-neon-sve"), IsaLevel::x86_64_v3);
  ASSERT_FALSE(arm);
  EXPECT_NE(arm.error().message.find("needs an x86-64 CPU"), std::string::npos) << arm.error().message;
  EXPECT_TRUE(target_at_level(*Target::parse("aarch64-neon"), IsaLevel::native));
}

TEST(Target, HostRoundTrips) {
  Target h = Target::host();
  EXPECT_FALSE(h.arch.empty());
  EXPECT_EQ(Target::parse(h.str())->str(), h.str());
  EXPECT_EQ(h.family(), "cpu");
}

TEST(HardwareProfile, RooflineAndFloor) {
  HardwareProfile p;
  p.peak_gflops = 100;  // 1e11 flop/s
  p.peak_gbps = 10;     // 1e10 B/s
  p.bandwidth = {{1 << 20, 100}, {1 << 30, 10}};
  EXPECT_DOUBLE_EQ(p.roofline_seconds(1e11, 0), 1.0);
  EXPECT_DOUBLE_EQ(p.roofline_seconds(0, 1e10), 1.0);
  EXPECT_DOUBLE_EQ(p.roofline_seconds(1e11, 2e10), 2.0);
  // A small working set sees cache bandwidth.
  EXPECT_DOUBLE_EQ(p.floor_seconds(0, 1e10, 1000), 0.1);
  EXPECT_DOUBLE_EQ(p.floor_seconds(0, 1e10, 1 << 25), 1.0);
}

// The per-core caches are known even where the kernel does not describe them (a VM without
// /sys/devices/system/cpu/cpu0/cache): the prompt's hardware guide needs them for blocking.
TEST(HardwareProfile, KnowsThePerCoreCaches) {
#if defined(__x86_64__)
  HardwareProfile p = describe_host();
  EXPECT_GT(p.l1d_bytes, 0u);
  EXPECT_GT(p.l2_bytes, p.l1d_bytes);
#else
  GTEST_SKIP() << "the CPUID fallback is x86 only";
#endif
}

TEST(HardwareProfile, JsonRoundTrip) {
  HardwareProfile p = describe_host();
  p.peak_gflops = 12.5;
  p.peak_gbps = 3.25;
  p.bandwidth = {{1024, 5.5}};
  auto q = HardwareProfile::from_json(p.to_json());
  ASSERT_TRUE(q);
  EXPECT_EQ(q->target, p.target);
  EXPECT_EQ(q->cores, p.cores);
  EXPECT_DOUBLE_EQ(q->peak_gflops, 12.5);
  EXPECT_EQ(q->bandwidth.size(), 1u);
  EXPECT_FALSE(HardwareProfile::from_json("{not json"));
}

}  // namespace
}  // namespace kope

namespace kope {
namespace {

HardwareProfile curve_profile() {
  HardwareProfile p;
  p.peak_gflops = 100;     // FP32: 1e11 flop/s
  p.peak_gflops_f64 = 40;  // FP64: 4e10 flop/s
  p.peak_gbps = 10;
  p.bandwidth = {{1 << 20, 100}, {4 << 20, 50}, {1 << 30, 10}};
  return p;
}

// The bandwidth at a working set is linear in log2(working set) between neighbouring points,
// the first point's below the curve and the last point's above it.
TEST(Roofline, BandwidthCurveIsInterpolatedInLogWorkingSet) {
  HardwareProfile p = curve_profile();
  EXPECT_DOUBLE_EQ(p.gbps_at(1 << 20), 100);
  EXPECT_DOUBLE_EQ(p.gbps_at(2 << 20), 75);   // halfway between 1 MiB and 4 MiB in log2
  EXPECT_DOUBLE_EQ(p.gbps_at(4 << 20), 50);
  EXPECT_DOUBLE_EQ(p.gbps_at(1024), 100);     // below the curve: the first (fastest) point
  EXPECT_DOUBLE_EQ(p.gbps_at(uint64_t{8} << 30), 10);  // above it: DRAM
  EXPECT_NEAR(p.gbps_at(32 << 20), 50 - 40.0 * 3 / 8, 1e-9);  // 3 of the 8 octaves from 4 MiB to 1 GiB
  HardwareProfile flat;
  flat.peak_gbps = 7;
  EXPECT_DOUBLE_EQ(flat.gbps_at(1 << 20), 7);  // no curve: the DRAM figure
}

// A working set past the last-level cache streams from DRAM: it gets the DRAM triad figure, not
// an interpolation toward the cached points above it (issue 29: 76-113 GB/s read for 64-192 MiB
// sets beside a 66.6 GB/s triad made single-pass DRAM kernels look like 27-46% of their roof).
TEST(Roofline, WorkingSetsPastTheLastLevelCacheGetTheDramFigure) {
  HardwareProfile p;
  p.peak_gbps = 66.6;
  p.l3_bytes = uint64_t{32} << 20;
  p.bandwidth = {{uint64_t{16} << 20, 400}, {uint64_t{32} << 20, 250}, {uint64_t{256} << 20, 70}};
  EXPECT_DOUBLE_EQ(p.gbps_at(uint64_t{32} << 20), 250);   // in the cache: the curve
  EXPECT_NEAR(p.gbps_at(uint64_t{24} << 20), 400 - 150 * (std::log2(24.0) - 4), 1e-9);  // between points in the cache
  for (uint64_t mib : {33, 64, 128, 192, 1024}) {
    EXPECT_DOUBLE_EQ(p.gbps_at(mib << 20), 66.6) << mib << " MiB";
    EXPECT_DOUBLE_EQ(p.roofline(0, static_cast<double>(mib << 20), false).gbps, 66.6) << mib << " MiB";
  }
  p.l3_bytes = 0;  // the cache size unknown: the curve as measured
  EXPECT_GT(p.gbps_at(uint64_t{128} << 20), 66.6);
}

// The memory roof reads the curve at the case's bytes; the compute roof uses its dtype's peak.
TEST(Roofline, MemoryRoofAtTheWorkingSetComputeRoofOfTheDtype) {
  HardwareProfile p = curve_profile();
  Roof small = p.roofline(0, 2 << 20, false);
  EXPECT_EQ(small.bound(), "memory");
  EXPECT_DOUBLE_EQ(small.gbps, 75);
  EXPECT_DOUBLE_EQ(small.seconds, (2 << 20) / 75e9);
  EXPECT_EQ(small.working_set_bytes, uint64_t{2} << 20);
  // The same bytes from DRAM would be 7.5x slower: the old roof's error for cache-resident cases.
  EXPECT_NEAR(p.roofline_seconds(0, 2 << 20) / small.seconds, 7.5, 1e-9);

  Roof f32 = p.roofline(1e11, 1 << 20, false);
  EXPECT_EQ(f32.bound(), "compute");
  EXPECT_DOUBLE_EQ(f32.seconds, 1.0);
  EXPECT_FALSE(f32.f64);
  Roof f64 = p.roofline(1e11, 1 << 20, true);
  EXPECT_DOUBLE_EQ(f64.seconds, 2.5);  // 1e11 / 4e10
  EXPECT_DOUBLE_EQ(f64.gflops, 40);
  EXPECT_TRUE(f64.f64);
  EXPECT_NE(f64.describe().find("FP64"), std::string::npos);
  EXPECT_NE(small.describe().find("75.0 GB/s"), std::string::npos) << small.describe();

  // A profile without an FP64 peak (older probe, device profiles) judges f64 ops by FP32.
  p.peak_gflops_f64 = 0;
  EXPECT_DOUBLE_EQ(p.roofline(1e11, 0, true).seconds, 1.0);
  EXPECT_FALSE(p.roofline(1e11, 0, true).f64);
}

// A hw.json written before the FP64 peak and the probe version existed still parses (the new
// fields read as absent), and a loaded profile is never one of those.
TEST(Roofline, OldProfileJsonParsesWithoutTheNewFields) {
  HardwareProfile host = describe_host();
  std::string old = fmt::format(R"({{"target": "{}", "cpu_model": "{}", "cores": {}, "peak_gflops": 50.5,
      "peak_gflops_core": 25, "peak_gbps": 12, "bandwidth": [{{"working_set_bytes": 262144, "gbps": 90}}],
      "compiler": "g++ 12", "measured_at": "2026-01-01T00:00:00Z"}})",
                                host.target.str(), host.cpu_model, host.cores);
  auto p = HardwareProfile::from_json(old);
  ASSERT_TRUE(p) << p.error().message;
  EXPECT_EQ(p->probe_version, 0);
  EXPECT_DOUBLE_EQ(p->peak_gflops_f64, 0);
  EXPECT_DOUBLE_EQ(p->peak_gflops_for(true), 50.5);
  EXPECT_DOUBLE_EQ(p->gbps_at(1000), 90);
  // The new fields round-trip.
  p->peak_gflops_f64 = 20;
  p->probe_version = k_hw_probe_version;
  auto q = HardwareProfile::from_json(p->to_json());
  ASSERT_TRUE(q);
  EXPECT_DOUBLE_EQ(q->peak_gflops_f64, 20);
  EXPECT_EQ(q->probe_version, k_hw_probe_version);
}

// The bandwidth now: a real triad at the working set asked for, on as many threads as asked
// (more threads than CPUs run unpinned), in a plausible range; nothing to measure in a working
// set under one line per array.
TEST(BandwidthNow, MeasuresTheTriadAtAWorkingSet) {
  for (int threads : {1, 2, 64}) {
    for (uint64_t mib : {4, 40}) {
      double gbps = measure_bandwidth_now(mib << 20, threads, 2);
      EXPECT_GT(gbps, 0.5) << mib << " MiB on " << threads << " threads";
      EXPECT_LT(gbps, 100000) << mib << " MiB on " << threads << " threads";
    }
  }
  EXPECT_EQ(measure_bandwidth_now(1000, 2, 3), 0);
  EXPECT_EQ(measure_bandwidth_now(uint64_t{64} << 20, 2, 0), 0);
}

}  // namespace
}  // namespace kope
