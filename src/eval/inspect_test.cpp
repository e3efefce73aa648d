// The inspection rules on real objects compiled by the toolchain candidates use.
#include "eval/inspect.h"

#include <gtest/gtest.h>

#include "util/fs.h"
#include "util/subprocess.h"

namespace kope::eval {
namespace {

struct Built {
  elf::File object;
  std::string flagged;
};

// Compiles `source` the way candidates are compiled and filters its disassembly like the build
// sandbox does.
Built compile(const std::string& source) {
  auto dir = util::TempDir::create("kope-inspect-test-");
  EXPECT_TRUE(dir);
  auto src = dir->path() / "k.cpp";
  EXPECT_TRUE(util::write_file_atomic(src, source));
  util::RunOptions ro;
  ro.spawn.argv = {"g++", "-O3", "-march=native", "-fopenmp", "-std=c++17", "-fPIC", "-c", src.string(), "-o", (dir->path() / "k.o").string()};
  ro.timeout = std::chrono::seconds(120);
  auto r = util::run(ro);
  EXPECT_TRUE(r && r->status.success()) << (r ? r->err : r.error().message);
  util::RunOptions dis;
  dis.spawn.argv = {"/bin/sh", "-c", std::string("objdump -d --no-show-raw-insn -w k.o | grep -E '") + k_disassembly_filter + "'"};
  dis.spawn.cwd = dir->path();
  auto d = util::run(dis);
  EXPECT_TRUE(d);
  auto obj = elf::read(dir->path() / "k.o");
  EXPECT_TRUE(obj) << obj.error().message;
  return {*obj, d->out};
}

std::shared_ptr<const SymbolPolicy> policy() {
  auto p = SymbolPolicy::for_compiler("g++");
  EXPECT_TRUE(p) << p.error().message;
  return *p;
}

InspectionReport inspect(const std::string& source) {
  Built b = compile(source);
  return policy()->inspect(b.object, b.flagged);
}

const char* k_head = "#include <cstdint>\n#include <cmath>\n#include <cstdio>\n#include <vector>\n#include <stdexcept>\n#include <omp.h>\n#include <immintrin.h>\n";

TEST(Inspect, HonestKernelsPass) {
  auto rep = inspect(std::string(k_head) + R"(
extern "C" void kope_kernel(const float* x, float* y, int64_t N) {
  std::vector<float> tmp(static_cast<size_t>(N));
  #pragma omp parallel for
  for (int64_t i = 0; i < N; ++i) tmp[i] = std::exp(x[i]) + static_cast<float>(omp_get_thread_num() * 0);
  for (int64_t i = 0; i + 8 <= N; i += 8) _mm256_storeu_ps(y + i, _mm256_loadu_ps(tmp.data() + i));
  for (int64_t i = N / 8 * 8; i < N; ++i) y[i] = tmp[i];
  if (N < 0) throw std::runtime_error("negative");
  if (N == 12345) std::printf("debug %f\n", y[0]);
  __int128 q = static_cast<__int128>(N) * 3; y[0] += static_cast<float>(q / (N + 1));
}
)");
  EXPECT_FALSE(rep.rejected) << rep.reason;
  EXPECT_TRUE(rep.defines_entry);
}

TEST(Inspect, TimerInterpositionIsRejected) {
  auto rep = inspect(std::string(k_head) + R"(
#include <time.h>
extern "C" int clock_gettime(clockid_t, struct timespec* ts) { ts->tv_sec = 0; ts->tv_nsec = 0; return 0; }
extern "C" void kope_kernel(const float* x, float* y, int64_t N) { for (int64_t i = 0; i < N; ++i) y[i] = x[i]; }
)");
  ASSERT_TRUE(rep.rejected);
  EXPECT_NE(rep.reason.find("defines clock_gettime"), std::string::npos) << rep.reason;
}

// One object importing everything at once (one compile): every import is named with its reason.
TEST(Inspect, ForbiddenImportsAreNamed) {
  struct Case {
    const char* symbol;
    const char* why;
  };
  const char* body = R"(
#include <unistd.h>
#include <cstdlib>
#include <dlfcn.h>
#include <sys/socket.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <sys/mman.h>
#include <time.h>
extern "C" void cblas_sgemm();
extern "C" void sgemm_();
extern "C" void kope_entry();
void f() {
  fork();
  std::system("ls");
  std::fopen("/etc/passwd", "r");
  dlopen("x", 0);
  socket(2, 1, 0);
  pthread_create(nullptr, nullptr, nullptr, nullptr);
  syscall(SYS_getpid);
  std::getenv("HOME");
  timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  (void)omp_get_wtime();
  cblas_sgemm();
  sgemm_();
  kope_entry();
  mmap(nullptr, 1, 0, 0, -1, 0);
}
extern "C" void kope_kernel(const float* x, float* y, int64_t N) { f(); y[0] = x[0]; }
)";
  auto rep = inspect(std::string(k_head) + body);
  ASSERT_TRUE(rep.rejected);
  std::string all;
  for (const auto& f : rep.findings) all += f + "\n";
  for (const Case& c : std::initializer_list<Case>{
           {"fork", "creates a process"},     {"system", "creates a process"},   {"fopen", "touches files"},
           {"dlopen", "loads code"},          {"socket", "network"},             {"pthread_create", "threads"},
           {"syscall", "raw system calls"},   {"getenv", "environment"},         {"clock_gettime", "clock"},
           {"omp_get_wtime", "clock"},        {"cblas_sgemm", "vendor library"}, {"sgemm_", "vendor library"},
           {"kope_entry", "reference"},       {"mmap", "maps memory"}}) {
    std::string line = std::string("imports ") + c.symbol + ":";
    size_t at = all.find(line);
    ASSERT_NE(at, std::string::npos) << c.symbol << "\n" << all;
    std::string finding = all.substr(at, all.find('\n', at) - at);
    EXPECT_NE(finding.find(c.why), std::string::npos) << finding;
  }
}

TEST(Inspect, ConstructorsAreRejected) {
  auto rep = inspect(std::string(k_head) + R"(
__attribute__((constructor)) static void start() { std::puts("hi"); }
extern "C" void kope_kernel(const float* x, float* y, int64_t N) { y[0] = x[0]; }
)");
  ASSERT_TRUE(rep.rejected);
  EXPECT_NE(rep.reason.find("static constructor"), std::string::npos) << rep.reason;
  auto ios = inspect("#include <iostream>\n#include <cstdint>\nextern \"C\" void kope_kernel(const float* x, float* y, int64_t N) { std::cout << N; }\n");
  ASSERT_TRUE(ios.rejected);
  EXPECT_NE(ios.reason.find("<iostream>"), std::string::npos) << ios.reason;
  auto global = inspect("#include <cstdint>\n#include <vector>\nstatic std::vector<float> g(100);\nextern \"C\" void kope_kernel(const float* x, float* y, int64_t N) { y[0] = g[0] + x[0]; }\n");
  EXPECT_TRUE(global.rejected) << "a global object with a constructor";
}

TEST(Inspect, RawSyscallsAndTimestampCounterAreFound) {
  auto rep = inspect(std::string(k_head) + R"(
extern "C" void kope_kernel(const float* x, float* y, int64_t N) {
  long r;
  asm volatile("syscall" : "=a"(r) : "a"(39) : "rcx", "r11", "memory");
  y[0] = x[0] + static_cast<float>(r * 0);
}
)");
  ASSERT_TRUE(rep.rejected);
  EXPECT_NE(rep.reason.find("raw system call"), std::string::npos) << rep.reason;
  EXPECT_NE(rep.reason.find("kope_kernel"), std::string::npos) << rep.reason;
  auto bytes = inspect(std::string(k_head) + R"(
extern "C" void kope_kernel(const float* x, float* y, int64_t N) { asm volatile(".byte 0x0f, 0x05" ::: "rax", "rcx", "r11", "memory"); y[0] = x[0]; }
)");
  EXPECT_TRUE(bytes.rejected) << "hand-encoded syscall";
  auto tsc = inspect(std::string(k_head) + "#include <x86intrin.h>\nextern \"C\" void kope_kernel(const float* x, float* y, int64_t N) { y[0] = x[0] + (float)(__rdtsc() & 0); }\n");
  ASSERT_TRUE(tsc.rejected);
  EXPECT_NE(tsc.reason.find("time-stamp counter"), std::string::npos) << tsc.reason;
}

TEST(Inspect, IndirectFunctionsAreRejected) {
  auto rep = inspect(std::string(k_head) + R"(
__attribute__((target_clones("avx2", "default"))) float twice(float v) { return 2 * v; }
extern "C" void kope_kernel(const float* x, float* y, int64_t N) { y[0] = twice(x[0]); }
)");
  ASSERT_TRUE(rep.rejected);
  EXPECT_NE(rep.reason.find("indirect function"), std::string::npos) << rep.reason;
}

TEST(Inspect, MissingEntryIsNoted) {
  auto rep = inspect("extern \"C\" void kernel_typo(const float* x, float* y, long N) { y[0] = x[0]; }\n");
  EXPECT_FALSE(rep.rejected);
  EXPECT_FALSE(rep.defines_entry);
}

// The static-data note: only for the candidate's own writable statics, each named; never for
// what OpenMP, exception tables, `static inline` functions or constant tables bring along.
TEST(Inspect, WritableStaticDataIsNamedOnlyWhenTheCandidateKeepsIt) {
  auto honest = inspect(std::string(k_head) + R"(
static inline float sq(float v) { return v * v; }
static const float k_table[4] = {1, 2, 3, 4};
extern "C" void kope_kernel(const float* x, float* y, int64_t N) {
  std::vector<float> tmp(static_cast<size_t>(N));
  #pragma omp parallel for schedule(dynamic)
  for (int64_t i = 0; i < N; ++i) tmp[i] = sq(x[i]) + k_table[i & 3];
  float total = 0;
  #pragma omp parallel for
  for (int64_t i = 0; i < N; ++i) {
    #pragma omp critical(sum)
    total += tmp[i];
  }
  for (int64_t i = 0; i < N; ++i) y[i] = tmp[i] + total * 0;
}
)");
  EXPECT_FALSE(honest.rejected) << honest.reason;
  for (const auto& n : honest.notes) EXPECT_EQ(n.find("static data"), std::string::npos) << n;

  auto stateful = inspect(std::string(k_head) + R"(
namespace { int calls = 0; }
static thread_local float per_thread[4];
extern "C" void kope_kernel(const float* x, float* y, int64_t N) {
  static int local_count = 0;
  ++local_count;
  ++calls;
  per_thread[N & 3] += x[0];
  for (int64_t i = 0; i < N; ++i) y[i] = x[i] + static_cast<float>(local_count + calls) + per_thread[0];
}
)");
  EXPECT_FALSE(stateful.rejected) << stateful.reason;
  std::string note;
  for (const auto& n : stateful.notes) {
    if (n.find("static data") != std::string::npos) note = n;
  }
  ASSERT_FALSE(note.empty());
  EXPECT_NE(note.find("kope_kernel::local_count"), std::string::npos) << note;
  EXPECT_NE(note.find("calls"), std::string::npos) << note;
  EXPECT_NE(note.find("per_thread"), std::string::npos) << note;
}

// Rules on names alone, with a hand-made policy.
TEST(Inspect, PolicyOnNames) {
  SymbolPolicy p({"memcpy", "clock_gettime", "fork", "index"}, {"expf", "sinf"}, {"omp_get_thread_num", "GOMP_parallel", "omp_get_wtime"},
                 {"__udivti3"}, {"_ZSt9terminatev", "_Znwm"});
  EXPECT_EQ(p.import_problem("memcpy"), "");
  EXPECT_EQ(p.import_problem("expf"), "");
  EXPECT_EQ(p.import_problem("GOMP_parallel"), "");
  EXPECT_EQ(p.import_problem("__udivti3"), "");
  EXPECT_EQ(p.import_problem("_Znwm"), "");
  EXPECT_EQ(p.import_problem("_ZSt20__throw_length_errorPKc"), "");
  EXPECT_EQ(p.import_problem("memcpy@GLIBC_2.14"), "");
  EXPECT_NE(p.import_problem("fork"), "");
  EXPECT_NE(p.import_problem("omp_get_wtime"), "");
  EXPECT_NE(p.import_problem("index"), "");  // libc, but not allowlisted
  EXPECT_NE(p.import_problem("mystery_function"), "");
  EXPECT_NE(p.definition_problem("clock_gettime", false), "");
  EXPECT_NE(p.definition_problem("expf", true), "");
  EXPECT_NE(p.definition_problem("kope_entry", true), "");
  EXPECT_NE(p.definition_problem("_Znwm", true), "");   // replacing operator new
  EXPECT_EQ(p.definition_problem("_Znwm", false), "");  // a weak (inline/template) copy is normal
  EXPECT_EQ(p.definition_problem("my_helper", true), "");
}

TEST(Inspect, DisassemblyFilterParsing) {
  auto f = forbidden_instructions(
      "0000000000000000 <kope_kernel>:\n"
      "  1b:\tsyscall \n"
      "0000000000000040 <_Z6helperv>:\n"
      "  44:\trdtsc  \n"
      "  50:\tint    $0x80\n");
  ASSERT_EQ(f.size(), 3u);
  EXPECT_NE(f[0].find("syscall in kope_kernel"), std::string::npos) << f[0];
  EXPECT_NE(f[1].find("rdtsc in helper()"), std::string::npos) << f[1];
  EXPECT_NE(f[2].find("int    $0x80"), std::string::npos) << f[2];
  EXPECT_TRUE(forbidden_instructions("0000000000000000 <syscall_wrapper>:\n").empty());
}

TEST(Elf, RejectsGarbage) {
  EXPECT_FALSE(elf::parse("not an elf"));
  std::string truncated = "\x7f" "ELF\x02\x01\x01";
  truncated.resize(40, '\0');
  EXPECT_FALSE(elf::parse(truncated));
}

}  // namespace
}  // namespace kope::eval
