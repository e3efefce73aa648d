// kope-runner: the disposable harness that runs one kernel inside the sandbox.
//
//   kope-runner --sock FD --in FD --out FD --status FD --kernel PATH --threads N
//               --mode candidate|trusted [--host DIR]
//
// Started by the evaluator inside bubblewrap (see eval/session.cpp), never by hand. It loads the
// kernel's shared object, pre-creates the OpenMP thread pool, installs a seccomp allowlist
// (candidate mode) and then obeys the parent's commands over a SOCK_SEQPACKET socket: map the
// tensors of a case from the shared memfds between guard pages, call the kernel once or in a
// batch, answer pings. It owns no clock and no verdict: the parent times the round trips and
// reads the outputs from shared memory. The runner links libc, libdl, libgomp and libseccomp
// only.
//
// With --host DIR the kernel object is a trusted host shim for a device runtime (OpenCL): it is
// loaded before any filter, `kope_host_prepare(DIR, ...)` sets the runtime up (its threads, the
// candidate's device binary from DIR), and the calls run under the loading filter only: the
// runtime maps the candidate's compiled code at its first launch (read-only opens, executable
// mappings), but can never start a process or thread, write a file or reach the network.
// `kope_host_map` (optional) learns each tensor's size after every map command;
// `kope_host_counters` (optional) gets the status page's input generation and device-clock
// counters. --ioctl 1 adds ioctl on open descriptors to the filter (GPU drivers). A trusted host
// object (--mode trusted --host: a GPU vendor baseline) runs without a filter, and its
// `kope_host_describe` (optional) fills the ready reply's text with its library's configuration.
#include <dlfcn.h>
#include <fcntl.h>
#include <omp.h>
#include <linux/seccomp.h>
#include <seccomp.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <new>

#include "eval/runner_protocol.h"

namespace proto = kope::eval::proto;

namespace {

using Entry = void (*)(void* const*, const int64_t*);
using HostPrepare = int (*)(const char* dir, char* why, size_t why_size);
using HostMap = void (*)(const uint64_t* in_bytes, uint32_t inputs, const uint64_t* out_bytes, uint32_t outputs);
using HostCounters = void (*)(volatile uint64_t* input_generation, volatile uint64_t* device_ns, volatile uint64_t* device_calls);

int g_sock = -1;
int g_in_fd = -1;
int g_out_fd = -1;
proto::StatusPage* g_status = nullptr;
size_t g_page = 4096;
size_t g_guard = 16 * 4096;  // PROT_NONE bytes before and after every tensor (address space only)
Entry g_entry = nullptr;
HostMap g_host_map = nullptr;

struct View {
  uint8_t* base = nullptr;  // start of the leading guard page
  size_t reserve = 0;       // guard + mapping + guard
  uint8_t* data = nullptr;
  uint64_t data_bytes = 0;
  uint64_t map_length = 0;
  bool writable = false;
};

View g_views[proto::k_max_views];
uint32_t g_view_count = 0;
uint32_t g_in_slots = 0;
uint32_t g_out_slots = 0;
// Pointer arrays per (input slot, output slot): inputs then outputs, as kope_entry expects.
void* g_args[proto::k_max_slots][proto::k_max_slots][2 * proto::k_max_tensors];
int64_t g_dims[proto::k_max_dims];
// The inouts' copies done before every call: argument from_arg's bytes into argument to_arg.
struct Copy {
  uint32_t from_arg = 0;
  uint32_t to_arg = 0;
  uint64_t bytes = 0;
};
Copy g_copies[proto::k_max_tensors];
uint32_t g_copy_count = 0;

// --- memory accounting: allocation failures are recorded so the parent can name them --------

void note_alloc_failure(size_t bytes) {
  if (g_status == nullptr) return;
  g_status->alloc_failures = g_status->alloc_failures + 1;
  if (bytes > g_status->alloc_failed_bytes) g_status->alloc_failed_bytes = bytes;
}

}  // namespace

