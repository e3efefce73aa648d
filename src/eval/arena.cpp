#include "eval/arena.h"

#include <fcntl.h>
#include <linux/falloc.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <algorithm>
#include <cstring>
#include <new>
#include <utility>

namespace kope::eval {

namespace {

uint64_t round_up(uint64_t v, uint64_t m) { return (v + m - 1) / m * m; }

// The pattern word for position i (8-byte granularity) of a stream seeded by `seed`: a cheap
// counter-based mix, so any range can be filled or checked without generating what precedes it.
inline uint64_t pattern_word(uint64_t seed, uint64_t i) {
  uint64_t z = seed + (i + 1) * 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 31)) * 0x7fb5d329728ea185ULL;
  z = (z ^ (z >> 27)) * 0x81dadef4bc2dd44dULL;
  return z ^ (z >> 33);
}

// A memfd of `bytes` bytes sealed against shrinking and growing; `final` also seals the seals.
Result<int> make_memfd(const char* name, uint64_t bytes, bool final = true) {
  int fd = ::memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0) return fail(ErrorKind::io, "memfd_create: {}", std::strerror(errno));
  if (::ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
    int e = errno;
    ::close(fd);
    return fail(ErrorKind::io, "cannot size a {}-byte memfd: {}", bytes, std::strerror(e));
  }
  if (::fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | (final ? F_SEAL_SEAL : 0)) != 0) {
    int e = errno;
    ::close(fd);
    return fail(ErrorKind::io, "cannot seal a memfd: {}", std::strerror(e));
  }
  return fd;
}

Result<uint8_t*> map_rw(int fd, uint64_t bytes) {
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
  if (p == MAP_FAILED) return fail(ErrorKind::io, "cannot map a {}-byte memfd: {}", bytes, std::strerror(errno));
  return static_cast<uint8_t*>(p);
}

}  // namespace

CaseLayout layout_case(const spec::OpSpec& op, const spec::Case& c, int in_slots, int out_slots, size_t page) {
  CaseLayout l;
  l.in_slots = in_slots;
  l.out_slots = out_slots;
  auto place = [&](uint64_t bytes, uint64_t* cursor) {
    Placement p;
    uint64_t rounded = round_up(bytes == 0 ? 1 : bytes, 64);
    p.map_length = round_up(rounded, page);
    p.data_offset = p.map_length - rounded;
    p.data_bytes = bytes;
    p.file_offset = *cursor;
    *cursor += p.map_length;
    return p;
  };
  for (int s = 0; s < in_slots; ++s) {
    std::vector<Placement> v;
    for (const auto& t : op.inputs) v.push_back(place(op.byte_size(t, c), &l.in_bytes));
    l.inputs.push_back(std::move(v));
  }
  for (int s = 0; s < out_slots; ++s) {
    std::vector<Placement> v;
    for (const auto& t : op.outputs) v.push_back(place(op.byte_size(t, c), &l.out_bytes));
    l.outputs.push_back(std::move(v));
  }
  return l;
}

namespace {

// The pattern repeats a block of k_block_words words drawn from the seed, each block xor-ed
// with a key of its own, so no two blocks are alike and word i is still computed alone
// (pattern_at). Filling or checking a block is then an xor and a memcpy or memcmp, about the
// cost of copying the bytes, where a hash per word cost several times that: outputs are
// poisoned before every timed batch, and checked after it.
constexpr size_t k_block_words = 512;
constexpr size_t k_block_bytes = k_block_words * 8;

uint64_t block_key(uint64_t seed, uint64_t block) { return pattern_word(~seed, block); }

uint64_t pattern_at(uint64_t seed, uint64_t i) { return pattern_word(seed, i % k_block_words) ^ block_key(seed, i / k_block_words); }

struct PatternBlocks {
  explicit PatternBlocks(uint64_t seed) : m_seed(seed) {
    for (size_t k = 0; k < k_block_words; ++k) m_base[k] = pattern_word(seed, k);
  }
  // The bytes of block `b`.
  const void* block(uint64_t b) {
    uint64_t key = block_key(m_seed, b);
    for (size_t k = 0; k < k_block_words; ++k) m_words[k] = m_base[k] ^ key;
    return m_words;
  }

