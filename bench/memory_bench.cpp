// kope_memory_bench: the memory at scale. Generates a synthetic history (default 10^6 cases
// over 60 operators and 3 targets, with lineage, failures, journals, code and lessons) into a
// database with the batched insert API, then measures retrieval latency for random states.
//
//   build/bench/kope_memory_bench [--cases N] [--dir DIR | --memory URL] [--queries Q] [--batch B]
//                                 [--writers 1,2,4] [--writer-cases C]
//
// Prints: insert throughput (cases/s, batched), single-case insert latency (one fsync'd commit
// each), bytes per case without code (from dbstat, code blobs excluded), and retrieval p50/p90/
// p99/max over Q random states (after a warm-up). With --dir, an existing database there is
// reused (no regeneration), so retrieval can be re-measured quickly. With --memory
// postgresql://..., the same measurements run against that PostgreSQL database (reused when it
// already holds cases; size from the server's relation sizes). Last, concurrent insert
// throughput: for each count in --writers, that many writers with their own connections each
// record --writer-cases cases one commit at a time (the agent's pattern), all at once.
#include <sqlite3.h>
#include <time.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "agent/memory_items.h"
#include "kope/memory.h"
#include "memory/db.h"
#include "memory/sqlite_store.h"
#include "util/fs.h"
#include "util/strings.h"

using namespace kope;
using namespace kope::memory;

namespace {

constexpr int k_ops = 60;
constexpr int k_run_length = 20;

const std::vector<std::string> k_categories = {"elementwise", "reduction", "normalization", "matmul", "conv",
                                               "pooling",     "attention", "loss",          "scan",   "data-movement"};
const std::vector<std::string> k_targets = {"x86_64-avx2-fma", "x86_64-avx2-fma-avx512f", "cuda-sm90"};
const std::vector<std::string> k_words = {
    "vectorise", "unroll",  "tile",      "prefetch", "fuse",      "blocking", "openmp",   "schedule",  "static",
    "gather",    "scatter", "transpose", "register", "cache",     "L1",       "L2",       "bandwidth", "latency",
    "fma",       "avx2",    "avx512",    "mask",     "tail",      "loop",     "reduction", "horizontal", "shuffle",
    "alignment", "aligned", "stream",    "store",    "nontemporal", "exp",    "log",      "polynomial", "approximation",
    "softmax",   "row",     "column",    "panel",    "pack",      "microkernel", "threads", "chunk",   "false",
    "sharing",   "warp",    "shared",    "memory",   "coalesced", "occupancy", "bank",    "conflict",  "double",
    "buffering", "pipeline", "split",    "k",        "accumulate", "kahan",   "precision", "nan",      "denormal"};
const std::vector<std::string> k_error_templates = {
    "candidate.cpp:{}:{}: error: '{}' was not declared in this scope",
    "candidate.cpp:{}:{}: error: expected ';' before '{}'",
    "candidate.cpp:{}:{}: error: invalid conversion from 'const float*' to '{}'",
    "candidate.cpp:{}:{}: error: '{}' does not name a type",
    "candidate.cpp:{}:{}: error: no matching function for call to '{}(float*)'",
    "candidate.cpp:{}:{}: error: inlining failed in call to 'always_inline' '{}': target specific option mismatch",
    "candidate.cpp:{}:{}: error: redefinition of '{}'",
    "candidate.cpp:{}:{}: error: too few arguments to function '{}'"};

struct OpDef {
  TaskInfo task;
};

std::vector<OpDef> make_ops(std::mt19937_64& rng) {
  std::vector<OpDef> ops;
  std::uniform_real_distribution<double> ai(0.05, 200.0), fl(18, 38);
  for (int i = 0; i < k_ops; ++i) {
    OpDef o;
    o.task.op = fmt::format("op{:02}_{}", i, k_categories[static_cast<size_t>(i) % k_categories.size()]);
    o.task.spec_hash = fmt::format("{:016x}", rng());
    o.task.category = k_categories[static_cast<size_t>(i) % k_categories.size()];
    o.task.level = 1 + i % 4;
    int ins = 1 + i % 3;
    std::string sig = "extern \"C\" void kope_kernel(";
    for (int k = 0; k < ins; ++k) sig += fmt::format("const float* x{}, ", k);
    sig += "float* y, int64_t N, int64_t D)";
    o.task.signature = sig;
    o.task.timed_dims = "[[4096, 1024]]";
    o.task.arithmetic_intensity = ai(rng);
    o.task.log2_flops = fl(rng);
    o.task.log2_bytes = o.task.log2_flops - std::log2(o.task.arithmetic_intensity);
    ops.push_back(std::move(o));
  }
  return ops;
}

// A Zipf-distributed vocabulary: the common words above first, then rarer technical tokens
// ("tile64", "unroll8", "mm256_op17", ...), as journals and diagnostics have.
struct Vocabulary {
  std::vector<std::string> words;
  std::discrete_distribution<size_t> dist;
  Vocabulary() {
    words = k_words;
    const std::vector<std::string> stems = {"tile", "unroll", "blk", "lane", "warp", "vec", "chunk", "stride",
                                            "mm256_op", "mm512_op", "reg", "panel", "pack", "split", "buf", "sched"};
    for (int i = 0; words.size() < 4000; ++i) {
      words.push_back(fmt::format("{}{}", stems[static_cast<size_t>(i) % stems.size()], i / static_cast<int>(stems.size())));
    }
    std::vector<double> w;
    for (size_t r = 0; r < words.size(); ++r) w.push_back(1.0 / static_cast<double>(r + 1));
    dist = std::discrete_distribution<size_t>(w.begin(), w.end());
  }
};

std::string words(std::mt19937_64& rng, int n) {
  static Vocabulary vocab;
  std::string out;
  for (int i = 0; i < n; ++i) {
    if (!out.empty()) out += ' ';
    out += vocab.words[vocab.dist(rng)];
  }
  return out;
}

std::string code_for(std::mt19937_64& rng, const OpDef& op, int variant) {
  std::string body;
  body += fmt::format("// {} variant {}\n#include <immintrin.h>\n#include <cstdint>\n", op.task.op, variant);
  body += op.task.signature + " {\n";
  int lines = 30 + static_cast<int>(rng() % 30);
  for (int i = 0; i < lines; ++i) {
    body += fmt::format("  for (int64_t i{0} = 0; i{0} < N; i{0} += {1}) {{ y[i{0}] = x0[i{0}] * {2}.0f + {3}; }}\n", i,
                        1 + rng() % 16, rng() % 100, rng() % 1000);
  }
  body += "}\n";
  return body;
}

struct Generator {
  std::mt19937_64 rng{42};
  std::vector<OpDef> ops = make_ops(rng);
  int64_t next_run = 0;

