#include "eval/inspect.h"

#include <cxxabi.h>
#include <elf.h>

#include <cstdlib>
#include <map>
#include <mutex>
#include <regex>

#include "util/fs.h"
#include "util/strings.h"
#include "util/subprocess.h"

namespace kope::eval {

namespace {

// libc functions a kernel may import: memory, mem*/str* basics, printing (stdout and stderr
// are captured and never read for the verdict), sorting, exit paths and fortify/TLS helpers.
// Sleeping is allowed so that a sleeping kernel ends as a timeout rather than a rejection.
const std::unordered_set<std::string>& libc_allowed() {
  static const std::unordered_set<std::string> k = {
      "memcpy", "memmove", "memset", "memcmp", "bcmp", "memchr", "__memcpy_chk", "__memmove_chk",
      "__memset_chk", "strlen", "strnlen", "strcmp", "strncmp", "strcpy", "strncpy", "strcat",
      "strchr", "strrchr", "strstr", "__strcpy_chk", "__strcat_chk", "__strncpy_chk",
      "malloc", "calloc", "realloc", "reallocarray", "free", "aligned_alloc", "posix_memalign",
      "memalign", "valloc", "abort", "exit", "_exit", "_Exit", "quick_exit", "__assert_fail",
      "__stack_chk_fail", "__cxa_atexit", "__cxa_finalize", "__cxa_thread_atexit_impl",
      "__errno_location", "__tls_get_addr", "__libc_single_threaded", "printf", "fprintf",
      "sprintf", "snprintf", "vprintf", "vfprintf", "vsprintf", "vsnprintf", "puts", "fputs",
      "fputc", "putc", "putchar", "fwrite", "fflush", "__printf_chk", "__fprintf_chk",
      "__sprintf_chk", "__snprintf_chk", "__vsnprintf_chk", "__vfprintf_chk", "__vprintf_chk",
      "__vsprintf_chk", "stdout", "stderr", "_IO_putc", "qsort", "bsearch", "abs", "labs",
      "llabs", "div", "ldiv", "lldiv", "strtol", "strtoll", "strtoul", "strtoull", "strtod",
      "strtof", "atoi", "atol", "atof", "__isnan", "__isnanf", "__isinf", "__isinff",
      "__finite", "__finitef", "__ctype_b_loc", "__ctype_tolower_loc", "__ctype_toupper_loc",
      "tolower", "toupper", "nanosleep", "usleep", "sleep", "clock_nanosleep", "sched_yield",
      "_GLOBAL_OFFSET_TABLE_", "__dso_handle"};
  return k;
}

// Mangled libstdc++ names a kernel may import: new/delete, typeinfo and vtables, exceptions,
// strings and string streams, ostream printing, container helpers.
const std::vector<std::string>& cxx_allowed_prefixes() {
  static const std::vector<std::string> k = {
      "_Znw", "_Zna", "_Zdl", "_Zda", "_ZTI", "_ZTS", "_ZTV", "_ZSt9terminatev", "_ZSt7nothrow",
      "_ZSt11_Hash_bytes", "_ZSt15_Fnv_hash_bytes", "_ZSt18_Rb_tree_", "_ZSt28_Rb_tree_rebalance",
      "_ZSt29_Rb_tree_insert_and_rebalance", "_ZSt4cout", "_ZSt4cerr", "_ZSt4clog", "_ZSt4endl",
      "_ZSt5flush", "_ZSt16__ostream_insert", "_ZStlsI", "_ZSt21__glibcxx_assert_fail",
      "_ZNSt7__cxx11", "_ZNKSt7__cxx11", "_ZNSs", "_ZNKSs", "_ZNSo", "_ZNKSo", "_ZNSt9basic_ios",
      "_ZNKSt9basic_ios", "_ZNSt8ios_base", "_ZNKSt8ios_base", "_ZNKSt5ctypeIcE",
      "_ZNSt6locale", "_ZNKSt6locale", "_ZNSt15basic_streambuf", "_ZNSt8__detail",
      "_ZNKSt8__detail", "_ZNSt9exception", "_ZNKSt9exception", "_ZNSt9bad_alloc",
      "_ZNKSt9bad_alloc", "_ZNSt20bad_array_new_length", "_ZNKSt20bad_array_new_length",
      "_ZNSt13runtime_error", "_ZNKSt13runtime_error", "_ZNSt11logic_error",
      "_ZNKSt11logic_error", "_ZNSt12length_error", "_ZNSt12out_of_range",
      "_ZNSt16invalid_argument", "_ZNSt11range_error", "_ZNSt14overflow_error",
      "_ZNSt15underflow_error", "_ZNSt12domain_error", "_ZNSt8bad_cast", "_ZNSt10bad_typeid",
      "_ZNSt17bad_function_call", "__cxa_", "__gxx_personality_v0", "__dynamic_cast",
      "_Unwind_", "_ZNSt11this_thread11__sleep_for"};
  return k;
}

struct Category {
  const char* what;
  std::vector<std::string> names;
  std::vector<std::string> prefixes;
};

// Imports that are refused with a specific reason (checked before the allowlists).
const std::vector<Category>& denied_categories() {
  static const std::vector<Category> k = {
      {"calls a vendor library (kernels must compute the result themselves, without BLAS or oneDNN)",
       {},
       {"cblas_", "catlas_", "LAPACKE_", "dnnl_", "mkl_", "openblas_", "goto_", "_ZN4dnnl", "_ZNK4dnnl",
        "bli_", "xsmm_", "libxsmm_"}},
      {"calls the reference implementation", {"kope_entry"}, {"kope_reference"}},
      {"reads the clock (a kernel's work may not depend on time)",
       {"clock_gettime", "gettimeofday", "time", "clock", "times", "ftime", "timespec_get",
        "omp_get_wtime", "omp_get_wtick", "getrusage", "clock_getres"},
       {"_ZNSt6chrono"}},
      {"creates a process",
       {"fork", "vfork", "_Fork", "clone", "clone3", "execve", "execv", "execvp", "execvpe", "execl",
        "execlp", "execle", "fexecve", "posix_spawn", "posix_spawnp", "system", "popen", "pclose",
        "daemon", "wait", "waitpid", "wait3", "wait4", "waitid"},
       {}},
      {"creates or manages threads (OpenMP is the only way to use threads)",
       {"thrd_create"},
       {"pthread_", "_ZNSt6thread", "_ZNSt7jthread", "_ZNSt18condition_variable",
        "_ZNSt5mutex", "_ZNSt15recursive_mutex", "_ZSt15future_category", "__gthread", "_ZSt9call_once"}},
      {"touches files",
       {"open", "open64", "openat", "openat64", "creat", "creat64", "fopen", "fopen64", "freopen",
        "fdopen", "opendir", "fdopendir", "readdir", "stat", "stat64", "lstat", "fstat", "fstatat",
        "access", "faccessat", "unlink", "unlinkat", "remove", "rename", "renameat", "mkdir",
        "rmdir", "readlink", "truncate", "ftruncate", "read", "write", "pread", "pwrite", "pread64",
        "pwrite64", "fread", "fgets", "getline", "fscanf", "scanf", "sscanf", "dup", "dup2", "dup3",
        "pipe", "pipe2", "mkstemp", "mkostemp", "tmpfile", "tmpnam", "chdir", "fchdir", "chmod",
        "chown", "link", "symlink", "sendfile", "splice", "fsync", "close", "lseek", "fcntl",
        "__open_2", "__open64_2", "__openat_2", "__read_chk", "statx", "__xstat", "__fxstat"},
       {"_ZNSt14basic_ifstream", "_ZNSt14basic_ofstream", "_ZNSt13basic_fstream", "_ZNSt13basic_filebuf",
        "_ZNSt10filesystem", "_ZNSt12__basic_file", "_ZNSt13random_device", "_ZNKSt10filesystem"}},
      {"uses the network",
       {"socket", "socketpair", "connect", "bind", "listen", "accept", "accept4", "send", "sendto",
        "sendmsg", "recv", "recvfrom", "recvmsg", "getaddrinfo", "gethostbyname", "gethostbyname2",
        "getsockopt", "setsockopt", "inet_addr", "inet_pton", "shutdown"},
       {}},
      {"loads code at run time", {"dlopen", "dlsym", "dlmopen", "dlvsym", "dladdr", "dlinfo", "dl_iterate_phdr", "__libc_dlopen_mode"}, {}},
      {"makes raw system calls", {"syscall", "ptrace", "prctl", "ioctl", "seccomp", "personality", "unshare", "setns", "chroot"}, {}},
      {"sends signals or changes signal handling",
       {"kill", "raise", "signal", "sigaction", "tgkill", "tkill", "killpg", "alarm", "setitimer",
        "sigprocmask", "sigaltstack", "bsd_signal", "sysv_signal"},
       {}},
      {"maps memory directly (use new or malloc)",
       {"mmap", "mmap64", "mprotect", "munmap", "mremap", "madvise", "brk", "sbrk", "shm_open",
        "shmget", "shmat", "memfd_create", "mlock", "mlockall", "pkey_mprotect", "remap_file_pages"},
       {}},
      {"reads the environment or the system configuration",
       {"getenv", "secure_getenv", "setenv", "putenv", "unsetenv", "clearenv", "sysconf", "get_nprocs",
        "get_nprocs_conf", "getauxval", "uname", "gethostname", "getpid", "getppid", "getuid", "sched_getcpu",
        "sched_setaffinity", "sched_getaffinity", "setpriority", "nice", "setrlimit", "getrlimit", "prlimit"},
       {"_ZNSt6thread20hardware_concurrency"}},
      {"jumps across calls (setjmp/longjmp)", {"setjmp", "_setjmp", "__sigsetjmp", "longjmp", "_longjmp", "siglongjmp", "__longjmp_chk"}, {}},
  };
  return k;
}

bool is_fortran_blas(std::string_view n) {
  static const std::regex k_re("^i?[sdcz](gemm|gemv|ger|geru|gerc|axpy|dot|dotu|dotc|scal|copy|swap|nrm2|asum|amax|trsm|trmm|symm|syrk|syr2k|hemm|herk|her2k|gbmv|symv|trmv|trsv|spmv|sbmv|rot|rotg)_$");
  return std::regex_match(n.begin(), n.end(), k_re);
}

std::string strip_version(std::string_view name) {
  size_t at = name.find('@');
  return std::string(at == std::string_view::npos ? name : name.substr(0, at));
}

bool has_prefix_in(std::string_view name, const std::vector<std::string>& prefixes) {
  for (const auto& p : prefixes) {
    if (name.starts_with(p)) return true;
  }
  return false;
}

Result<std::unordered_set<std::string>> names_of(const std::vector<std::filesystem::path>& libs) {
  std::unordered_set<std::string> out;
  for (const auto& lib : libs) {
    KOPE_ASSIGN(auto names, elf::exported_names(lib));
    for (auto& n : names) out.insert(strip_version(n));
  }
  return out;
}

}  // namespace

const char* const k_disassembly_filter =
    "^[0-9a-f]+ <.*>:$|[[:space:]](syscall|sysenter|sysexit|sysret|int|rdtsc|rdtscp)([[:space:]]|$)";

std::string display_symbol(std::string_view name) {
  std::string n(name.substr(0, 2000));
  std::string shown = n;
  if (n.starts_with("_Z")) {
    int status = 0;
    char* d = abi::__cxa_demangle(n.c_str(), nullptr, nullptr, &status);
    if (status == 0 && d != nullptr) shown = d;
    std::free(d);
  }
  if (shown.size() > 160) shown = shown.substr(0, 157) + "...";
  return shown;
}

std::string disassembled_function(std::string_view raw) {
  std::string_view line = util::trim(raw);
  if (!line.ends_with(">:")) return "";
  size_t lt = line.find('<');
  return lt == std::string_view::npos ? "" : display_symbol(line.substr(lt + 1, line.size() - lt - 3));
}

std::string_view disassembled_instruction(std::string_view raw) {
  std::string_view line = util::trim(raw);
  size_t tab = line.rfind('\t');  // the raw bytes, when shown, sit between the address and it
  return tab == std::string_view::npos ? line : util::trim(line.substr(tab + 1));
}

std::vector<std::string> forbidden_instructions(std::string_view flagged) {
  std::vector<std::string> out;
  std::string function = "?";
  for (auto& raw : util::split(flagged, '\n')) {
    std::string_view line = util::trim(raw);
    if (line.empty()) continue;
    if (std::string header = disassembled_function(line); !header.empty()) {
      function = header;
      continue;
    }
    if (line.ends_with(">:")) continue;
    std::string_view insn = disassembled_instruction(line);
    std::string mnemonic(insn.substr(0, insn.find_first_of(" \t")));
    std::string what;
    if (mnemonic == "syscall" || mnemonic == "sysenter" || mnemonic == "int" || mnemonic == "sysexit" ||
        mnemonic == "sysret") {
      what = fmt::format("makes a raw system call ({} in {})", util::trim(insn), function);
    } else if (mnemonic == "rdtsc" || mnemonic == "rdtscp") {
      what = fmt::format("reads the time-stamp counter ({} in {})", mnemonic, function);
    } else {
      continue;
    }
    if (out.size() < 20) out.push_back(what);
  }
  return out;
}

SymbolPolicy::SymbolPolicy(std::unordered_set<std::string> c_runtime, std::unordered_set<std::string> math,
                           std::unordered_set<std::string> openmp, std::unordered_set<std::string> gcc_helpers,
                           std::unordered_set<std::string> cxx_runtime)
    : m_c_runtime(std::move(c_runtime)),
      m_math(std::move(math)),
      m_openmp(std::move(openmp)),
      m_gcc_helpers(std::move(gcc_helpers)),
      m_cxx_runtime(std::move(cxx_runtime)) {}

Result<std::shared_ptr<const SymbolPolicy>> SymbolPolicy::for_compiler(const std::string& compiler) {
  static std::mutex mu;
  static std::map<std::string, std::shared_ptr<const SymbolPolicy>> cache;
  std::lock_guard lock(mu);
  if (auto it = cache.find(compiler); it != cache.end()) return it->second;
  util::RunOptions ro;
  ro.spawn.argv = {compiler, "-print-search-dirs"};
  ro.timeout = std::chrono::seconds(30);
  KOPE_ASSIGN(util::RunResult r, util::run(ro));
  if (!r.status.success()) return fail(ErrorKind::unavailable, "'{} -print-search-dirs' {}", compiler, r.status.describe());
  std::vector<std::filesystem::path> dirs;
  for (auto& line : util::split(r.out, '\n')) {
    if (!line.starts_with("libraries: =")) continue;
    for (auto& d : util::split(line.substr(12), ':')) {
      if (!d.empty()) dirs.emplace_back(d);
    }
  }
  auto find = [&](std::string_view name) -> Result<std::filesystem::path> {
    for (const auto& d : dirs) {
      std::error_code ec;
      auto p = d / name;
      if (std::filesystem::is_regular_file(p, ec)) return std::filesystem::canonical(p, ec);
    }
    return fail(ErrorKind::unavailable, "cannot find {} in {}'s library directories", name, compiler);
  };
  KOPE_ASSIGN(auto libc, find("libc.so.6"));
  KOPE_ASSIGN(auto ld, find("ld-linux-x86-64.so.2"));
  KOPE_ASSIGN(auto libm, find("libm.so.6"));
  KOPE_ASSIGN(auto libstdcxx, find("libstdc++.so.6"));
  KOPE_ASSIGN(auto libgomp, find("libgomp.so.1"));
  KOPE_ASSIGN(auto libgcc_s, find("libgcc_s.so.1"));
  KOPE_ASSIGN(auto libgcc_a, find("libgcc.a"));
  std::vector<std::filesystem::path> math = {libm};
  if (auto mvec = find("libmvec.so.1")) math.push_back(*mvec);
  KOPE_ASSIGN(auto c_runtime, names_of({libc, ld}));
  KOPE_ASSIGN(auto math_names, names_of(math));
  KOPE_ASSIGN(auto omp_names, names_of({libgomp}));
  KOPE_ASSIGN(auto gcc_names, names_of({libgcc_s}));
  KOPE_ASSIGN(auto archive, elf::archive_symbols(libgcc_a));
  for (auto& n : archive) gcc_names.insert(std::move(n));
  KOPE_ASSIGN(auto cxx_names, names_of({libstdcxx}));
  auto policy = std::make_shared<const SymbolPolicy>(std::move(c_runtime), std::move(math_names), std::move(omp_names),
                                                     std::move(gcc_names), std::move(cxx_names));
  cache[compiler] = policy;
  return policy;
}

std::string SymbolPolicy::import_problem(std::string_view raw) const {
  std::string name = strip_version(raw);
  if (name.empty()) return "";
  for (const auto& cat : denied_categories()) {
    bool hit = has_prefix_in(name, cat.prefixes);
    for (const auto& n : cat.names) hit = hit || n == name;
    if (hit) return cat.what;
  }
  if (is_fortran_blas(name)) return denied_categories()[0].what;
  if (libc_allowed().contains(name)) return "";
  if (m_math.contains(name) || m_gcc_helpers.contains(name)) return "";
  if (m_openmp.contains(name) && (name.starts_with("omp_") || name.starts_with("GOMP_"))) return "";
  if (has_prefix_in(name, cxx_allowed_prefixes())) return "";
  static const std::regex k_throw("^_ZSt[0-9]+__throw_[A-Za-z_0-9]+$");
  if (std::regex_match(name, k_throw)) return "";
  if (m_c_runtime.contains(name) || m_cxx_runtime.contains(name) || m_openmp.contains(name)) {
    return "is not on the allowlist for kernels (math, OpenMP, allocation, mem*/str*, printing, exceptions)";
  }
  return "is not provided by the runtime libraries kernels may use";
}

std::string SymbolPolicy::definition_problem(std::string_view raw, bool strong) const {
  std::string name = strip_version(raw);
  if (name == "kope_entry" || name == "main" || name == "_init" || name == "_fini" || name.starts_with("kope_runner") ||
      name.starts_with("kope_reference")) {
    return "is reserved for the harness";
  }
  if (m_c_runtime.contains(name)) return "belongs to the C library (runtime interposition, e.g. of timers, is not allowed)";
  if (m_math.contains(name)) return "belongs to libm (runtime interposition is not allowed)";
  if (m_openmp.contains(name)) return "belongs to the OpenMP runtime (runtime interposition is not allowed)";
  if (m_gcc_helpers.contains(name)) return "belongs to libgcc (runtime interposition is not allowed)";
  if (strong && m_cxx_runtime.contains(name)) return "replaces a libstdc++ function (runtime interposition is not allowed)";
  return "";
}

void InspectionReport::reject(std::string finding) {
  if (!rejected) {
    rejected = true;
    reason = finding;
  }
  if (findings.size() < 30) findings.push_back(std::move(finding));
}

InspectionReport SymbolPolicy::inspect(const elf::File& object, std::string_view flagged_instructions) const {
  InspectionReport rep;
  auto add = [&](std::string finding) { rep.reject(std::move(finding)); };
  if (object.type != ET_REL) add("the compiler did not produce a relocatable object");
  if (object.machine != EM_X86_64) add("the object is not x86-64 code");

  bool imports_ios_init = false;
  for (const auto& s : object.symbols) {
    if (!s.defined && s.name == "_ZNSt8ios_base4InitC1Ev") imports_ios_init = true;
  }
  // Code that runs at load time first: it is the most fundamental rule.
  for (const auto& sec : object.sections) {
    const std::string& n = sec.name;
    bool ctor = sec.type == SHT_INIT_ARRAY || sec.type == SHT_PREINIT_ARRAY || n.starts_with(".init_array") ||
                n.starts_with(".preinit_array") || n.starts_with(".ctors") || n == ".init";
    bool dtor = sec.type == SHT_FINI_ARRAY || n.starts_with(".fini_array") || n.starts_with(".dtors") || n == ".fini";
    if (ctor && sec.size > 0) {
      add(imports_ios_init
              ? std::string("has a static constructor: #include <iostream> creates one (std::ios_base::Init); use <cstdio> instead")
              : fmt::format("has a static constructor (section {}): no code may run when the kernel is loaded", n));
    }
    if (dtor && sec.size > 0) add(fmt::format("has a static destructor (section {}): no code may run when the kernel is unloaded", n));
    if ((sec.flags & SHF_WRITE) && (sec.flags & SHF_EXECINSTR)) add(fmt::format("has a writable and executable section ({})", n));
  }
  for (const auto& s : object.symbols) {
    if (s.name.empty()) continue;
    if (!s.defined) {
      std::string why = import_problem(s.name);
      if (!why.empty()) add(fmt::format("imports {}: {}", display_symbol(s.name), why));
      continue;
    }
    if (s.type == STT_GNU_IFUNC) add(fmt::format("defines {} as an indirect function (its resolver would run at load time)", display_symbol(s.name)));
    if (s.bind == STB_LOCAL) continue;
    if (s.name == "kope_kernel") {
      if (s.type == STT_FUNC) rep.defines_entry = true;
      continue;
    }
    std::string why = definition_problem(s.name, s.bind == STB_GLOBAL);
    if (!why.empty()) add(fmt::format("defines {}, which {}", display_symbol(s.name), why));
  }
  for (auto& f : forbidden_instructions(flagged_instructions)) add(std::move(f));
  if (!rep.defines_entry && !rep.rejected) {
    rep.notes.push_back("defines no extern \"C\" function kope_kernel");
  }
  std::vector<std::string> state = writable_static_data(object);
  if (!state.empty()) {
    std::vector<std::string> shown;
    for (size_t i = 0; i < state.size() && i < 5; ++i) shown.push_back(display_symbol(state[i]));
    if (state.size() > 5) shown.push_back(fmt::format("and {} more", state.size() - 5));
    // A note, not a finding: scratch kept from call to call is allowed (prompts/cpu/system.md),
    // results kept are not, and only the data checks tell the two apart.
    rep.notes.push_back(fmt::format("keeps writable static data ({}): allowed as scratch that each call writes "
                                    "before it reads; results kept from call to call are not (checked by "
                                    "rotating and fresh inputs)",
                                    util::join(shown, ", ")));
  }
  return rep;
}

std::vector<std::string> writable_static_data(const elf::File& object) {
  std::vector<std::string> out;
  for (const auto& s : object.symbols) {
    if (!s.defined || s.name.empty()) continue;
    if (s.type != STT_OBJECT && s.type != STT_TLS) continue;
    bool common = s.section == SHN_COMMON;
    if (!common) {
      if (s.section >= SHN_LORESERVE || s.section >= object.sections.size()) continue;
      const elf::Section& sec = object.sections[s.section];
      bool writable = (sec.flags & SHF_WRITE) && (sec.flags & SHF_ALLOC) && !(sec.flags & SHF_EXECINSTR);
      // .data.rel.ro is written only by the loader's relocations, then read-only (vtables,
      // constant tables of pointers): constant data, not state.
      if (!writable || sec.name.starts_with(".data.rel.ro")) continue;
    }
    if (s.size == 0 && !common) continue;
    const std::string& n = s.name;
    // What the compiler and the runtime put there on the candidate's behalf: the personality
    // reference of exception tables, guard variables (the static they guard is listed itself),
    // OpenMP's named-critical locks and outlined data, and the standard library's own statics.
    if (n.starts_with("DW.ref.") || n.starts_with("_ZGV") || n.starts_with(".gomp_critical_user_") ||
        n.find(".omp_") != std::string::npos || n == "__dso_handle" || n.starts_with("_ZTV") || n.starts_with("_ZTI") ||
        n.starts_with("_ZTS") || n.starts_with("_ZNSt") || n.starts_with("_ZSt") || n.starts_with("_ZZNSt") ||
        n.starts_with("_ZN9__gnu_cxx") || n.starts_with("_ZZN9__gnu_cxx")) {
      continue;
    }
    out.push_back(n);
  }
  return out;
}

}  // namespace kope::eval
