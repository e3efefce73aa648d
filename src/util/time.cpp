#include "util/time.h"

#include <ctime>

#include <fmt/format.h>

namespace kope::util {

namespace {

std::tm utc_fields(std::time_t secs) {
  std::tm tm{};
  ::gmtime_r(&secs, &tm);
  return tm;
}

}  // namespace

std::string iso8601_utc(std::chrono::system_clock::time_point t, TimePrecision precision) {
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count();
  // Floor division, so a time before 1970 still gets milliseconds in [0, 1000).
  const int64_t secs = ms >= 0 ? ms / 1000 : -((-ms + 999) / 1000);
  const std::tm tm = utc_fields(static_cast<std::time_t>(secs));
  std::string out = fmt::format("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
                                tm.tm_hour, tm.tm_min, tm.tm_sec);
  if (precision == TimePrecision::milliseconds) out += fmt::format(".{:03}", ms - secs * 1000);
  return out + "Z";
}

std::string now_iso8601(TimePrecision precision) {
  return iso8601_utc(std::chrono::system_clock::now(), precision);
}

std::string now_compact_utc() {
  const std::tm tm = utc_fields(std::time(nullptr));
  return fmt::format("{:04}{:02}{:02}-{:02}{:02}{:02}", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour,
                     tm.tm_min, tm.tm_sec);
}

}  // namespace kope::util