// The runner exports these (see CMakeLists.txt), so every allocation in the process — the
// kernel's, libstdc++'s operator new, libgomp's — goes through them to glibc's allocator and a
// failure under the address-space limit is recorded before the kernel crashes on it.
extern "C" {
void* __libc_malloc(size_t);
void* __libc_calloc(size_t, size_t);
void* __libc_realloc(void*, size_t);
void* __libc_memalign(size_t, size_t);
void* __libc_valloc(size_t);
void* __libc_pvalloc(size_t);
void __libc_free(void*);

void* malloc(size_t n) noexcept {
  void* p = __libc_malloc(n);
  if (p == nullptr && n != 0) note_alloc_failure(n);
  return p;
}
void* calloc(size_t a, size_t b) noexcept {
  void* p = __libc_calloc(a, b);
  if (p == nullptr && a != 0 && b != 0) note_alloc_failure(a * b);
  return p;
}
void* realloc(void* q, size_t n) noexcept {
  void* p = __libc_realloc(q, n);
  if (p == nullptr && n != 0) note_alloc_failure(n);
  return p;
}
void free(void* p) noexcept { __libc_free(p); }
void* memalign(size_t align, size_t n) noexcept {
  void* p = __libc_memalign(align, n);
  if (p == nullptr && n != 0) note_alloc_failure(n);
  return p;
}
void* aligned_alloc(size_t align, size_t n) noexcept { return memalign(align, n); }
int posix_memalign(void** out, size_t align, size_t n) noexcept {
  if (align < sizeof(void*) || (align & (align - 1)) != 0) return EINVAL;
  void* p = __libc_memalign(align, n);
  if (p == nullptr && n != 0) {
    note_alloc_failure(n);
    return ENOMEM;
  }
  *out = p;
  return 0;
}
void* valloc(size_t n) noexcept {
  void* p = __libc_valloc(n);
  if (p == nullptr && n != 0) note_alloc_failure(n);
  return p;
}
void* pvalloc(size_t n) noexcept {
  void* p = __libc_pvalloc(n);
  if (p == nullptr && n != 0) note_alloc_failure(n);
  return p;
}
}

