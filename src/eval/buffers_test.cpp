// Data-set buffers (measure.h: AlignedBytes) and the pool that keeps big ones for reuse.
#include <gtest/gtest.h>

#include <cstdint>
#include <optional>

#include "eval/measure.h"

namespace kope::eval {
namespace {

constexpr size_t k_mib = size_t{1} << 20;

TEST(AlignedBytes, AreAlignedAndAsBigAsAsked) {
  for (size_t n : {size_t{1}, size_t{63}, size_t{4097}, 3 * k_mib + 5}) {
    AlignedBytes b(n);
    EXPECT_EQ(b.size(), n);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(b.data()) % 64, 0u) << n;
    b.data()[n - 1] = 1;  // every byte is writable
  }
}

// A big buffer freed serves the next request of about its size, smaller ones included: cases of
// different operators differ in size, and a fresh buffer costs a page fault per page.
TEST(AlignedBytes, ABigBufferFreedServesTheNextRequestOfAboutItsSize) {
  std::optional<AlignedBytes> a(std::in_place, 40 * k_mib + 3);
  uint8_t* p = a->data();
  a.reset();
  AlignedBytes b(36 * k_mib);  // a tenth smaller: the same buffer
  EXPECT_EQ(b.data(), p);
  EXPECT_EQ(b.size(), 36 * k_mib);
}

TEST(AlignedBytes, ABufferFarBiggerThanTheRequestIsNotTaken) {
  std::optional<AlignedBytes> a(std::in_place, 48 * k_mib);
  uint8_t* p = a->data();
  a.reset();
  {
    AlignedBytes small(8 * k_mib);  // a sixth of it: not worth the memory it would hold
    EXPECT_NE(small.data(), p);
  }
  // Still kept, with its whole size: a request it fits takes it, to the last byte.
  AlignedBytes b(48 * k_mib);
  EXPECT_EQ(b.data(), p);
  b.data()[48 * k_mib - 1] = 7;
}

}  // namespace
}  // namespace kope::eval