 private:
  uint64_t m_seed;
  uint64_t m_base[k_block_words];
  uint64_t m_words[k_block_words];
};

}  // namespace

namespace {

// The blocks [first, last) of part `part` of `parts` of a `bytes`-byte pattern.
std::pair<uint64_t, uint64_t> part_blocks(size_t bytes, int part, int parts) {
  uint64_t blocks = (bytes + k_block_bytes - 1) / k_block_bytes;
  auto at = [&](int k) { return blocks * static_cast<uint64_t>(k) / static_cast<uint64_t>(parts); };
  return {at(part), at(part + 1)};
}

}  // namespace

void fill_pattern_part(void* dst, size_t bytes, uint64_t seed, int part, int parts) {
  auto* d = static_cast<uint8_t*>(dst);
  PatternBlocks blocks(seed);
  auto [first, last] = part_blocks(bytes, part, parts);
  for (uint64_t b = first; b < last; ++b) {
    size_t off = b * k_block_bytes;
    std::memcpy(d + off, blocks.block(b), std::min(k_block_bytes, bytes - off));
  }
}

bool matches_pattern_part(const void* src, size_t bytes, uint64_t seed, int part, int parts) {
  const auto* s = static_cast<const uint8_t*>(src);
  PatternBlocks blocks(seed);
  auto [first, last] = part_blocks(bytes, part, parts);
  for (uint64_t b = first; b < last; ++b) {
    size_t off = b * k_block_bytes;
    if (std::memcmp(s + off, blocks.block(b), std::min(k_block_bytes, bytes - off)) != 0) return false;
  }
  return true;
}

void fill_pattern(void* dst, size_t bytes, uint64_t seed) { fill_pattern_part(dst, bytes, seed, 0, 1); }

bool matches_pattern(const void* src, size_t bytes, uint64_t seed) { return matches_pattern_part(src, bytes, seed, 0, 1); }

bool matches_pattern_at(const void* src, size_t offset, size_t n, uint64_t seed) {
  const auto* s = static_cast<const uint8_t*>(src);
  for (size_t i = offset; i < offset + n; ++i) {
    uint64_t w = pattern_at(seed, i / 8);
    uint8_t b;
    std::memcpy(&b, reinterpret_cast<const uint8_t*>(&w) + (i % 8), 1);
    if (s[i] != b) return false;
  }
  return true;
}

Result<Arena> Arena::create(uint64_t in_capacity, uint64_t out_capacity) {
  auto page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  Arena a;
  a.m_buffers = std::make_shared<Buffers>();
  Buffers& b = *a.m_buffers;
  b.in_cap = round_up(in_capacity == 0 ? page : in_capacity, page);
  b.out_cap = round_up(out_capacity == 0 ? page : out_capacity, page);
  KOPE_ASSIGN(b.in_fd, make_memfd("kope-inputs", b.in_cap, false));
  KOPE_ASSIGN(b.out_fd, make_memfd("kope-outputs", b.out_cap));
  // A second, read-only open file description of the inputs: a mapping made through it can
  // never become writable (mprotect fails with EACCES).
  std::string self = "/proc/self/fd/" + std::to_string(b.in_fd);
  b.in_ro_fd = ::open(self.c_str(), O_RDONLY | O_CLOEXEC);
  if (b.in_ro_fd < 0) return fail(ErrorKind::io, "cannot reopen the input memfd read-only: {}", std::strerror(errno));
  KOPE_ASSIGN(b.in, map_rw(b.in_fd, b.in_cap));
  // With the parent's mapping made, no new writable mapping of the inputs and no write(2) to
  // them is possible any more, whoever holds or reopens the memfd (Linux 5.1+; older kernels
  // refuse the seal, and the inputs are then only as read-only as the runner's descriptor).
  b.inputs_sealed = ::fcntl(b.in_fd, F_ADD_SEALS, F_SEAL_FUTURE_WRITE | F_SEAL_SEAL) == 0;
  if (!b.inputs_sealed && ::fcntl(b.in_fd, F_ADD_SEALS, F_SEAL_SEAL) != 0) {
    return fail(ErrorKind::io, "cannot seal the input memfd: {}", std::strerror(errno));
  }
  KOPE_ASSIGN(b.out, map_rw(b.out_fd, b.out_cap));
  a.m_in = b.in;
  a.m_out = b.out;
  KOPE_TRY(a.make_status());
  return a;
}