namespace {

// --- fatal signals: record what happened in the status page, then die by the same signal ------

void classify(uint64_t addr) {
  for (uint32_t i = 0; i < g_view_count; ++i) {
    const View& v = g_views[i];
    auto base = reinterpret_cast<uint64_t>(v.base);
    if (addr < base || addr >= base + v.reserve) continue;
    auto data = reinterpret_cast<uint64_t>(v.data);
    g_status->fault_view = static_cast<int32_t>(i);
    g_status->fault_offset = static_cast<int64_t>(addr - data);
    if (addr < base + g_guard) {
      g_status->fault_where = static_cast<uint32_t>(proto::FaultWhere::before_start);
    } else if (addr >= base + g_guard + v.map_length) {
      g_status->fault_where = static_cast<uint32_t>(proto::FaultWhere::past_end);
    } else if (!v.writable) {
      g_status->fault_where = static_cast<uint32_t>(proto::FaultWhere::read_only);
    } else {
      g_status->fault_where = static_cast<uint32_t>(proto::FaultWhere::elsewhere);
    }
    return;
  }
  g_status->fault_where = static_cast<uint32_t>(proto::FaultWhere::elsewhere);
}

void on_fatal(int sig, siginfo_t* si, void* ucv) {
  proto::StatusPage* st = g_status;
  if (st != nullptr && st->fault_signal == 0) {
    st->fault_signal = sig;
    st->fault_code = si->si_code;
    st->fault_addr = reinterpret_cast<uint64_t>(si->si_addr);
    if (sig == SIGSYS) st->syscall_nr = si->si_syscall;
    if (sig == SIGSEGV || sig == SIGBUS) {
      auto* uc = static_cast<ucontext_t*>(ucv);
      st->fault_write = (uc->uc_mcontext.gregs[REG_ERR] & 2) != 0 ? 1 : 0;
      classify(reinterpret_cast<uint64_t>(si->si_addr));
    }
  }
  // The handler was installed with SA_RESETHAND, so the signal raised again (pending until the
  // handler returns) kills the process by the default action: the parent sees this signal.
  ::syscall(SYS_tgkill, ::getpid(), ::gettid(), sig);
}

void install_fatal_handlers() {
  struct sigaction sa {};
  sa.sa_sigaction = on_fatal;
  sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESETHAND;
  sigemptyset(&sa.sa_mask);
  for (int sig : {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT, SIGSYS, SIGTRAP}) ::sigaction(sig, &sa, nullptr);
}

// Each thread needs its own alternate stack for the handler to run after a stack overflow.
void install_alt_stack() {
  stack_t ss {};
  ss.ss_size = 64 * 1024;
  ss.ss_sp = ::mmap(nullptr, ss.ss_size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (ss.ss_sp == MAP_FAILED) return;
  ::sigaltstack(&ss, nullptr);
}

// --- the socket ------------------------------------------------------------------------------

void send_reply(const proto::Header& h, proto::ReplyKind kind, int code, const char* fmt = nullptr, ...) {
  proto::Reply r;
  r.kind = static_cast<uint32_t>(kind);
  r.seq = h.seq;
  r.token = h.token;
  r.code = code;
  r.pid = static_cast<int32_t>(::getpid());
  if (fmt != nullptr) {
    va_list ap;
    va_start(ap, fmt);
    std::vsnprintf(r.text, sizeof r.text, fmt, ap);
    va_end(ap);
  }
  ssize_t n;
  do {
    n = ::write(g_sock, &r, sizeof r);
  } while (n < 0 && errno == EINTR);
  if (n != static_cast<ssize_t>(sizeof r)) ::_exit(4);
}

// glibc reads /proc/sys/vm/overcommit_memory the first time it shrinks a thread arena's heap
// (check_may_shrink_heap, cached for the process): an honest kernel whose OpenMP threads free
// their scratch would open a file under the filter and die as a cheat. One worker thread grows
// and trims its arena once here, before any filter, so glibc has read it.
void warm_thread_heap_trim() {
  constexpr int k_blocks = 32;
  constexpr size_t k_block = 96 * 1024;  // below the mmap threshold: from the thread's arena
  void* blocks[k_blocks];
  for (auto& b : blocks) {
    b = std::malloc(k_block);
    if (b != nullptr) std::memset(b, 0, k_block);
    asm volatile("" : : "r"(b) : "memory");  // the compiler may not elide the pair
  }
  for (int i = k_blocks - 1; i >= 0; --i) std::free(blocks[i]);
}

// --- seccomp ---------------------------------------------------------------------------------

// The allowlist for candidate code: memory, futexes (OpenMP), signals to itself, time, sleeping,
// reading and writing already-open descriptors, and exit. No new processes or threads (the pool
// already exists), no open/socket/exec, no executable memory. Anything else traps (SIGSYS); the
// handler records the call number and the process dies with SIGSYS.
//
// `loading` adds what the dynamic loader needs to map the kernel (read-only opens, executable
// mappings); it is installed before dlopen, so a constructor that slipped past the inspection
// still cannot start a process or thread, reach the network or write a file. The strict filter
// stacks on top of it before the first call.
bool g_allow_ioctl = false;  // --ioctl 1: GPU drivers talk to their device nodes by ioctl

bool install_seccomp(bool loading) {
  scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_TRAP);
  if (ctx == nullptr) return false;
  bool ok = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_TSYNC, 1) == 0;
  // no_new_privs is set at start-up; libseccomp must not call prctl again (the first filter
  // forbids it when the second is loaded).
  ok = ok && seccomp_attr_set(ctx, SCMP_FLTATR_CTL_NNP, 0) == 0;
  auto allow = [&](int nr) { ok = ok && seccomp_rule_add(ctx, SCMP_ACT_ALLOW, nr, 0) == 0; };
  for (int nr : {SCMP_SYS(read), SCMP_SYS(write), SCMP_SYS(readv), SCMP_SYS(writev), SCMP_SYS(close),
                 SCMP_SYS(fstat), SCMP_SYS(newfstatat), SCMP_SYS(lseek), SCMP_SYS(munmap), SCMP_SYS(mremap),
                 SCMP_SYS(madvise), SCMP_SYS(brk), SCMP_SYS(futex), SCMP_SYS(sched_yield),
                 SCMP_SYS(sched_getaffinity), SCMP_SYS(getpid), SCMP_SYS(gettid), SCMP_SYS(getcpu),
                 SCMP_SYS(rt_sigprocmask), SCMP_SYS(rt_sigreturn), SCMP_SYS(sigaltstack),
                 SCMP_SYS(clock_gettime), SCMP_SYS(clock_getres), SCMP_SYS(gettimeofday), SCMP_SYS(time),
                 SCMP_SYS(nanosleep), SCMP_SYS(clock_nanosleep), SCMP_SYS(exit), SCMP_SYS(exit_group),
                 SCMP_SYS(getrandom), SCMP_SYS(restart_syscall)}) {
    allow(nr);
  }
  if (g_allow_ioctl) allow(SCMP_SYS(ioctl));
  if (loading) {
    for (int nr : {SCMP_SYS(pread64), SCMP_SYS(mmap), SCMP_SYS(mprotect), SCMP_SYS(access), SCMP_SYS(faccessat),
                   SCMP_SYS(faccessat2), SCMP_SYS(statfs), SCMP_SYS(readlink), SCMP_SYS(getcwd)}) {
      allow(nr);
    }
    // Stacking the strict filter on top (filters can only ever restrict further).
    ok = ok && seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(seccomp), 1, SCMP_A0(SCMP_CMP_EQ, SECCOMP_SET_MODE_FILTER)) == 0;
    // Opening for reading only.
    ok = ok && seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(openat), 1,
                                SCMP_A2(SCMP_CMP_MASKED_EQ, O_ACCMODE | O_CREAT | O_TRUNC | O_APPEND, O_RDONLY)) == 0;
    ok = ok && seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(open), 1,
                                SCMP_A1(SCMP_CMP_MASKED_EQ, O_ACCMODE | O_CREAT | O_TRUNC | O_APPEND, O_RDONLY)) == 0;
  } else {
    // Memory, but never executable: no code generated at run time.
    ok = ok && seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(mmap), 1, SCMP_A2(SCMP_CMP_MASKED_EQ, PROT_EXEC, 0)) == 0;
    ok = ok && seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(mprotect), 1, SCMP_A2(SCMP_CMP_MASKED_EQ, PROT_EXEC, 0)) == 0;
  }
  // Signal handlers, but never for SIGSYS: the trap handler must stay ours.
  ok = ok && seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(rt_sigaction), 1, SCMP_A0(SCMP_CMP_NE, SIGSYS)) == 0;
  ok = ok && seccomp_rule_add(ctx, SCMP_ACT_KILL_PROCESS, SCMP_SYS(rt_sigaction), 1, SCMP_A0(SCMP_CMP_EQ, SIGSYS)) == 0;
  // Signals only to itself (abort, raise).
  auto self = static_cast<scmp_datum_t>(::getpid());
  ok = ok && seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(tgkill), 1, SCMP_A0(SCMP_CMP_EQ, self)) == 0;
  ok = ok && seccomp_load(ctx) == 0;
  seccomp_release(ctx);
  return ok;
}