  // One run of attempts for (op, target): a draft, then repairs of failures and refinements of
  // the incumbent, each with its began-from parent.
  void run(std::vector<CaseRecord>& out, int op_index, int target_index) {
    const OpDef& op = ops[static_cast<size_t>(op_index)];
    const std::string& target = k_targets[static_cast<size_t>(target_index)];
    int64_t run_id = next_run++;
    std::string incumbent_key;
    double incumbent_speed = 0;
    std::string last_key;
    eval::Verdict last_verdict = eval::Verdict::compile_error;
    std::uniform_real_distribution<double> u(0, 1);
    for (int k = 0; k < k_run_length; ++k) {
      CaseRecord c;
      c.natural_key = fmt::format("r{}/{}/{}", run_id, op.task.op, k);
      c.run_id = fmt::format("run-{}", run_id);
      c.task = op.task;
      c.hardware.target = target;
      c.hardware.cpu_model = target_index == 2 ? "NVIDIA H100" : "Intel Xeon";
      c.hardware.cores = 16;
      c.hardware.peak_gflops = 1000;
      c.hardware.peak_gbps = 100;
      c.toolchain.id = target_index == 2 ? "nvcc-12.4 -O3 -arch=sm_90" : "g++-12 -O3 -march=native -fopenmp";
      c.toolchain.backend = target_index == 2 ? "cuda" : "cpu";
      if (k == 0) {
        c.stage = Stage::draft;
      } else if (last_verdict != eval::Verdict::correct && u(rng) < 0.7) {
        c.stage = Stage::repair;
        c.parent_key = last_key;
      } else if (!incumbent_key.empty()) {
        c.stage = Stage::refine;
        c.parent_key = incumbent_key;
      } else {
        c.stage = Stage::draft;
      }
      c.optimisation = words(rng, 6);
      int variant = static_cast<int>(rng() % 1000);
      c.code = code_for(rng, op, variant);
      double p = u(rng);
      if (p < 0.6) {
        c.verdict = eval::Verdict::correct;
        double base = incumbent_speed > 0 ? incumbent_speed : 1.0;
        double s = base * std::exp(std::normal_distribution<double>(0.05, 0.25)(rng));
        c.speedup_vs_reference = std::clamp(s, 0.05, 400.0);
        c.fraction_of_roofline = std::min(0.95, 0.01 * *c.speedup_vs_reference);
        c.timings.push_back({3, 100.0 / *c.speedup_vs_reference, 0.5, 100.0, 80.0, false, 0.0, std::nullopt});
        c.message = "correct on 6 cases";
      } else if (p < 0.8) {
        c.verdict = eval::Verdict::compile_error;
        c.message = "compilation failed";
        const std::string& t = k_error_templates[rng() % k_error_templates.size()];
        c.diagnostics = fmt::format(fmt::runtime(t), rng() % 200, rng() % 40, words(rng, 1));
      } else if (p < 0.9) {
        c.verdict = eval::Verdict::wrong_result;
        c.message = u(rng) < 0.3 ? "case 2: y[3, 17]: got nan, expected 0.5" : "case 1: y[0, 9]: got 0.25, expected 0.5";
      } else if (p < 0.95) {
        c.verdict = eval::Verdict::runtime_error;
        c.message = u(rng) < 0.5 ? "killed by signal 11 (SIGSEGV)" : "killed by signal 7 (SIGBUS)";
      } else {
        c.verdict = eval::Verdict::timeout;
        c.message = "exceeded the wall-clock limit of 10 s";
      }
      c.tokens_prompt = 2000 + static_cast<int64_t>(rng() % 6000);
      c.tokens_completion = 300 + static_cast<int64_t>(rng() % 1500);
      c.wall_seconds = 5 + u(rng) * 30;
      c.journal = fmt::format("strategy: {}. change: {}. status: {}. numbers: {}. reading: {}.", words(rng, 10),
                              words(rng, 12), eval::verdict_name(c.verdict),
                              c.speedup_vs_reference ? fmt::format("{:.2f}x vs reference", *c.speedup_vs_reference)
                                                     : std::string("n/a"),
                              words(rng, 14));
      if (c.verdict == eval::Verdict::correct && c.speedup_vs_reference && *c.speedup_vs_reference > incumbent_speed) {
        incumbent_speed = *c.speedup_vs_reference;
        incumbent_key = c.natural_key;
      }
      last_key = c.natural_key;
      last_verdict = c.verdict;
      out.push_back(std::move(c));
    }
  }
};

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// CPU time of this thread or process: on a shared machine, wall time also counts the other
// processes.
double cpu_seconds(clockid_t clock) {
  timespec ts{};
  clock_gettime(clock, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}
double thread_cpu_seconds() { return cpu_seconds(CLOCK_THREAD_CPUTIME_ID); }
double process_cpu_seconds() { return cpu_seconds(CLOCK_PROCESS_CPUTIME_ID); }

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t i = static_cast<size_t>(std::ceil(p * static_cast<double>(v.size()))) - 1;
  return v[std::min(i, v.size() - 1)];
}

}  // namespace

