#include "eval/arena.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <string>

#include <gtest/gtest.h>

#include "kope/spec.h"

namespace kope::eval {
namespace {

const char* k_op = R"(
name = "t"
category = "elementwise"
level = 1
summary = "x"
dims = ["N"]
inputs = [{ name = "x", dtype = "f32", shape = ["N"] }]
outputs = [{ name = "y", dtype = "f64", shape = ["N"] }]
flops = "N"
bytes = "12*N"
tolerance = { atol = 0, rtol = 0 }
cases = [{ N = 1 }, { N = 1000 }, { N = 16 }]
)";

spec::OpSpec op() {
  auto r = spec::parse_op(k_op, "test/op.toml", false);
  EXPECT_TRUE(r) << r.error().message;
  return *r;
}

TEST(Layout, DataEndsWithin64BytesOfThePageEnd) {
  auto o = op();
  const size_t page = 4096;
  for (const auto& c : o.cases) {
    CaseLayout l = layout_case(o, c, 2, 2, page);
    ASSERT_EQ(l.inputs.size(), 2u);
    ASSERT_EQ(l.outputs.size(), 2u);
    uint64_t cursor = 0;
    for (const auto& slot : l.inputs) {
      for (const auto& p : slot) {
        EXPECT_EQ(p.file_offset, cursor);
        EXPECT_EQ(p.map_length % page, 0u);
        EXPECT_EQ(p.data_offset % 64, 0u);  // 64-byte aligned data
        uint64_t tail = p.map_length - p.data_offset - p.data_bytes;
        EXPECT_LT(tail, 64u);  // one element past the end lands in checked slack or the guard page
        cursor += p.map_length;
      }
    }
    EXPECT_EQ(l.in_bytes, cursor);
  }
  // N=1000 f64 outputs: 8000 bytes, two pages, data at 8192 - 8000 = 192.
  CaseLayout l = layout_case(o, o.cases[1], 1, 1, page);
  EXPECT_EQ(l.outputs[0][0].map_length, 8192u);
  EXPECT_EQ(l.outputs[0][0].data_offset, 192u);
  EXPECT_EQ(l.outputs[0][0].data_bytes, 8000u);
}

TEST(Poison, PatternDependsOnTheSeedAndIsChecked) {
  std::vector<uint8_t> a(1001), b(1001);
  fill_pattern(a.data(), a.size(), 1);
  fill_pattern(b.data(), b.size(), 2);
  EXPECT_NE(a, b);
  EXPECT_TRUE(matches_pattern(a.data(), a.size(), 1));
  EXPECT_FALSE(matches_pattern(a.data(), a.size(), 2));
  // Any byte changed is noticed, the last (odd) one included.
  for (size_t i : {size_t{0}, size_t{7}, size_t{8}, size_t{1000}}) {
    auto c = a;
    c[i] ^= 1;
    EXPECT_FALSE(matches_pattern(c.data(), c.size(), 1)) << i;
    EXPECT_FALSE(matches_pattern_at(c.data(), i, 1, 1)) << i;
    EXPECT_TRUE(matches_pattern_at(c.data(), i == 0 ? 1 : 0, 1, 1)) << i;
  }
  // A buffer of several pattern blocks (4 KiB each) and a ragged end: every block differs
  // from the others, and each byte is checked where it lies.
  std::vector<uint8_t> big(3 * 4096 + 13);
  fill_pattern(big.data(), big.size(), 5);
  EXPECT_NE(std::memcmp(big.data(), big.data() + 4096, 4096), 0);
  EXPECT_NE(std::memcmp(big.data() + 4096, big.data() + 8192, 4096), 0);
  EXPECT_TRUE(matches_pattern(big.data(), big.size(), 5));
  for (size_t i : {size_t{4095}, size_t{4096}, size_t{8200}, big.size() - 1}) {
    auto c = big;
    c[i] ^= 0x80;
    EXPECT_FALSE(matches_pattern(c.data(), c.size(), 5)) << i;
    EXPECT_FALSE(matches_pattern_at(c.data(), i, 1, 5)) << i;
    EXPECT_TRUE(matches_pattern_at(c.data(), i - 1, 1, 5)) << i;
  }
  // A poisoned float buffer does not look like plausible results: few equal neighbours.
  std::vector<float> f(4096);
  fill_pattern(f.data(), f.size() * sizeof(float), 99);
  int equal = 0;
  for (size_t i = 1; i < f.size(); ++i) equal += std::memcmp(&f[i], &f[i - 1], 4) == 0;
  EXPECT_LT(equal, 3);
}

// The parts of a fill or a check, split at the pattern's block boundaries, cover the buffer
// exactly once: together they write what the whole fill writes, and each part sees a change in
// its own bytes only.
TEST(Poison, PartsFillAndCheckTheWholeBuffer) {
  for (size_t bytes : {size_t{1}, size_t{4095}, size_t{4096}, size_t{3 * 4096 + 17}, size_t{100000}}) {
    std::vector<uint8_t> whole(bytes), parts(bytes, 0xab);
    fill_pattern(whole.data(), bytes, 42);
    for (int k = 0; k < 3; ++k) fill_pattern_part(parts.data(), bytes, 42, k, 3);
    EXPECT_EQ(whole, parts) << bytes;
    for (int k = 0; k < 3; ++k) EXPECT_TRUE(matches_pattern_part(parts.data(), bytes, 42, k, 3)) << bytes;
    parts[bytes - 1] ^= 1;
    EXPECT_FALSE(matches_pattern_part(parts.data(), bytes, 42, 2, 3)) << bytes;
    EXPECT_FALSE(matches_pattern(parts.data(), bytes, 42));
    if (bytes > 3 * 4096) EXPECT_TRUE(matches_pattern_part(parts.data(), bytes, 42, 0, 3));
  }
}

TEST(Arena, CanariesFindWritesBesideTheData) {
  auto o = op();
  auto arena = Arena::create(1 << 20, 1 << 20);
  ASSERT_TRUE(arena) << arena.error().message;
  CaseLayout l = layout_case(o, o.cases[1], 1, 1, 4096);
  // Input x: 1000 floats = 4000 bytes, rounded to 4032: 32 bytes of slack before the guard page.
  const Placement& p = l.inputs[0][0];
  ASSERT_EQ(p.map_length - p.data_offset - p.data_bytes, 32u);
  for (bool output : {false, true}) {
    const Placement& q = output ? l.outputs[0][0] : p;
    uint8_t* data = output ? arena->output(q) : arena->input(q);
    arena->write_canary(output, q, 42);
    int64_t off = 0;
    EXPECT_TRUE(arena->check_canary(output, q, 42, &off));
    // One byte before the start.
    data[-1] ^= 0xff;
    EXPECT_FALSE(arena->check_canary(output, q, 42, &off));
    EXPECT_EQ(off, -1);
    // Writes inside the data are not the canary's business.
    arena->write_canary(output, q, 42);
    std::memset(data, 0, q.data_bytes);
    EXPECT_TRUE(arena->check_canary(output, q, 42, &off));
  }
  // One element past the end of x (index 1000) lands in the slack.
  arena->write_canary(false, p, 7);
  arena->input(p)[4000] ^= 0xff;
  int64_t off = 0;
  EXPECT_FALSE(arena->check_canary(false, p, 7, &off));
  EXPECT_EQ(off, 4000);
  // The output y (8000 bytes) ends exactly at its page end: no slack, the runner's guard page
  // follows directly.
  EXPECT_EQ(l.outputs[0][0].map_length - l.outputs[0][0].data_offset - l.outputs[0][0].data_bytes, 0u);
}

TEST(Arena, MemfdsAreSealedAndInputsReadOnlyForTheRunner) {
  auto arena = Arena::create(8192, 8192);
  ASSERT_TRUE(arena);
  // Nobody can shrink a memfd under the parent's mapping (that would SIGBUS the parent).
  EXPECT_NE(::ftruncate(arena->out_fd(), 0), 0);
  EXPECT_NE(::ftruncate(arena->in_fd_readonly(), 0), 0);
  // The runner's input descriptor maps read-only and cannot be made writable.
  void* ro = ::mmap(nullptr, 4096, PROT_READ, MAP_SHARED, arena->in_fd_readonly(), 0);
  ASSERT_NE(ro, MAP_FAILED);
  EXPECT_NE(::mprotect(ro, 4096, PROT_READ | PROT_WRITE), 0);
  EXPECT_EQ(::mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, arena->in_fd_readonly(), 0), MAP_FAILED);
  // ... while what the parent writes shows through it.
  arena->in_base()[5] = 77;
  EXPECT_EQ(static_cast<uint8_t*>(ro)[5], 77);
  ::munmap(ro, 4096);
  int flags = ::fcntl(arena->in_fd_readonly(), F_GETFL);
  EXPECT_EQ(flags & O_ACCMODE, O_RDONLY);
}

