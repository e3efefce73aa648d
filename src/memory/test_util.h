// memory/test_util.h — helpers shared by the memory tests: stores in temp dirs, case builders.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "kope/memory.h"
#include "memory/sqlite_store.h"
#include "util/fs.h"

namespace kope::memory::testing {

inline constexpr const char* k_native = "x86_64-avx2-fma";
inline constexpr const char* k_foreign = "cuda-sm90";

inline TaskInfo task(const std::string& op, const std::string& category = "normalization", int level = 1) {
  TaskInfo t;
  t.op = op;
  t.spec_hash = "spec-" + op;
  t.category = category;
  t.level = level;
  t.signature = "extern \"C\" void kope_kernel(const float* x, float* y, int64_t N, int64_t D)";
  t.timed_dims = "[[4096, 1024]]";
  t.arithmetic_intensity = 0.6;
  t.log2_flops = 24;
  t.log2_bytes = 25;
  return t;
}

// A case for `op` on `target`; correct with the given speedup vs reference when speedup > 0,
// else a compile error.
inline CaseRecord make_case(const std::string& key, const std::string& op, double speedup,
                            const std::string& target = k_native, std::optional<int64_t> parent = std::nullopt) {
  CaseRecord c;
  c.natural_key = key;
  c.run_id = "run-1";
  c.task = task(op);
  c.hardware.target = target;
  c.hardware.cpu_model = target == k_native ? "Test CPU" : "Test GPU";
  c.hardware.cores = 8;
  c.hardware.peak_gflops = 500;
  c.hardware.peak_gbps = 40;
  c.toolchain.id = target == k_native ? "g++-12 -O3 -march=native" : "nvcc-12.4 -O3";
  c.toolchain.backend = target == k_native ? "cpu" : "cuda";
  c.parent_id = parent;
  c.stage = parent ? Stage::refine : Stage::draft;
  c.optimisation = "attempt " + key;
  c.code = "// kernel " + key + "\nextern \"C\" void kope_kernel(const float* x, float* y, int64_t N, int64_t D) {}\n";
  if (speedup > 0) {
    c.verdict = eval::Verdict::correct;
    c.message = "correct on 4 cases";
    c.speedup_vs_reference = speedup;
    c.fraction_of_roofline = 0.3;
    c.timings.push_back({3, 100.0 / speedup, 1.0, 100.0, std::nullopt, false, 0.0, std::nullopt});
  } else {
    c.verdict = eval::Verdict::compile_error;
    c.message = "compilation failed";
    c.diagnostics = "candidate.cpp:12:5: error: 'foo' was not declared in this scope\n   12 |     foo(x);\n";
  }
  c.journal = "strategy: " + c.optimisation;
  return c;
}

struct TempStore {
  util::TempDir dir;
  std::unique_ptr<Database> store;
  std::filesystem::path path;
};

inline TempStore temp_store(const std::string& name = "memory.db") {
  auto dir = util::TempDir::create("kope-memory-test");
  EXPECT_TRUE(dir.has_value());
  auto path = dir->path() / name;
  auto store = open_store(path);
  EXPECT_TRUE(store.has_value()) << (store ? "" : store.error().message);
  return TempStore{std::move(*dir), std::move(*store), path};
}

inline SqliteStore& sqlite(Database& s) { return dynamic_cast<SqliteStore&>(s); }

}  // namespace kope::memory::testing
