// The verdict rules on concrete figures, on both sides of each threshold, and the notes'
// rendering, which the diagnostics keep byte for byte.
#include "eval/verdict_rules.h"

#include <gtest/gtest.h>

#include "eval/notes.h"

namespace kope::eval {
namespace {

TEST(VerdictRules, CpuFallbackRejectsAnIdleDeviceOnALongCall) {
  // 1 µs of device time in a 2 ms call: 0.05% of the call.
  auto v = rule_cpu_fallback("N=64", 1e-6, 2e-3);
  ASSERT_TRUE(v.has_value());
  EXPECT_EQ(v->verdict, Verdict::rejected);
  EXPECT_EQ(v->message, "case N=64: the device ran kernels for 1 µs of a 2e+03 µs call: the work is not being done on the device "
                        "(CPU fallback)");
}

TEST(VerdictRules, CpuFallbackKeepsADeviceBusyForATenthOfAPercent) {
  EXPECT_FALSE(rule_cpu_fallback("N=64", 2.1e-6, 2e-3).has_value());  // 0.105% of the call
  EXPECT_TRUE(rule_cpu_fallback("N=64", 1.9e-6, 2e-3).has_value());   // 0.095%
}

TEST(VerdictRules, CpuFallbackIgnoresShortCallsAndHostKernels) {
  EXPECT_FALSE(rule_cpu_fallback("N=64", 1e-9, 0.9e-3).has_value());  // the call is under 1 ms
  EXPECT_TRUE(rule_cpu_fallback("N=64", 1e-9, 1.1e-3).has_value());
  EXPECT_FALSE(rule_cpu_fallback("N=64", 1e-9, 0).has_value());  // no wall time: not a device kernel
}

TEST(VerdictRules, BelowFloorRejectsATimeUnderTheMargin) {
  // Half the floor is the bound with the default margin.
  auto v = rule_below_floor("M=8 N=8", 4.9, 10, 0.5, 2e6, 3 << 20);
  ASSERT_TRUE(v.has_value());
  EXPECT_EQ(v->verdict, Verdict::rejected);
  EXPECT_EQ(v->message, "case M=8 N=8: 4.9 µs per call is below the hardware floor of 10 µs for 2e+06 flop and 3.0 MiB (x0.5 "
                        "margin): not physically possible here, so the work is not being done");
  EXPECT_FALSE(rule_below_floor("M=8 N=8", 5.1, 10, 0.5, 2e6, 3 << 20).has_value());
  EXPECT_FALSE(rule_below_floor("M=8 N=8", 5.0, 10, 0.5, 2e6, 3 << 20).has_value());  // exactly at the bound
}

TEST(VerdictRules, BelowFloorFollowsTheMarginAndIgnoresAnUnknownFloor) {
  EXPECT_TRUE(rule_below_floor("N=1", 7, 10, 0.8, 1, 1).has_value());
  EXPECT_FALSE(rule_below_floor("N=1", 9, 10, 0.8, 1, 1).has_value());
  EXPECT_FALSE(rule_below_floor("N=1", 1e-9, 0, 0.5, 1, 1).has_value());
}

TEST(VerdictRules, FloorDropsToAFasterBaselineWithANote) {
  LoweredFloor f = lower_floor_to_baselines("N=64", 10, {12, 0});
  EXPECT_EQ(f.floor_us, 10);
  EXPECT_TRUE(f.notes.empty());

  f = lower_floor_to_baselines("N=64", 10, {8, 6});
  EXPECT_EQ(f.floor_us, 6);
  ASSERT_EQ(f.notes.size(), 2u);
  EXPECT_EQ(f.notes[0], "case N=64: a baseline ran in 8 µs, below the hardware profile's floor of 10 µs; the profile looks "
                        "pessimistic (re-measure with `kope hw --refresh` on an idle machine)");
  // The library is compared with the floor the reference already lowered.
  EXPECT_NE(f.notes[1].find("ran in 6 µs, below the hardware profile's floor of 8 µs"), std::string::npos);

  f = lower_floor_to_baselines("N=64", 10, {8, 9});
  EXPECT_EQ(f.floor_us, 8);
  EXPECT_EQ(f.notes.size(), 1u);
}

TEST(Notes, RenderOnePerLine) {
  Notes n;
  EXPECT_EQ(n.text(), "");
  n.add("first");
  n.add("second");
  EXPECT_EQ(n.text(), "first\nsecond");
  EXPECT_EQ(n.text_with_output("out"), "first\nsecond\nout");
  EXPECT_EQ(n.text_with_output(""), "first\nsecond");
}

TEST(Notes, EmptyNotesRenderAsBefore) {
  Notes n;
  n.add("");  // no build diagnostics: nothing
  EXPECT_EQ(n.text(), "");
  EXPECT_EQ(n.text_with_output("out"), "out");
  n.add("a");
  n.add("");
  EXPECT_EQ(n.text(), "a\n");
}

}  // namespace
}  // namespace kope::eval