// --- commands --------------------------------------------------------------------------------

void unmap_views() {
  for (uint32_t i = 0; i < g_view_count; ++i) {
    if (g_views[i].base != nullptr) ::munmap(g_views[i].base, g_views[i].reserve);
    g_views[i] = View{};
  }
  g_view_count = 0;
  g_in_slots = g_out_slots = 0;
  g_copy_count = 0;
}

bool do_map(const proto::MapRequest& m, char* why, size_t why_size) {
  unmap_views();
  if (m.view_count > proto::k_max_views || m.input_count + m.output_count > 2 * proto::k_max_tensors ||
      m.input_count > proto::k_max_tensors || m.output_count > proto::k_max_tensors ||
      m.dim_count > proto::k_max_dims || m.in_slots == 0 || m.in_slots > proto::k_max_slots ||
      m.out_slots == 0 || m.out_slots > proto::k_max_slots) {
    std::snprintf(why, why_size, "map request out of range");
    return false;
  }
  for (uint32_t i = 0; i < m.view_count; ++i) {
    const proto::ViewSpec& s = m.views[i];
    View& v = g_views[i];
    if (s.map_length % g_page != 0 || s.data_offset + s.data_bytes > s.map_length || s.memfd > 1) {
      std::snprintf(why, why_size, "view %u malformed", i);
      return false;
    }
    size_t len = s.map_length == 0 ? g_page : s.map_length;
    v.reserve = len + 2 * g_guard;
    void* base = ::mmap(nullptr, v.reserve, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (base == MAP_FAILED) {
      std::snprintf(why, why_size, "cannot reserve %zu bytes: %s", v.reserve, std::strerror(errno));
      return false;
    }
    v.base = static_cast<uint8_t*>(base);
    g_view_count = i + 1;
    if (s.map_length > 0) {
      int fd = s.memfd == 0 ? g_in_fd : g_out_fd;
      int prot = s.writable != 0 ? PROT_READ | PROT_WRITE : PROT_READ;
      // MAP_POPULATE: the view's pages are mapped in one go, not faulted in one by one by the
      // kernel's first calls (on a virtual machine each fault costs microseconds).
      void* p = ::mmap(v.base + g_guard, s.map_length, prot, MAP_SHARED | MAP_FIXED | MAP_POPULATE, fd,
                       static_cast<off_t>(s.file_offset));
      if (p == MAP_FAILED) {
        std::snprintf(why, why_size, "cannot map view %u (%llu bytes): %s", i,
                      static_cast<unsigned long long>(s.map_length), std::strerror(errno));
        return false;
      }
    }
    v.map_length = s.map_length;
    v.data = v.base + g_guard + s.data_offset;
    v.data_bytes = s.data_bytes;
    v.writable = s.writable != 0;
  }
  for (uint32_t a = 0; a < m.in_slots; ++a) {
    for (uint32_t b = 0; b < m.out_slots; ++b) {
      uint32_t k = 0;
      for (uint32_t t = 0; t < m.input_count; ++t) {
        uint32_t vi = m.input_view[a][t];
        if (vi >= m.view_count) return std::snprintf(why, why_size, "bad input view"), false;
        g_args[a][b][k++] = g_views[vi].data;
      }
      for (uint32_t t = 0; t < m.output_count; ++t) {
        uint32_t vi = m.output_view[b][t];
        if (vi >= m.view_count) return std::snprintf(why, why_size, "bad output view"), false;
        g_args[a][b][k++] = g_views[vi].data;
      }
    }
  }
  for (uint32_t d = 0; d < m.dim_count; ++d) g_dims[d] = m.dims[d];
  if (m.copy_count > m.output_count) return std::snprintf(why, why_size, "too many inout copies"), false;
  for (uint32_t k = 0; k < m.copy_count; ++k) {
    uint32_t in = m.copy_input[k], out = m.copy_output[k];
    if (in >= m.input_count || out >= m.output_count) return std::snprintf(why, why_size, "bad inout copy"), false;
    uint64_t in_bytes = g_views[m.input_view[0][in]].data_bytes, out_bytes = g_views[m.output_view[0][out]].data_bytes;
    if (in_bytes != out_bytes) return std::snprintf(why, why_size, "inout copy %u: sizes differ", k), false;
    g_copies[k] = Copy{in, m.input_count + out, in_bytes};
  }
  g_copy_count = m.copy_count;
  g_in_slots = m.in_slots;
  g_out_slots = m.out_slots;
  if (g_host_map != nullptr) {
    uint64_t in_bytes[proto::k_max_tensors];
    uint64_t out_bytes[proto::k_max_tensors];
    for (uint32_t t = 0; t < m.input_count; ++t) in_bytes[t] = g_views[m.input_view[0][t]].data_bytes;
    for (uint32_t t = 0; t < m.output_count; ++t) out_bytes[t] = g_views[m.output_view[0][t]].data_bytes;
    g_host_map(in_bytes, m.input_count, out_bytes, m.output_count);
  }
  return true;
}

inline void call_kernel(uint32_t a, uint32_t b) {
  // Each inout starts from its initial contents (trusted code: before the kernel runs).
  for (uint32_t k = 0; k < g_copy_count; ++k) {
    const Copy& c = g_copies[k];
    std::memcpy(g_args[a][b][c.to_arg], g_args[a][b][c.from_arg], c.bytes);
  }
  g_status->calls_started = g_status->calls_started + 1;
  g_status->in_kernel = 1;
  g_entry(g_args[a][b], g_dims);
  g_status->in_kernel = 0;
  g_status->calls_finished = g_status->calls_finished + 1;
}

[[noreturn]] void usage(const char* why) {
  std::fprintf(stderr, "kope-runner: %s (this program is started by kope's evaluator)\n", why);
  ::_exit(2);
}

}  // namespace

