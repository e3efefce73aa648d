#include "util/time.h"

#include <regex>

#include <gtest/gtest.h>

namespace kope::util {
namespace {

using std::chrono::milliseconds;
using std::chrono::system_clock;

TEST(Time, Iso8601WritesUtcAtEitherPrecision) {
  const system_clock::time_point t{milliseconds(1764604083123)};  // 2025-12-01T15:48:03.123Z
  EXPECT_EQ(iso8601_utc(t), "2025-12-01T15:48:03.123Z");
  EXPECT_EQ(iso8601_utc(t, TimePrecision::seconds), "2025-12-01T15:48:03Z");
  EXPECT_EQ(iso8601_utc(system_clock::time_point{milliseconds(7)}), "1970-01-01T00:00:00.007Z");
  EXPECT_EQ(iso8601_utc(system_clock::time_point{milliseconds(-1)}), "1969-12-31T23:59:59.999Z");
}

TEST(Time, NowStampsHaveTheirFormats) {
  EXPECT_TRUE(std::regex_match(now_iso8601(), std::regex(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z)")));
  EXPECT_TRUE(std::regex_match(now_iso8601(TimePrecision::seconds), std::regex(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ)")));
  EXPECT_TRUE(std::regex_match(now_compact_utc(), std::regex(R"(\d{8}-\d{6})")));
}

}  // namespace
}  // namespace kope::util