TEST(Arena, NoReopenedDescriptorCanWriteTheInputs) {
  auto arena = Arena::create(8192, 8192);
  ASSERT_TRUE(arena);
  ASSERT_TRUE(arena->inputs_sealed()) << "this kernel refuses F_SEAL_FUTURE_WRITE";
  arena->in_base()[0] = 1;
  // Reopened read-write through /proc (a runner with /proc could try it), the memfd still
  // refuses a write and a writable shared mapping; the parent's own mapping still writes.
  std::string self = "/proc/self/fd/" + std::to_string(arena->in_fd_readonly());
  int rw = ::open(self.c_str(), O_RDWR | O_CLOEXEC);
  ASSERT_GE(rw, 0);
  uint8_t byte = 9;
  EXPECT_EQ(::pwrite(rw, &byte, 1, 0), -1);
  EXPECT_EQ(::mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, rw, 0), MAP_FAILED);
  EXPECT_NE(::fallocate(rw, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, 4096), 0);
  ::close(rw);
  EXPECT_EQ(arena->in_base()[0], 1);
  arena->in_base()[0] = 2;
  EXPECT_EQ(arena->in_base()[0], 2);
  // The outputs stay writable for the runner.
  void* out = ::mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, arena->out_fd(), 0);
  EXPECT_NE(out, MAP_FAILED);
  if (out != MAP_FAILED) ::munmap(out, 4096);
}

}  // namespace
}  // namespace kope::eval