// Trusted kernels: what the vendor libraries the kernel object pulled in say about their own
// configuration (OpenBLAS core type and threads, oneDNN's effective ISA), for the ready reply.
// Looked up through the object's own dependencies, so a kernel that links neither reports "".
static void describe_libraries(void* handle, char* out, size_t size) {
  out[0] = '\0';
  size_t used = 0;
  using CharFn = char* (*)();
  using IntFn = int (*)();
  if (auto corename = reinterpret_cast<CharFn>(::dlsym(handle, "openblas_get_corename"))) {
    auto threads = reinterpret_cast<IntFn>(::dlsym(handle, "openblas_get_num_threads"));
    auto config = reinterpret_cast<CharFn>(::dlsym(handle, "openblas_get_config"));
    const char* core = corename();
    const char* cfg = config ? config() : nullptr;
    char version[32] = {};
    // "OpenBLAS 0.3.21 DYNAMIC_ARCH ..." -> "0.3.21"
    if (cfg && std::strncmp(cfg, "OpenBLAS ", 9) == 0) std::sscanf(cfg + 9, "%31s", version);
    int n = std::snprintf(out, size, "openblas core=%s threads=%d version=%s;", core ? core : "?", threads ? threads() : 0,
                          version[0] ? version : "?");
    if (n > 0) used = std::min(size, static_cast<size_t>(n));
  }
  if (auto isa = reinterpret_cast<IntFn>(::dlsym(handle, "dnnl_get_effective_cpu_isa"))) {
    if (used < size) {
      std::snprintf(out + used, size - used, " onednn isa=0x%x threads=%d;", static_cast<unsigned>(isa()), omp_get_max_threads());
    }
  }
}

