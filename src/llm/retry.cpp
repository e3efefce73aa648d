#include "llm/retry.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <ctime>
#include <string>

#include "util/strings.h"

namespace kope::llm {

using std::chrono::milliseconds;

milliseconds backoff_delay(const Profile& profile, int retry, double jitter) {
  const double base = static_cast<double>(profile.retry_base_delay.count());
  const double cap = static_cast<double>(profile.retry_max_delay.count());
  const int exponent = std::clamp(retry - 1, 0, 30);
  const double step = std::min(cap, base * std::ldexp(1.0, exponent));
  const double j = std::clamp(jitter, 0.0, 1.0);
  return milliseconds(static_cast<int64_t>(std::llround(step * (0.5 + 0.5 * j))));
}

std::optional<milliseconds> parse_retry_after(std::string_view value,
                                              std::chrono::system_clock::time_point now) {
  std::string_view v = util::trim(value);
  if (v.empty()) return std::nullopt;
  if (std::isdigit(static_cast<unsigned char>(v.front())) != 0) {
    double seconds = 0;
    auto [ptr, ec] = std::from_chars(v.data(), v.data() + v.size(), seconds);
    if (ec != std::errc() || ptr != v.data() + v.size() || !std::isfinite(seconds) || seconds < 0) {
      return std::nullopt;
    }
    return milliseconds(static_cast<int64_t>(std::llround(std::min(seconds, 1e9) * 1000.0)));
  }
  // HTTP-date: the three forms RFC 9110 §5.6.7 requires recipients to accept.
  static constexpr const char* k_formats[] = {
      "%a, %d %b %Y %H:%M:%S GMT",  // IMF-fixdate: Sun, 06 Nov 1994 08:49:37 GMT
      "%A, %d-%b-%y %H:%M:%S GMT",  // RFC 850:     Sunday, 06-Nov-94 08:49:37 GMT
      "%a %b %e %H:%M:%S %Y",       // asctime:     Sun Nov  6 08:49:37 1994
  };
  const std::string text(v);
  for (const char* format : k_formats) {
    std::tm tm{};
    const char* end = ::strptime(text.c_str(), format, &tm);
    if (end == nullptr || *end != '\0') continue;
    const std::time_t when = ::timegm(&tm);
    if (when == static_cast<std::time_t>(-1)) continue;
    const auto target = std::chrono::system_clock::from_time_t(when);
    if (target <= now) return milliseconds(0);
    return std::chrono::duration_cast<milliseconds>(target - now);
  }
  return std::nullopt;
}

milliseconds retry_delay(const Profile& profile, int retry, double jitter,
                         std::optional<milliseconds> server_asked) {
  if (server_asked) return std::min(*server_asked, profile.retry_after_cap);
  return backoff_delay(profile, retry, jitter);
}

}  // namespace kope::llm
