// eval/runner_protocol.h — the wire format between the evaluator (parent) and kope-runner.
//
// The runner is started inside the sandbox with a SOCK_SEQPACKET socket (one message per
// packet, in order), two memfds holding the tensors (inputs read-only, outputs read-write) and
// a shared status page. The parent sends one command at a time and waits for exactly one reply
// carrying the same sequence number and token; anything else on the socket is a protocol
// violation. Nothing the runner says feeds a verdict by itself: the parent reads the outputs
// from shared memory and keeps the clock. Plain structs only: this header is compiled into the
// runner, which links nothing of kope.
#pragma once

#include <cstdint>

namespace kope::eval::proto {

inline constexpr uint32_t k_magic = 0x45504f4b;  // "KOPE"
inline constexpr uint32_t k_version = 2;  // 2: MapRequest's inout copies
inline constexpr uint32_t k_max_tensors = 64;   // inputs (and, separately, outputs) of one op
inline constexpr uint32_t k_max_slots = 4;      // input (and output) buffer sets per case
inline constexpr uint32_t k_max_views = 2 * k_max_tensors * k_max_slots;
inline constexpr uint32_t k_max_dims = 16;
inline constexpr uint32_t k_max_combos = 16;

enum class Op : uint32_t {
  map = 1,    // MapRequest: replace all views by new ones (a new case)
  call = 2,   // CallRequest: one kernel call
  batch = 3,  // BatchRequest: n calls rotating over (input slot, output slot) combinations
  ping = 4,   // Header only: reply at once (measures the round trip)
  exit = 5,   // Header only: reply, then _exit(0)
};

enum class ReplyKind : uint32_t {
  ready = 100,  // after start-up: the kernel is loaded (code 0) or not (code != 0, text says why)
  ok = 101,     // map done
  done = 102,   // call/batch done
  error = 103,  // the command could not be carried out (text says why)
};

enum class Mode : uint32_t {
  candidate = 1,  // untrusted: seccomp allowlist installed before the first call
  trusted = 2,    // references and library baselines: no seccomp
};

struct Header {
  uint32_t op = 0;
  uint32_t seq = 0;
  uint64_t token = 0;  // echoed in the reply
};

// One tensor: `map_length` bytes (a page multiple) of the memfd at `file_offset`, mapped between
// two PROT_NONE guard regions of 16 pages; the tensor's data starts `data_offset` bytes into the
// mapping and ends at most 63 bytes before the trailing guard region.
struct ViewSpec {
  uint32_t memfd = 0;     // 0: the input memfd (read-only), 1: the output memfd (read-write)
  uint32_t writable = 0;
  uint64_t file_offset = 0;
  uint64_t map_length = 0;
  uint64_t data_offset = 0;
  uint64_t data_bytes = 0;
};

struct MapRequest {
  Header h;
  uint32_t view_count = 0;
  uint32_t input_count = 0;   // tensors per input slot
  uint32_t output_count = 0;  // tensors per output slot
  uint32_t dim_count = 0;
  uint32_t in_slots = 0;
  uint32_t out_slots = 0;
  ViewSpec views[k_max_views];
  uint32_t input_view[k_max_slots][k_max_tensors];   // view index of input t in slot s
  uint32_t output_view[k_max_slots][k_max_tensors];  // view index of output t in slot s
  int64_t dims[k_max_dims];
  // Inouts (docs/design.md §2): before every call, input copy_input[k] of the call's input slot
  // is copied into output copy_output[k] of its output slot, so an in-place update always
  // starts from the same initial contents.
  uint32_t copy_count = 0;
  uint32_t copy_input[k_max_tensors];
  uint32_t copy_output[k_max_tensors];
};

struct CallRequest {
  Header h;
  uint32_t in_slot = 0;
  uint32_t out_slot = 0;
};

// Call j (0-based) of the batch uses combination (j + phase) % combo_count.
struct BatchRequest {
  Header h;
  uint64_t calls = 0;
  uint32_t phase = 0;
  uint32_t combo_count = 0;
  uint8_t combo_in[k_max_combos];
  uint8_t combo_out[k_max_combos];
};

struct Reply {
  uint32_t kind = 0;
  uint32_t seq = 0;
  uint64_t token = 0;
  int32_t code = 0;
  int32_t pid = 0;      // ready: the runner's pid inside its namespace
  int32_t threads = 0;  // ready: OpenMP threads pre-created
  int32_t reserved = 0;
  char text[240] = {};
};

// Fault kinds the runner's signal handlers record.
enum class FaultWhere : uint32_t {
  none = 0,
  before_start = 1,  // in the guard page before a tensor
  past_end = 2,      // in the guard page after a tensor
  read_only = 3,     // a write into an input tensor (mapped read-only)
  elsewhere = 4,
};

// The status page: one shared page the runner writes and the parent reads (also after the
// runner died). Informational only; the candidate can scribble on it, which can change how a
// failure is described but never turns a failure into a success.
struct StatusPage {
  uint32_t magic = 0;
  uint32_t version = 0;
  volatile uint64_t calls_started = 0;
  volatile uint64_t calls_finished = 0;
  volatile int32_t fault_signal = 0;    // first fatal signal caught, 0 when none
  volatile int32_t fault_code = 0;      // si_code
  volatile uint64_t fault_addr = 0;
  volatile int32_t fault_view = -1;     // view index the address belongs to, -1 when none
  volatile uint32_t fault_where = 0;    // FaultWhere
  volatile int64_t fault_offset = 0;    // byte offset from that tensor's first byte
  volatile int32_t fault_write = -1;    // 1 write, 0 read, -1 unknown
  volatile int32_t syscall_nr = -1;     // SIGSYS: the forbidden system call
  volatile uint64_t alloc_failures = 0; // malloc/new that returned nothing
  volatile uint64_t alloc_failed_bytes = 0;  // the largest failed request
  volatile uint32_t in_kernel = 0;      // 1 while a kernel call is running
  // Device backends (host shims, see runner.cpp --host). The parent bumps input_generation
  // whenever it rewrites an input tensor, so a shim re-uploads inputs only when they changed; the
  // shim adds the device-event time of each call's kernels to device_ns. Both are informational
  // like the rest of the page: tampering can only make results wrong or a check fail.
  volatile uint64_t input_generation = 0;
  volatile uint64_t device_ns = 0;
  volatile uint64_t device_calls = 0;
};

}  // namespace kope::eval::proto
