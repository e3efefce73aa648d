// llm/limiter.h — client-side rate limits (requests/min, tokens/min) and a concurrency cap.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "kope/llm.h"

namespace kope::llm {

// A token bucket refilled continuously at rate_per_minute / 60 per second up to `capacity`.
// A request larger than the capacity waits for a full bucket and then takes its whole amount,
// leaving the bucket in debt that later requests wait out, so the long-run rate holds for
// any request size. Not thread-safe (Limiter locks around it); time is passed in, for tests.
class TokenBucket {
 public:
  using Clock = std::chrono::steady_clock;
  // rate_per_minute <= 0: unlimited (wait_time is always zero).
  TokenBucket(double rate_per_minute, double capacity, Clock::time_point now);

  // How long from `now` until `amount` may be taken (zero: at once).
  Clock::duration wait_time(double amount, Clock::time_point now);
  void take(double amount, Clock::time_point now);
  // Returns (amount > 0) or charges (amount < 0) a correction after the fact.
  void adjust(double amount, Clock::time_point now);
  double level(Clock::time_point now);
  bool unlimited() const { return m_rate_per_second <= 0; }

 private:
  void refill(Clock::time_point now);
  double m_rate_per_second;
  double m_capacity;
  double m_level;
  Clock::time_point m_last;
};

// A bucket holds one second of its rate (at least one request): enough for bursts of
// concurrent callers, small enough that the provider's own sub-minute limits are not tripped.
inline constexpr double k_bucket_seconds = 1.0;
// How often a waiting caller re-checks cancellation.
inline constexpr std::chrono::milliseconds k_limiter_poll_slice{50};

// Request and token buckets plus a concurrency cap, shared by every caller of one client (or,
// through shared_limiter(), of every client of one profile). Thread-safe.
class Limiter {
 public:
  Limiter(double requests_per_minute, double tokens_per_minute, int concurrency);

  // A concurrency slot, released when destroyed.
  class Permit {
   public:
    Permit() = default;
    explicit Permit(Limiter* owner) : m_owner(owner) {}
    Permit(Permit&& o) noexcept : m_owner(std::exchange(o.m_owner, nullptr)) {}
    Permit& operator=(Permit&& o) noexcept;
    Permit(const Permit&) = delete;
    Permit& operator=(const Permit&) = delete;
    ~Permit();

   private:
    Limiter* m_owner = nullptr;
  };

  // Blocks until a request of `tokens` may start, then takes one request, `tokens` tokens and a
  // concurrency slot. Returns nullopt when a token was cancelled while waiting. `waited_seconds`
  // (if given) receives the time spent waiting.
  std::optional<Permit> acquire(int64_t tokens, const CancelToken* a, const CancelToken* b,
                                double* waited_seconds = nullptr);
  // After a response: corrects the tokens taken by acquire() to the tokens actually used.
  void settle(int64_t reserved_tokens, int64_t used_tokens);

  int in_flight() const;
  int max_in_flight() const;  // the highest number of concurrent permits seen

 private:
  void release();

  mutable std::mutex m_mutex;
  std::condition_variable m_cv;
  TokenBucket m_requests;
  TokenBucket m_tokens;
  int m_concurrency;
  int m_in_flight = 0;
  int m_max_in_flight = 0;
};

// The limiter of `key` in this process, created with the given limits on first use and kept
// while any client holds it.
std::shared_ptr<Limiter> shared_limiter(const std::string& key, double requests_per_minute,
                                        double tokens_per_minute, int concurrency);

}  // namespace kope::llm