// Concurrent insert throughput: for each count, that many writers (own store, own connection)
// record `per_writer` new cases each, one commit per case, started together.
bool concurrent_inserts(const std::filesystem::path& location, Generator& gen, const std::vector<int>& counts,
                        int per_writer) {
  static int round = 0;
  for (int writers : counts) {
    if (writers < 1 || per_writer < 1) continue;
    ++round;
    std::vector<std::vector<CaseRecord>> work(static_cast<size_t>(writers));
    for (int w = 0; w < writers; ++w) {
      auto& cs = work[static_cast<size_t>(w)];
      while (static_cast<int>(cs.size()) < per_writer) gen.run(cs, w % k_ops, 0);
      cs.resize(static_cast<size_t>(per_writer));
      for (auto& c : cs) {
        c.natural_key = fmt::format("concurrent/{}/{}/{}", round, w, c.natural_key);
        c.parent_key.clear();
      }
    }
    std::vector<std::unique_ptr<Database>> stores;
    for (int w = 0; w < writers; ++w) {
      auto s = open_store(location);
      if (!s) {
        std::fprintf(stderr, "writer %d: %s\n", w, s.error().message.c_str());
        return false;
      }
      stores.push_back(std::move(*s));
    }
    std::atomic<int> failures{0};
    auto t0 = std::chrono::steady_clock::now();
    std::vector<std::thread> threads;
    for (int w = 0; w < writers; ++w) {
      threads.emplace_back([&, w] {
        for (const auto& c : work[static_cast<size_t>(w)]) {
          if (!stores[static_cast<size_t>(w)]->record_case(c)) ++failures;
        }
      });
    }
    for (auto& th : threads) th.join();
    double s = seconds_since(t0);
    if (failures > 0) {
      std::fprintf(stderr, "concurrent inserts: %d failed\n", failures.load());
      return false;
    }
    std::printf("concurrent inserts: %d writer%s x %d cases (one commit each): %.0f cases/s in all\n", writers,
                writers == 1 ? "" : "s", per_writer, static_cast<double>(writers * per_writer) / s);
    std::fflush(stdout);
  }
  return true;
}

