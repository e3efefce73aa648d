// expect: rejected
// op: vadd
// expect-uninspected: rejected
// message-uninspected: forbidden system call
// Returns at once and leaves the work to a detached thread.
#include <cstdint>
#include <thread>

extern "C" void kope_kernel(const float* x, const float* y, float* z, int64_t N) {
  std::thread([=] {
    for (int64_t i = 0; i < N; ++i) z[i] = x[i] + y[i];
  }).detach();
}
