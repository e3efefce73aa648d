// expect: rejected
// op: vadd
// expect-uninspected: rejected
// Fills the disk.
#include <cstdint>
#include <cstdio>
#include <vector>

extern "C" void kope_kernel(const float* x, const float* y, float* z, int64_t N) {
  std::vector<char> block(1 << 20, 'x');
  for (int k = 0;; ++k) {
    char name[64];
    std::snprintf(name, sizeof name, "/tmp/kope-adversarial-bomb-%d", k);
    FILE* f = std::fopen(name, "w");
    if (f == nullptr) break;
    for (int i = 0; i < 1024; ++i) std::fwrite(block.data(), 1, block.size(), f);
    std::fclose(f);
  }
}