// Answers the parent's commands until it says exit or goes away.
[[noreturn]] static void serve() {
  alignas(64) static unsigned char buf[sizeof(proto::MapRequest) + 64];
  for (;;) {
    ssize_t n = ::read(g_sock, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) ::_exit(0);  // the parent is gone
    if (static_cast<size_t>(n) < sizeof(proto::Header)) ::_exit(5);
    proto::Header h;
    std::memcpy(&h, buf, sizeof h);
    switch (static_cast<proto::Op>(h.op)) {
      case proto::Op::map: {
        if (static_cast<size_t>(n) != sizeof(proto::MapRequest)) ::_exit(5);
        char why[200] = {};
        bool ok = do_map(*reinterpret_cast<const proto::MapRequest*>(buf), why, sizeof why);
        if (ok) send_reply(h, proto::ReplyKind::ok, 0);
        else send_reply(h, proto::ReplyKind::error, 1, "%s", why);
        break;
      }
      case proto::Op::call: {
        if (static_cast<size_t>(n) != sizeof(proto::CallRequest)) ::_exit(5);
        proto::CallRequest c;
        std::memcpy(&c, buf, sizeof c);
        if (c.in_slot >= g_in_slots || c.out_slot >= g_out_slots) {
          send_reply(h, proto::ReplyKind::error, 1, "slot out of range");
          break;
        }
        call_kernel(c.in_slot, c.out_slot);
        std::fflush(stdout);
        send_reply(h, proto::ReplyKind::done, 0);
        break;
      }
      case proto::Op::batch: {
        if (static_cast<size_t>(n) != sizeof(proto::BatchRequest)) ::_exit(5);
        proto::BatchRequest b;
        std::memcpy(&b, buf, sizeof b);
        bool ok = b.combo_count > 0 && b.combo_count <= proto::k_max_combos;
        for (uint32_t i = 0; ok && i < b.combo_count; ++i) ok = b.combo_in[i] < g_in_slots && b.combo_out[i] < g_out_slots;
        if (!ok) {
          send_reply(h, proto::ReplyKind::error, 1, "bad batch");
          break;
        }
        uint32_t k = b.phase % b.combo_count;
        for (uint64_t j = 0; j < b.calls; ++j) {
          call_kernel(b.combo_in[k], b.combo_out[k]);
          if (++k == b.combo_count) k = 0;
        }
        std::fflush(stdout);
        send_reply(h, proto::ReplyKind::done, 0);
        break;
      }
      case proto::Op::ping:
        send_reply(h, proto::ReplyKind::done, 0);
        break;
      case proto::Op::exit:
        std::fflush(stdout);
        send_reply(h, proto::ReplyKind::done, 0);
        ::_exit(0);
      default:
        send_reply(h, proto::ReplyKind::error, 1, "unknown command %u", h.op);
    }
  }
}

