#include "llm/limiter.h"

#include <algorithm>
#include <map>

namespace kope::llm {

TokenBucket::TokenBucket(double rate_per_minute, double capacity, Clock::time_point now)
    : m_rate_per_second(rate_per_minute > 0 ? rate_per_minute / 60.0 : 0),
      m_capacity(std::max(capacity, 1.0)),
      m_level(std::max(capacity, 1.0)),
      m_last(now) {}

void TokenBucket::refill(Clock::time_point now) {
  if (now <= m_last) return;
  const double elapsed = std::chrono::duration<double>(now - m_last).count();
  m_level = std::min(m_capacity, m_level + elapsed * m_rate_per_second);
  m_last = now;
}

TokenBucket::Clock::duration TokenBucket::wait_time(double amount, Clock::time_point now) {
  if (unlimited()) return Clock::duration::zero();
  refill(now);
  const double need = std::min(amount, m_capacity);
  if (m_level >= need) return Clock::duration::zero();
  const double seconds = (need - m_level) / m_rate_per_second;
  return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds)) +
         Clock::duration(1);
}

void TokenBucket::take(double amount, Clock::time_point now) {
  if (unlimited()) return;
  refill(now);
  m_level -= amount;
}

void TokenBucket::adjust(double amount, Clock::time_point now) {
  if (unlimited()) return;
  refill(now);
  m_level = std::min(m_capacity, m_level + amount);
}

double TokenBucket::level(Clock::time_point now) {
  refill(now);
  return m_level;
}

Limiter::Limiter(double requests_per_minute, double tokens_per_minute, int concurrency)
    : m_requests(requests_per_minute, requests_per_minute / 60.0 * k_bucket_seconds,
                 TokenBucket::Clock::now()),
      m_tokens(tokens_per_minute, tokens_per_minute / 60.0 * k_bucket_seconds,
               TokenBucket::Clock::now()),
      m_concurrency(std::max(concurrency, 1)) {}

Limiter::Permit& Limiter::Permit::operator=(Permit&& o) noexcept {
  if (this != &o) {
    if (m_owner != nullptr) m_owner->release();
    m_owner = std::exchange(o.m_owner, nullptr);
  }
  return *this;
}

Limiter::Permit::~Permit() {
  if (m_owner != nullptr) m_owner->release();
}

std::optional<Limiter::Permit> Limiter::acquire(int64_t tokens, const CancelToken* a,
                                                const CancelToken* b, double* waited_seconds) {
  using Clock = TokenBucket::Clock;
  const Clock::time_point start = Clock::now();
  auto is_cancelled = [&] {
    return (a != nullptr && a->cancelled()) || (b != nullptr && b->cancelled());
  };
  std::unique_lock lock(m_mutex);
  while (true) {
    if (is_cancelled()) {
      if (waited_seconds != nullptr)
        *waited_seconds = std::chrono::duration<double>(Clock::now() - start).count();
      return std::nullopt;
    }
    const Clock::time_point now = Clock::now();
    Clock::duration wait = Clock::duration::zero();
    if (m_in_flight >= m_concurrency) {
      wait = k_limiter_poll_slice;  // woken early by release()
    } else {
      wait = std::max(m_requests.wait_time(1, now),
                      m_tokens.wait_time(static_cast<double>(tokens), now));
    }
    if (wait == Clock::duration::zero()) {
      m_requests.take(1, now);
      m_tokens.take(static_cast<double>(tokens), now);
      ++m_in_flight;
      m_max_in_flight = std::max(m_max_in_flight, m_in_flight);
      if (waited_seconds != nullptr)
        *waited_seconds = std::chrono::duration<double>(Clock::now() - start).count();
      return Permit(this);
    }
    m_cv.wait_for(lock, std::min<Clock::duration>(wait, k_limiter_poll_slice));
  }
}

void Limiter::settle(int64_t reserved_tokens, int64_t used_tokens) {
  std::lock_guard lock(m_mutex);
  m_tokens.adjust(static_cast<double>(reserved_tokens - used_tokens), TokenBucket::Clock::now());
  m_cv.notify_all();
}

void Limiter::release() {
  std::lock_guard lock(m_mutex);
  --m_in_flight;
  m_cv.notify_all();
}

int Limiter::in_flight() const {
  std::lock_guard lock(m_mutex);
  return m_in_flight;
}

int Limiter::max_in_flight() const {
  std::lock_guard lock(m_mutex);
  return m_max_in_flight;
}

std::shared_ptr<Limiter> shared_limiter(const std::string& key, double requests_per_minute,
                                        double tokens_per_minute, int concurrency) {
  static std::mutex mutex;
  static std::map<std::string, std::weak_ptr<Limiter>> limiters;
  std::lock_guard lock(mutex);
  for (auto it = limiters.begin(); it != limiters.end();) {
    it = it->second.expired() ? limiters.erase(it) : std::next(it);
  }
  if (auto existing = limiters[key].lock()) return existing;
  auto made = std::make_shared<Limiter>(requests_per_minute, tokens_per_minute, concurrency);
  limiters[key] = made;
  return made;
}

}  // namespace kope::llm
