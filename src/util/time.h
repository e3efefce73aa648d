// util/time.h — the wall-clock stamps kope writes (UTC), one function per format.
#pragma once

#include <chrono>
#include <string>

namespace kope::util {

enum class TimePrecision { seconds, milliseconds };

// `t` in ISO 8601 UTC: "2026-12-01T15:48:03Z" (seconds) or "2026-12-01T15:48:03.123Z"
// (milliseconds, the default: event logs, transcripts, memory rows).
std::string iso8601_utc(std::chrono::system_clock::time_point t,
                        TimePrecision precision = TimePrecision::milliseconds);
// The current time as iso8601_utc writes it.
std::string now_iso8601(TimePrecision precision = TimePrecision::milliseconds);
// The current time as a compact stamp for file and run names: "20261201-154803".
std::string now_compact_utc();

}  // namespace kope::util
