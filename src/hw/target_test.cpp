#include "kope/target.h"

#include <gtest/gtest.h>

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
