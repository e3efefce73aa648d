// expect: resource_limit
// op: vadd
// message: memory
// call-timeout-s: 30
#include <cstdint>
#include <cstring>
#include <vector>

extern "C" void kope_kernel(const float* x, const float* y, float* z, int64_t N) {
  std::vector<char*> hoard;
  for (;;) {
    char* p = new char[64 << 20];
    std::memset(p, 1, 64 << 20);
    hoard.push_back(p);
  }
}
