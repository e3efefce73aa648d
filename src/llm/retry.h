// llm/retry.h — when to retry a failed attempt and how long to wait first.
#pragma once

#include <chrono>
#include <optional>
#include <string_view>

#include "kope/llm.h"

namespace kope::llm {

// Wait before retry number `retry` (1 for the first retry): the exponential step
// d = min(retry_max_delay, retry_base_delay * 2^(retry-1)), jittered to d * (0.5 + 0.5 * jitter)
// ("equal jitter": never less than half the step, so waits stay bounded from below).
// `jitter` is clamped to [0, 1].
std::chrono::milliseconds backoff_delay(const Profile& profile, int retry, double jitter);

// The wait a server asked for, from a Retry-After value: delta-seconds ("12", "1.5") or an
// HTTP date (IMF-fixdate, RFC 850 or asctime form) relative to `now`. A date in the past is a
// zero wait. nullopt when the value is neither.
std::optional<std::chrono::milliseconds> parse_retry_after(
    std::string_view value, std::chrono::system_clock::time_point now);

// The wait before the next attempt: the server's (capped at profile.retry_after_cap) when it
// gave one, else the backoff.
std::chrono::milliseconds retry_delay(const Profile& profile, int retry, double jitter,
                                      std::optional<std::chrono::milliseconds> server_asked);

}  // namespace kope::llm
