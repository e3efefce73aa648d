// expect: timeout
// op: vadd
// Sleeping is allowed (nothing unsafe), so it ends as a timeout.
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <thread>

extern "C" void kope_kernel(const float* x, const float* y, float* z, int64_t N) {
  std::this_thread::sleep_for(std::chrono::hours(1));
  sleep(3600);
}
