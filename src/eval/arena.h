// eval/arena.h — the shared memory a runner's kernel reads and writes.
//
// An Arena is two memfds, one for inputs and one for outputs, plus a one-page status memfd.
// The parent maps all of them read-write; the runner receives the inputs through a read-only
// descriptor (so it can never map them writable), and once the parent's mapping exists the
// input memfd is sealed against any new writer (F_SEAL_FUTURE_WRITE); the outputs read-write. The memfds are
// sized once for the largest case and sealed against shrinking and growing, so a runner cannot
// truncate them under the parent. Each tensor is placed so that its last byte ends at most 63
// bytes before a page boundary (the runner puts a PROT_NONE guard page there and before the
// first page); the slack bytes around the data are filled with a canary that the parent checks.
// Not thread-safe: one Arena per session. Two sessions may share the buffers (share_buffers:
// the comparison with the incumbent runs both kernels on the same pages), each with its own
// status page.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "eval/runner_protocol.h"
#include "kope/error.h"
#include "kope/spec.h"

namespace kope::eval {

// Where one tensor lives in its memfd. `map_length` is a page multiple; the data occupies
// [data_offset, data_offset + data_bytes) of the mapping, 64-byte aligned.
struct Placement {
  uint64_t file_offset = 0;
  uint64_t map_length = 0;
  uint64_t data_offset = 0;
  uint64_t data_bytes = 0;
};

// The tensors of one case: `in_slots` sets of inputs and `out_slots` sets of outputs.
struct CaseLayout {
  int in_slots = 0;
  int out_slots = 0;
  std::vector<std::vector<Placement>> inputs;   // [slot][input]
  std::vector<std::vector<Placement>> outputs;  // [slot][output]
  uint64_t in_bytes = 0;   // extent used in the input memfd
  uint64_t out_bytes = 0;  // extent used in the output memfd
};

// Lays out a case's tensors. Deterministic; `page` is the page size.
CaseLayout layout_case(const spec::OpSpec& op, const spec::Case& c, int in_slots, int out_slots, size_t page);

// Fills `bytes` bytes with a pseudo-random pattern from `seed` (fast, for poisoning outputs).
void fill_pattern(void* dst, size_t bytes, uint64_t seed);
// True when `bytes` bytes equal fill_pattern(seed) of the same length.
bool matches_pattern(const void* src, size_t bytes, uint64_t seed);
// Part `part` of `parts` (0 <= part < parts) of the same fill or check, split at the pattern's
// block boundaries: the parts of one buffer together write or check exactly what the whole call
// does, so they can run on different threads.
void fill_pattern_part(void* dst, size_t bytes, uint64_t seed, int part, int parts);
bool matches_pattern_part(const void* src, size_t bytes, uint64_t seed, int part, int parts);
// True when bytes [offset, offset + n) of a buffer filled by fill_pattern(seed) are unchanged;
// `src` points at the buffer's first byte.
bool matches_pattern_at(const void* src, size_t offset, size_t n, uint64_t seed);

class Arena {
 public:
  // Creates the memfds with these capacities (rounded up to pages). Fails with io.
  static Result<Arena> create(uint64_t in_capacity, uint64_t out_capacity);
  // An Arena over the same input and output memfds (the same pages, mapped once) with a status
  // page of its own, for a second runner. Fails with io.
  Result<Arena> share_buffers() const;
  Arena() = default;  // empty: no memfds
  Arena(Arena&& other) noexcept;
  Arena& operator=(Arena&& other) noexcept;
  Arena(const Arena&) = delete;
  Arena& operator=(const Arena&) = delete;
  ~Arena();

  uint8_t* in_base() const { return m_in; }
  uint8_t* out_base() const { return m_out; }
  uint64_t in_capacity() const { return m_buffers ? m_buffers->in_cap : 0; }
  uint64_t out_capacity() const { return m_buffers ? m_buffers->out_cap : 0; }
  int in_fd_readonly() const { return m_buffers ? m_buffers->in_ro_fd : -1; }
  // The input memfd carries F_SEAL_FUTURE_WRITE: only the parent's own mapping can write it, so
  // no runner can change an input, whatever it does with its descriptor.
  bool inputs_sealed() const { return m_buffers && m_buffers->inputs_sealed; }
  int out_fd() const { return m_buffers ? m_buffers->out_fd : -1; }
  int status_fd() const { return m_status_fd; }
  proto::StatusPage* status() const { return m_status; }

  // Pointers to a placed tensor's data.
  uint8_t* input(const Placement& p) const { return m_in + p.file_offset + p.data_offset; }
  uint8_t* output(const Placement& p) const { return m_out + p.file_offset + p.data_offset; }

  // Writes the canary (derived from `seed`) into the slack around a tensor's data.
  void write_canary(bool output, const Placement& p, uint64_t seed) const;
  // True when the slack still holds that canary; otherwise `offset` receives the first changed
  // byte's position relative to the data's first byte (negative: before it).
  bool check_canary(bool output, const Placement& p, uint64_t seed, int64_t* offset) const;

  // Clears the status page.
  void reset_status() const;

 private:
  // The input and output memfds and the parent's mappings of them, closed with the last Arena
  // that shares them.
  struct Buffers {
    int in_fd = -1;
    int in_ro_fd = -1;
    int out_fd = -1;
    uint8_t* in = nullptr;
    uint8_t* out = nullptr;
    uint64_t in_cap = 0;
    uint64_t out_cap = 0;
    bool inputs_sealed = false;
    ~Buffers();
  };
  Status make_status();
  void close_status();
  std::shared_ptr<Buffers> m_buffers;
  uint8_t* m_in = nullptr;   // m_buffers->in and ->out, for the accessors
  uint8_t* m_out = nullptr;
  int m_status_fd = -1;
  proto::StatusPage* m_status = nullptr;
};

}  // namespace kope::eval