Result<Arena> Arena::share_buffers() const {
  Arena a;
  a.m_buffers = m_buffers;
  a.m_in = m_in;
  a.m_out = m_out;
  KOPE_TRY(a.make_status());
  return a;
}

Status Arena::make_status() {
  auto page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  KOPE_ASSIGN(m_status_fd, make_memfd("kope-status", page));
  KOPE_ASSIGN(uint8_t* st, map_rw(m_status_fd, page));
  m_status = new (st) proto::StatusPage();
  return {};
}

Arena::Arena(Arena&& other) noexcept { *this = std::move(other); }

Arena& Arena::operator=(Arena&& other) noexcept {
  if (this != &other) {
    close_status();
    m_buffers = std::move(other.m_buffers);
    m_in = std::exchange(other.m_in, nullptr);
    m_out = std::exchange(other.m_out, nullptr);
    m_status_fd = std::exchange(other.m_status_fd, -1);
    m_status = std::exchange(other.m_status, nullptr);
  }
  return *this;
}

Arena::~Arena() { close_status(); }

void Arena::close_status() {
  auto page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  if (m_status) ::munmap(m_status, page);
  if (m_status_fd >= 0) ::close(m_status_fd);
  m_status = nullptr;
  m_status_fd = -1;
}

Arena::Buffers::~Buffers() {
  if (in) ::munmap(in, in_cap);
  if (out) ::munmap(out, out_cap);
  for (int fd : {in_fd, in_ro_fd, out_fd}) {
    if (fd >= 0) ::close(fd);
  }
}

void Arena::write_canary(bool output, const Placement& p, uint64_t seed) const {
  uint8_t* base = (output ? m_out : m_in) + p.file_offset;
  fill_pattern(base, p.data_offset, seed);
  uint64_t tail = p.map_length - p.data_offset - p.data_bytes;
  fill_pattern(base + p.data_offset + p.data_bytes, tail, seed ^ 0x5bd1e995ULL);
}

bool Arena::check_canary(bool output, const Placement& p, uint64_t seed, int64_t* offset) const {
  const uint8_t* base = (output ? m_out : m_in) + p.file_offset;
  uint64_t tail = p.map_length - p.data_offset - p.data_bytes;
  // The tail (overflows) first: it is the likelier culprit and the smaller range.
  if (!matches_pattern(base + p.data_offset + p.data_bytes, tail, seed ^ 0x5bd1e995ULL)) {
    std::vector<uint8_t> want(tail);
    fill_pattern(want.data(), tail, seed ^ 0x5bd1e995ULL);
    for (uint64_t i = 0; i < tail; ++i) {
      if (base[p.data_offset + p.data_bytes + i] != want[i]) {
        if (offset) *offset = static_cast<int64_t>(p.data_bytes + i);
        return false;
      }
    }
  }
  if (!matches_pattern(base, p.data_offset, seed)) {
    std::vector<uint8_t> want(p.data_offset);
    fill_pattern(want.data(), p.data_offset, seed);
    for (uint64_t i = p.data_offset; i-- > 0;) {
      if (base[i] != want[i]) {
        if (offset) *offset = static_cast<int64_t>(i) - static_cast<int64_t>(p.data_offset);
        return false;
      }
    }
  }
  return true;
}

void Arena::reset_status() const {
  if (m_status) new (m_status) proto::StatusPage();
}

}  // namespace kope::eval