int main(int argc, char** argv) {
  int64_t n_cases = 1000000;
  int queries = 2000;
  int batch = 2000;
  std::string dir_arg, memory_url;
  std::vector<int> writer_counts = {1, 2, 4};
  int writer_cases = 500;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "%s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--cases") {
      n_cases = std::atoll(next().c_str());
    } else if (a == "--queries") {
      queries = std::atoi(next().c_str());
    } else if (a == "--batch") {
      batch = std::atoi(next().c_str());
    } else if (a == "--dir") {
      dir_arg = next();
    } else if (a == "--memory") {
      memory_url = next();
    } else if (a == "--writers") {
      writer_counts.clear();
      for (const auto& w : util::split(next(), ',')) writer_counts.push_back(std::atoi(w.c_str()));
    } else if (a == "--writer-cases") {
      writer_cases = std::atoi(next().c_str());
    } else {
      std::fprintf(stderr,
                   "usage: %s [--cases N] [--dir DIR | --memory URL] [--queries Q] [--batch B] [--writers 1,2,4] "
                   "[--writer-cases C]\n",
                   argv[0]);
      return 2;
    }
  }
  std::optional<util::TempDir> tmp;
  std::filesystem::path dir;
  if (dir_arg.empty()) {
    auto t = util::TempDir::create("kope-memory-bench");
    if (!t) {
      std::fprintf(stderr, "%s\n", t.error().message.c_str());
      return 1;
    }
    tmp.emplace(std::move(*t));
    dir = tmp->path();
  } else {
    dir = dir_arg;
    (void)util::make_dirs(dir);
  }
  const bool postgres = !memory_url.empty();
  std::filesystem::path path = postgres ? std::filesystem::path(memory_url) : dir / "bench.db";
  bool reuse = !postgres && std::filesystem::exists(path);
  auto opened = postgres ? SqliteStore::open_postgres(memory_url) : SqliteStore::open(path);
  if (!opened) {
    std::fprintf(stderr, "%s\n", opened.error().message.c_str());
    return 1;
  }
  SqliteStore& store = **opened;
  if (postgres) {
    auto existing = store.stats();
    reuse = existing && existing->cases > 0;
  }
  Generator gen;

  if (!reuse) {
    // Lessons first (2000, some of them fixes for the common error signatures).
    std::mt19937_64 lrng(7);
    std::vector<LessonDelta> deltas;
    for (int i = 0; i < 2000; ++i) {
      LessonDelta d;
      d.lesson.kind = static_cast<LessonKind>(i % 4);
      d.lesson.title = fmt::format("lesson {}: {}", i, words(lrng, 5));
      d.lesson.text = words(lrng, 25);
      d.lesson.scope.category = i % 5 == 0 ? "" : k_categories[static_cast<size_t>(i) % k_categories.size()];
      d.lesson.scope.backend = i % 3 == 0 ? "cuda" : "cpu";
      if (d.lesson.kind == LessonKind::fix) {
        d.lesson.error_signature = error_signature(
            eval::Verdict::compile_error, "",
            fmt::format(fmt::runtime(k_error_templates[static_cast<size_t>(i) % k_error_templates.size()]), 1, 1, "x"));
      }
      deltas.push_back(std::move(d));
    }
    auto t_lessons = std::chrono::steady_clock::now();
    if (auto r = store.apply_all(deltas); !r) {
      std::fprintf(stderr, "lessons: %s\n", r.error().message.c_str());
      return 1;
    }
    std::printf("lessons: %zu deltas applied in %.2f s (one transaction)\n", deltas.size(), seconds_since(t_lessons));
    std::printf("generating %lld cases over %d ops x %zu targets in batches of %d into %s\n",
                static_cast<long long>(n_cases), k_ops, k_targets.size(), batch, path.c_str());
    double insert_s = 0, insert_cpu = 0;
    int64_t written = 0;
    std::vector<CaseRecord> pending;
    int64_t run_index = 0;
    auto t_all = std::chrono::steady_clock::now();
    while (written < n_cases) {
      pending.clear();
      while (static_cast<int64_t>(pending.size()) < batch && written + static_cast<int64_t>(pending.size()) < n_cases) {
        int op = static_cast<int>(run_index % k_ops);
        int target = static_cast<int>((run_index / k_ops) % static_cast<int64_t>(k_targets.size()));
        gen.run(pending, op, target);
        ++run_index;
      }
      if (written + static_cast<int64_t>(pending.size()) > n_cases) {
        pending.resize(static_cast<size_t>(n_cases - written));
      }
      auto t0 = std::chrono::steady_clock::now();
      double c0 = process_cpu_seconds();  // all threads: record_cases prepares in parallel
      auto ids = store.record_cases(pending);
      insert_s += seconds_since(t0);
      insert_cpu += process_cpu_seconds() - c0;
      if (!ids) {
        std::fprintf(stderr, "insert: %s\n", ids.error().message.c_str());
        return 1;
      }
      written += static_cast<int64_t>(pending.size());
      if (written % 100000 < batch) {
        std::printf("  %lld cases, %.0f cases/s so far\n", static_cast<long long>(written),
                    static_cast<double>(written) / insert_s);
        std::fflush(stdout);
      }
    }
    std::printf("insert: %lld cases in %.1f s of record_cases (%.1f s with generation): %.0f cases/s batched "
                "(%.0f cases per CPU-second of record_cases, all threads)\n",
                static_cast<long long>(written), insert_s, seconds_since(t_all), static_cast<double>(written) / insert_s,
                static_cast<double>(written) / insert_cpu);
  } else {
    std::printf("reusing %s\n", path.c_str());
  }

  // Single-case inserts: one committed (fsync'd) transaction each.
  {
    std::vector<CaseRecord> one;
    gen.run(one, 1, 0);
    std::vector<double> lat;
    for (auto& c : one) {
      c.natural_key = "single/" + c.natural_key + fmt::format("/{}", gen.rng());
      c.parent_key.clear();
      auto t0 = std::chrono::steady_clock::now();
      if (!store.record_case(c)) return 1;
      lat.push_back(seconds_since(t0) * 1e3);
    }
    std::printf("single record_case (own fsync'd commit): p50 %.2f ms, max %.2f ms over %zu\n", percentile(lat, 0.5),
                percentile(lat, 1.0), lat.size());
  }

  auto& db = store.db();
  if (!postgres) (void)db.exec("PRAGMA wal_checkpoint(TRUNCATE)");
  auto stats = store.stats();
  if (!stats) return 1;
  // Bytes per case without code: every table and index except the code blobs, from dbstat (or
  // PostgreSQL's relation sizes).
  {
    auto st = db.prepare(postgres ? "SELECT c.relname, pg_relation_size(c.oid) FROM pg_class c JOIN pg_namespace n "
                                    "ON n.oid = c.relnamespace WHERE n.nspname = current_schema() AND c.relkind IN "
                                    "('r', 'i', 't') ORDER BY 2 DESC"
                                  : "SELECT name, sum(pgsize) FROM dbstat GROUP BY name ORDER BY 2 DESC");
    if (!st) {
      std::fprintf(stderr, "%s\n", st.error().message.c_str());
      return 1;
    }
    int64_t total = 0, code = 0;
    std::vector<std::pair<std::string, int64_t>> parts;
    for (;;) {
      auto row = st->step();
      if (!row || !*row) break;
      std::string name = st->text(0);
      int64_t bytes = st->int64(1);
      total += bytes;
      if (name == "blob" || name == "sqlite_autoindex_blob_1" || name == "blob_pkey" || name == "blob_hash_key") {
        code += bytes;
      }
      parts.emplace_back(name, bytes);
    }
    double per_case = static_cast<double>(total - code) / static_cast<double>(stats->cases);
    std::printf("size: %.1f MiB total, %.1f MiB code blobs (%lld blobs, %.1f MiB raw); %.0f bytes per case without code\n",
                static_cast<double>(total) / (1 << 20), static_cast<double>(code) / (1 << 20),
                static_cast<long long>(stats->code_blobs), static_cast<double>(stats->code_bytes_raw) / (1 << 20), per_case);
    std::printf("  largest parts (bytes per case):");
    for (size_t i = 0; i < parts.size() && i < 8; ++i) {
      std::printf(" %s %.0f;", parts[i].first.c_str(), static_cast<double>(parts[i].second) / static_cast<double>(stats->cases));
    }
    std::printf("\n");
  }

  // Retrieval for random states.
  std::mt19937_64 qrng(99);
  std::vector<std::string> sigs;
  for (const auto& t : k_error_templates) sigs.push_back(error_signature(eval::Verdict::compile_error, "", fmt::format(fmt::runtime(t), 1, 1, "x")));
  sigs.push_back("wrong_result:nan_mismatch");
  sigs.push_back("runtime_error:SIGSEGV");
  auto max_id = db.query_int("SELECT max(id) FROM cases");
  int64_t max_case = max_id && *max_id ? **max_id : 1;
  auto make_query = [&]() {
    RetrievalQuery q;
    const OpDef& op = gen.ops[qrng() % gen.ops.size()];
    q.task = op.task;
    size_t ti = qrng() % k_targets.size();
    q.target = k_targets[ti];
    q.toolchain = ti == 2 ? "nvcc-12.4 -O3 -arch=sm_90" : "g++-12 -O3 -march=native -fopenmp";
    q.backend = ti == 2 ? "cuda" : "cpu";
    q.stage = static_cast<Stage>(qrng() % 3);
    if (q.stage == Stage::repair || qrng() % 3 == 0) q.last_error_signature = sigs[qrng() % sigs.size()];
    q.bottleneck = qrng() % 2 ? "memory" : "compute";
    q.text = words(qrng, 8);
    if (qrng() % 2) q.incumbent_case = 1 + static_cast<int64_t>(qrng() % static_cast<uint64_t>(max_case));
    q.limit = 50;
    return q;
  };
  for (int i = 0; i < 100; ++i) (void)store.retrieve(make_query());
  std::vector<double> lat, cpu;
  size_t items = 0;
  int64_t tokens = 0;
  for (int i = 0; i < queries; ++i) {
    RetrievalQuery q = make_query();
    auto t0 = std::chrono::steady_clock::now();
    double c0 = thread_cpu_seconds();
    auto r = store.retrieve(q);
    lat.push_back(seconds_since(t0) * 1e3);
    cpu.push_back((thread_cpu_seconds() - c0) * 1e3);
    if (!r) {
      std::fprintf(stderr, "retrieve: %s\n", r.error().message.c_str());
      return 1;
    }
    items += r->size();
    for (const auto& it : *r) tokens += agent::item_tokens(it);  // the text the agent makes of it, outside the timing
  }
  std::printf("retrieval over %lld cases, %d random states (limit 50): p50 %.2f ms, p90 %.2f ms, p99 %.2f ms, max %.2f ms; "
              "%.1f items and %.0f tokens per state\n",
              static_cast<long long>(stats->cases), queries, percentile(lat, 0.5), percentile(lat, 0.9),
              percentile(lat, 0.99), percentile(lat, 1.0), static_cast<double>(items) / queries,
              static_cast<double>(tokens) / queries);
  std::printf("retrieval CPU time: p50 %.2f ms, p90 %.2f ms, p99 %.2f ms, max %.2f ms\n", percentile(cpu, 0.5),
              percentile(cpu, 0.9), percentile(cpu, 0.99), percentile(cpu, 1.0));
  return concurrent_inserts(path, gen, writer_counts, writer_cases) ? 0 : 1;
}