int main(int argc, char** argv) {
  int status_fd = -1;
  int threads = 0;
  const char* kernel = nullptr;
  const char* host_dir = nullptr;
  proto::Mode mode = proto::Mode::candidate;
  for (int i = 1; i + 1 < argc; i += 2) {
    const char* k = argv[i];
    const char* v = argv[i + 1];
    if (std::strcmp(k, "--sock") == 0) g_sock = std::atoi(v);
    else if (std::strcmp(k, "--in") == 0) g_in_fd = std::atoi(v);
    else if (std::strcmp(k, "--out") == 0) g_out_fd = std::atoi(v);
    else if (std::strcmp(k, "--status") == 0) status_fd = std::atoi(v);
    else if (std::strcmp(k, "--kernel") == 0) kernel = v;
    else if (std::strcmp(k, "--threads") == 0) threads = std::atoi(v);
    else if (std::strcmp(k, "--host") == 0) host_dir = v;
    else if (std::strcmp(k, "--ioctl") == 0) g_allow_ioctl = std::strcmp(v, "1") == 0;
    else if (std::strcmp(k, "--mode") == 0) mode = std::strcmp(v, "trusted") == 0 ? proto::Mode::trusted : proto::Mode::candidate;
    else usage("unknown option");
  }
  if (g_sock < 0 || g_in_fd < 0 || g_out_fd < 0 || status_fd < 0 || kernel == nullptr) usage("missing options");
  g_page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  g_guard = 16 * g_page;
  void* sp = ::mmap(nullptr, g_page, PROT_READ | PROT_WRITE, MAP_SHARED, status_fd, 0);
  if (sp == MAP_FAILED) usage("cannot map the status page");
  ::close(status_fd);
  g_status = static_cast<proto::StatusPage*>(sp);
  ::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
  ::prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
  install_alt_stack();
  install_fatal_handlers();
  // Stdio allocates its buffers now, so printing from a kernel needs no fstat/ioctl later.
  std::setvbuf(stdout, nullptr, _IOFBF, 1 << 14);
  std::setvbuf(stderr, nullptr, _IONBF, 0);

  proto::Header boot;
  // The thread pool exists before the kernel is loaded (and before seccomp forbids clone).
  if (threads < 1) threads = 1;
  omp_set_num_threads(threads);
  int got = 0;
#pragma omp parallel num_threads(threads)
  {
    if (omp_get_thread_num() != 0) install_alt_stack();
    if (omp_get_thread_num() == 1) warm_thread_heap_trim();  // glibc caches the value per process
#pragma omp atomic
    got += 1;
  }
  bool candidate = mode == proto::Mode::candidate;
  bool host = host_dir != nullptr;
  // A host shim is trusted code and is loaded (and prepared) before the filter.
  if (candidate && !host && !install_seccomp(true)) {
    send_reply(boot, proto::ReplyKind::ready, 1, "cannot install the seccomp filter");
    ::_exit(3);
  }
  void* handle = ::dlopen(kernel, RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* e = ::dlerror();
    send_reply(boot, proto::ReplyKind::ready, 1, "cannot load the kernel: %s", e ? e : "?");
    ::_exit(3);
  }
  g_entry = reinterpret_cast<Entry>(::dlsym(handle, "kope_entry"));
  if (g_entry == nullptr) {
    send_reply(boot, proto::ReplyKind::ready, 1, "the kernel object has no kope_entry");
    ::_exit(3);
  }
  if (host) {
    auto prepare = reinterpret_cast<HostPrepare>(::dlsym(handle, "kope_host_prepare"));
    if (prepare == nullptr) {
      send_reply(boot, proto::ReplyKind::ready, 1, "the host shim has no kope_host_prepare");
      ::_exit(3);
    }
    g_host_map = reinterpret_cast<HostMap>(::dlsym(handle, "kope_host_map"));
    if (auto hc = reinterpret_cast<HostCounters>(::dlsym(handle, "kope_host_counters"))) {
      hc(&g_status->input_generation, &g_status->device_ns, &g_status->device_calls);
    }
    char why[200] = {};
    if (prepare(host_dir, why, sizeof why) != 0) {
      send_reply(boot, proto::ReplyKind::ready, 1, "%s", why);
      ::_exit(3);
    }
    // Runtimes install their own crash handlers (LLVM does, inside PoCL); ours must be the ones
    // that run, so faults are classified.
    install_fatal_handlers();
  }
  if (candidate && !install_seccomp(host)) {
    send_reply(boot, proto::ReplyKind::ready, 1, "cannot install the seccomp filter");
    ::_exit(3);
  }
  g_status->magic = proto::k_magic;
  g_status->version = proto::k_version;
  {
    proto::Reply r;
    r.kind = static_cast<uint32_t>(proto::ReplyKind::ready);
    r.pid = static_cast<int32_t>(::getpid());
    r.threads = got;
    if (!candidate && !host) describe_libraries(handle, r.text, sizeof r.text);
    // A trusted device baseline (eval/cuda/ABI.md) describes its library itself, after
    // kope_host_prepare made the device ready.
    using HostDescribe = void (*)(char*, size_t);
    if (!candidate && host) {
      if (auto describe = reinterpret_cast<HostDescribe>(::dlsym(handle, "kope_host_describe"))) describe(r.text, sizeof r.text);
    }
    if (::write(g_sock, &r, sizeof r) != static_cast<ssize_t>(sizeof r)) ::_exit(4);
  }

  serve();
}
