// The `kope eval` / `kope bench` command-line contract: exit codes and JSON fields.
#include <cstdlib>
#include <set>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "harness.h"
#include "hw/isa.h"
#include "util/fs.h"
#include "util/subprocess.h"

namespace kope::testing {
namespace {

using nlohmann::json;

// The CLI gets its own cache with a hardware profile already in it (no probe during tests).
fs::path cli_cache() {
  static fs::path dir = [] {
    fs::path d = fs::path(KOPE_BINARY_DIR) / "adversarial-cli-cache";
    fs::create_directories(d);
    HardwareProfile p = test_profile();
    p.cores = describe_host().cores;
    EXPECT_TRUE(util::write_file_atomic(d / "hw.json", p.to_json()));
    // The profile `--isa x86-64-v3` reads: this CPU at that level (where it has the level).
    if (auto v3 = target_at_level(host_cpu_target(), IsaLevel::x86_64_v3)) {
      p.target = *v3;
      EXPECT_TRUE(util::write_file_atomic(d / "hw-x86-64-v3.json", p.to_json()));
    }
    return d;
  }();
  return dir;
}

struct Cli {
  int code = -1;
  std::string out;
  std::string err;
};

Cli kope(std::vector<std::string> args) {
  (void)world();
  util::RunOptions ro;
  ro.spawn.argv = {KOPE_EXE};
  for (auto& a : args) ro.spawn.argv.push_back(std::move(a));
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    if (!std::string_view(*e).starts_with("KOPE_CACHE_DIR=")) env.emplace_back(*e);
  }
  env.push_back("KOPE_CACHE_DIR=" + cli_cache().string());
  ro.spawn.env = env;
  ro.timeout = std::chrono::seconds(300);
  auto r = util::run(ro);
  EXPECT_TRUE(r) << r.error().message;
  return {r->status.exited ? r->status.code : 128 + r->status.signal, r->out, r->err};
}

std::string corpus(const char* name) { return (fs::path(KOPE_SOURCE_DIR) / "tests/adversarial/corpus" / name).string(); }
std::string op_dir(const char* rel) { return (fs::path(KOPE_SOURCE_DIR) / "tests/ops" / rel).string(); }

TEST(EvalCli, CorrectKernelExitsZeroWithTheJsonContract) {
  Cli c = kope({"eval", corpus("honest_vadd_naive.cpp"), "--op", op_dir("elementwise/vadd"), "--json", "--max-seconds", "1", "--target-ci", "0.05"});
  ASSERT_EQ(c.code, 0) << c.out << c.err;
  json j = json::parse(c.out);
  EXPECT_EQ(j["verdict"], "correct");
  EXPECT_EQ(j["op"], "vadd");
  EXPECT_FALSE(j["target"].get<std::string>().empty());
  EXPECT_FALSE(j["message"].get<std::string>().empty());
  ASSERT_EQ(j["cases"].size(), 6u);
  for (const auto& cs : j["cases"]) {
    EXPECT_TRUE(cs["ok"].get<bool>());
    EXPECT_TRUE(cs.contains("case") && cs.contains("max_abs_err") && cs.contains("first_mismatch"));
  }
  ASSERT_EQ(j["timing"].size(), 1u);
  const json& t = j["timing"][0];
  EXPECT_EQ(t["case"], 5);
  EXPECT_GT(t["median_us"].get<double>(), 0);
  EXPECT_GE(t["ci95_us"].get<double>(), 0);
  EXPECT_FALSE(t["samples"].empty());
  EXPECT_GT(t["reference_us"].get<double>(), 0);
  EXPECT_TRUE(t["library_us"].is_null());  // vadd has no library baseline
  EXPECT_GT(t["roofline_us"].get<double>(), 0);
  EXPECT_GT(j["speedup_vs_reference"].get<double>(), 0);
  EXPECT_TRUE(j["speedup_vs_library"].is_null());
}

// --library-config best: every configuration this CPU runs is verified and timed, the fastest
// correct one is kept, cached, and used by `kope eval`; the default names the environment's.
TEST(BenchCli, LibraryConfigBestKeepsTheFastestCorrectConfiguration) {
  std::string op = op_dir("matmul/matmul_small");
  Cli c = kope({"bench", op, "--library-config", "best", "--max-seconds", "0.05", "--target-ci", "0.2", "--json", "--refresh"});
  ASSERT_EQ(c.code, 0) << c.out << c.err;
  json j = json::parse(c.out);
  ASSERT_EQ(j["library_selections"].size(), 1u) << c.out;
  const json& sel = j["library_selections"][0];
  EXPECT_EQ(sel["op"], "matmul_small");
  EXPECT_EQ(sel["library"], "openblas");
  EXPECT_FALSE(sel["cached"].get<bool>());
  std::set<std::string> names;
  std::string fastest;
  double fastest_us = 1e300;
  int correct = 0;
  for (const auto& t : sel["trials"]) {
    names.insert(t["setting"].get<std::string>());
    if (!t["correct"].get<bool>()) {
      EXPECT_FALSE(t["problem"].get<std::string>().empty()) << t.dump();
      continue;
    }
    ++correct;
    ASSERT_EQ(t["median_us"].size(), 1u) << t.dump();  // one timed case
    double us = t["median_us"][0].get<double>();
    EXPECT_GT(us, 0);
    EXPECT_GT(t["gflops"][0].get<double>(), 0);
    EXPECT_FALSE(t["core"].get<std::string>().empty()) << t.dump();
    if (us < fastest_us) {
      fastest_us = us;
      fastest = t["setting"].get<std::string>();
    }
  }
  EXPECT_TRUE(names.count("environment") && names.count("auto")) << sel.dump();
  ASSERT_GE(correct, 1) << sel.dump();
  EXPECT_EQ(sel["best"], fastest) << sel.dump();
  ASSERT_EQ(j["rows"].size(), 1u);
  const json& row = j["rows"][0];
  EXPECT_GT(row["library_us"].get<double>(), 0) << row.dump();
  if (fastest != "environment") {
    EXPECT_NE(row["library_config"].get<std::string>().find(fastest), std::string::npos) << row.dump();
    EXPECT_FALSE(row["library_forced"].get<bool>());
  }

  // The selection is cached, and `kope eval --library-config best` times against it.
  Cli again = kope({"bench", op, "--library-config", "best", "--max-seconds", "0.05", "--json"});
  ASSERT_EQ(again.code, 0) << again.err;
  json ja = json::parse(again.out);
  EXPECT_TRUE(ja["library_selections"][0]["cached"].get<bool>());
  EXPECT_EQ(ja["library_selections"][0]["best"], fastest);
  Cli e = kope({"eval", corpus("honest_matmul_tiled_omp.cpp"), "--op", op, "--json", "--max-seconds", "0.1", "--target-ci", "0.2",
                "--library-config", "best"});
  ASSERT_EQ(e.code, 0) << e.out << e.err;
  json je = json::parse(e.out);
  ASSERT_TRUE(je["library_config"].is_object()) << e.out;
  EXPECT_EQ(je["library_config"]["setting"], fastest);
  EXPECT_GT(je["speedup_vs_library"].get<double>(), 0);

  // The default respects the environment and says when it forces the library.
  Cli d = kope({"eval", corpus("honest_matmul_tiled_omp.cpp"), "--op", op, "--json", "--max-seconds", "0.1", "--target-ci", "0.2"});
  ASSERT_EQ(d.code, 0) << d.out << d.err;
  json jd = json::parse(d.out);
  ASSERT_TRUE(jd["library_config"].is_object()) << d.out;
  EXPECT_EQ(jd["library_config"]["setting"], "environment");
  const char* forced = std::getenv("OPENBLAS_CORETYPE");
  bool env_forces = forced != nullptr && *forced != '\0';
  EXPECT_EQ(jd["library_forced"].get<bool>(), env_forces) << d.out;
  if (env_forces) {
    EXPECT_NE(jd["message"].get<std::string>().find(std::string("[library forced: OPENBLAS_CORETYPE=") + forced), std::string::npos)
        << jd["message"];
    EXPECT_EQ(jd["library_config"]["core"].get<std::string>().size() > 0, true);
  }
}

TEST(EvalCli, OtherVerdictsExitOne) {
  Cli c = kope({"eval", corpus("noop.cpp"), "--op", op_dir("elementwise/vadd"), "--json", "--no-time"});
  EXPECT_EQ(c.code, 1) << c.out << c.err;
  json j = json::parse(c.out);
  EXPECT_EQ(j["verdict"], "wrong_result");
  EXPECT_TRUE(j["speedup_vs_reference"].is_null());
  EXPECT_TRUE(j["speedup_vs_library"].is_null());
  EXPECT_FALSE(j["cases"][0]["ok"].get<bool>());
  EXPECT_TRUE(j["cases"][0]["first_mismatch"].is_string());

  Cli human = kope({"eval", corpus("fork_bomb.cpp"), "--op", op_dir("elementwise/vadd"), "--no-time"});
  EXPECT_EQ(human.code, 1);
  EXPECT_NE(human.out.find("verdict: rejected"), std::string::npos) << human.out;
}

TEST(EvalCli, UsageAndConfigurationErrorsExitTwo) {
  EXPECT_EQ(kope({"eval", "/nonexistent/kernel.cpp", "--op", op_dir("elementwise/vadd")}).code, 2);
  EXPECT_EQ(kope({"eval", corpus("noop.cpp"), "--op", "no_such_op_anywhere"}).code, 2);
  EXPECT_EQ(kope({"eval", corpus("noop.cpp")}).code, 2);  // --op is required
  EXPECT_EQ(kope({"eval", corpus("honest_vadd_naive.cpp"), "--op", op_dir("elementwise/vadd"), "--flag", "-Wl,-rpath,/tmp"}).code, 2);
  EXPECT_EQ(kope({"bench"}).code, 2);  // nothing selected
}

// `--isa x86-64-v3` compiles for AVX2 + FMA: an AVX-512 kernel gets a compile error that names
// AVX-512 and the level, whatever CPU runs the test (the compile needs no AVX-512 hardware).
TEST(EvalCli, IsaLevelRejectsInstructionsAboveIt) {
  if (!target_at_level(host_cpu_target(), IsaLevel::x86_64_v3)) GTEST_SKIP() << "this CPU is not x86-64-v3 (AVX2 + FMA)";
  std::string avx512 = (fs::path(KOPE_SOURCE_DIR) / "tests/adversarial/isa/vadd_avx512.cpp").string();
  Cli c = kope({"eval", avx512, "--op", op_dir("elementwise/vadd"), "--isa", "x86-64-v3", "--json", "--no-time"});
  ASSERT_EQ(c.code, 1) << c.out << c.err;
  json j = json::parse(c.out);
  EXPECT_EQ(j["verdict"], "compile_error");
  std::string message = j["message"].get<std::string>();
  EXPECT_NE(message.find("AVX-512 instructions"), std::string::npos) << message;
  EXPECT_NE(message.find("_mm512_add_ps"), std::string::npos) << message;
  EXPECT_NE(message.find("target level x86-64-v3"), std::string::npos) << message;
  EXPECT_EQ(j["target"], "x86_64-avx2-fma");

  // An extra flag may not lift the code above the level either.
  Cli lifted = kope({"eval", avx512, "--op", op_dir("elementwise/vadd"), "--isa", "x86-64-v3", "--flag", "-mavx512f", "--json", "--no-time"});
  ASSERT_EQ(lifted.code, 1) << lifted.out << lifted.err;
  json jl = json::parse(lifted.out);
  EXPECT_EQ(jl["verdict"], "compile_error");
  EXPECT_NE(jl["message"].get<std::string>().find("-mavx512f enable instructions (avx512f"), std::string::npos) << jl["message"];
}

// Nor can the source lift itself above the level: `#pragma GCC target`, target attributes,
// target_clones and inline asm compile, but the compiled object is disassembled and AVX-512 in
// it is a compile error naming the instructions, their function and the level. Natively the
// same kernels compile (and run, on an AVX-512 CPU). No AVX-512 hardware is needed to compile.
TEST(EvalCli, IsaLevelRejectsInstructionsTheSourceLiftsAboveIt) {
  if (!target_at_level(host_cpu_target(), IsaLevel::x86_64_v3)) GTEST_SKIP() << "this CPU is not x86-64-v3 (AVX2 + FMA)";
  struct Case {
    const char* file;
    const char* function;  // where the AVX-512 code is
    bool runs_natively;    // correct under native on an AVX-512 CPU (target_clones is an ifunc: rejected)
  };
  for (const Case& k : std::initializer_list<Case>{
           {"vadd_pragma_avx512.cpp", "kope_kernel", true},
           {"vadd_target_attribute.cpp", "add16(float const*, float const*, float*, long)", true},
           {"vadd_inline_asm_zmm.cpp", "kope_kernel", true},
           {"vadd_target_clones.cpp", "add_all(float const*, float const*, float*, long) [clone .avx512f", false},
       }) {
    std::string path = (fs::path(KOPE_SOURCE_DIR) / "tests/adversarial/isa" / k.file).string();
    Cli c = kope({"eval", path, "--op", op_dir("elementwise/vadd"), "--isa", "x86-64-v3", "--json", "--no-time"});
    ASSERT_EQ(c.code, 1) << k.file << "\n" << c.out << c.err;
    json j = json::parse(c.out);
    EXPECT_EQ(j["verdict"], "compile_error") << k.file;
    std::string message = j["message"].get<std::string>();
    EXPECT_NE(message.find("AVX-512 instructions ("), std::string::npos) << message;
    EXPECT_NE(message.find("%zmm"), std::string::npos) << message;
    EXPECT_NE(message.find(std::string(") in ") + k.function), std::string::npos) << message;
    EXPECT_NE(message.find("are above the target level x86-64-v3"), std::string::npos) << message;
    EXPECT_NE(message.find("#pragma GCC target, target attributes and inline asm cannot lift a kernel above the level"),
              std::string::npos)
        << message;
    EXPECT_EQ(j["target"], "x86_64-avx2-fma");

    Cli native = kope({"eval", path, "--op", op_dir("elementwise/vadd"), "--json", "--no-time"});
    json jn = json::parse(native.out, nullptr, false);
    ASSERT_FALSE(jn.is_discarded()) << k.file << "\n" << native.out << native.err;
    EXPECT_NE(jn["verdict"], "compile_error") << k.file << "\n" << native.out;
    if (k.runs_natively && host_cpu_target().has("avx512")) {
      EXPECT_EQ(jn["verdict"], "correct") << k.file << "\n" << native.out;
    }
  }
}

// The same level takes an AVX2 kernel, and names the target an AVX2 CPU has.
TEST(EvalCli, IsaLevelAcceptsKernelsWithinIt) {
  if (!target_at_level(host_cpu_target(), IsaLevel::x86_64_v3)) GTEST_SKIP() << "this CPU is not x86-64-v3 (AVX2 + FMA)";
  Cli c = kope({"eval", corpus("honest_vadd_omp_avx.cpp"), "--op", op_dir("elementwise/vadd"), "--isa", "x86-64-v3", "--json", "--no-time"});
  ASSERT_EQ(c.code, 0) << c.out << c.err;
  json j = json::parse(c.out);
  EXPECT_EQ(j["verdict"], "correct");
  EXPECT_EQ(j["target"], "x86_64-avx2-fma");
}

// Two honest real-model cummax kernels compared on shared pages (a draft and its refinement,
// tests/adversarial/shared_pages/). The comparison often ends after a pair whose last batch was
// the incumbent's, which poisons both output slots, canaries included, with patterns of its own;
// the candidate's fresh-data check then calls the kernel on one slot and checks the canaries of
// both. It judged the refinement "wrote before the start of output y (byte -1)" in four of five
// evaluations until the check poisoned both slots itself first.
TEST(EvalCli, AnHonestKernelStaysCorrectAgainstAnIncumbentOnSharedPages) {
  if (!target_at_level(host_cpu_target(), IsaLevel::x86_64_v3)) GTEST_SKIP() << "this CPU is not x86-64-v3 (AVX2 + FMA)";
  const fs::path dir = fs::path(KOPE_SOURCE_DIR) / "tests/adversarial/shared_pages";
  for (int round = 0; round < 3; ++round) {
    Cli c = kope({"eval", (dir / "cummax_candidate.cpp").string(), "--op", (fs::path(KOPE_SOURCE_DIR) / "ops/scan/cummax").string(),
                  "--incumbent", (dir / "cummax_incumbent.cpp").string(), "--isa", "x86-64-v3", "--json", "--max-seconds", "3",
                  "--target-ci", "0.05"});
    ASSERT_TRUE(c.code == 0 || c.code == 1) << c.err;
    json j = json::parse(c.out);
    EXPECT_EQ(j["verdict"], "correct") << "round " << round << ": " << j["message"];
    EXPECT_NE(j["incumbent"]["decision"], "unavailable") << j["incumbent"].dump();
  }
}

// A level this CPU lacks, or no level at all, is a configuration error (exit 2) naming it.
TEST(EvalCli, IsaLevelTheCpuLacksIsRefused) {
  Cli bogus = kope({"eval", corpus("honest_vadd_naive.cpp"), "--op", op_dir("elementwise/vadd"), "--isa", "x86-64-v9"});
  EXPECT_EQ(bogus.code, 2) << bogus.out << bogus.err;
  if (target_at_level(host_cpu_target(), IsaLevel::x86_64_v4)) GTEST_SKIP() << "this CPU has x86-64-v4: no level to refuse";
  Cli c = kope({"eval", corpus("honest_vadd_naive.cpp"), "--op", op_dir("elementwise/vadd"), "--isa", "x86-64-v4", "--no-time"});
  EXPECT_EQ(c.code, 2) << c.out << c.err;
  EXPECT_NE(c.err.find("--isa x86-64-v4"), std::string::npos) << c.err;
}

TEST(EvalCli, UnknownCommandIsNamedWithTheCommandsThereAre) {
  Cli c = kope({"evaluate", corpus("noop.cpp")});
  EXPECT_EQ(c.code, 2);
  EXPECT_NE(c.err.find("unknown command 'evaluate'"), std::string::npos) << c.err;
  EXPECT_NE(c.err.find("eval, bench"), std::string::npos) << c.err;
}

TEST(BenchCli, TimesBaselinesAgainstTheRoofline) {
  Cli c = kope({"bench", op_dir("matmul/matmul_small"), "--json", "--max-seconds", "1", "--target-ci", "0.05", "--refresh"});
  ASSERT_EQ(c.code, 0) << c.out << c.err;
  json j = json::parse(c.out);
  ASSERT_EQ(j["rows"].size(), 1u);
  const json& row = j["rows"][0];
  EXPECT_EQ(row["op"], "matmul_small");
  EXPECT_GT(row["reference_us"].get<double>(), 0);
  EXPECT_GT(row["library_us"].get<double>(), 0) << row.dump();  // OpenBLAS, verified against the reference
  EXPECT_GT(row["roofline_us"].get<double>(), 0);
  EXPECT_GT(row["reference_fraction_of_roofline"].get<double>(), 0);
  // The second run, asking for no closer an interval, reads the cache.
  Cli again = kope({"bench", op_dir("matmul/matmul_small"), "--json", "--target-ci", "0.05"});
  ASSERT_EQ(again.code, 0) << again.err;
  EXPECT_TRUE(json::parse(again.out)["rows"][0]["reference_cached"].get<bool>());
  // One asking for a closer interval than the cached times were asked for uses them only if
  // they met it anyway; otherwise it times them again (and caches what it measured).
  const double reached = row["reference_ci95_us"].get<double>() / row["reference_us"].get<double>();
  Cli closer = kope({"bench", op_dir("matmul/matmul_small"), "--json", "--max-seconds", "1", "--target-ci", "0.01"});
  ASSERT_EQ(closer.code, 0) << closer.err;
  const json retimed = json::parse(closer.out)["rows"][0];
  EXPECT_EQ(retimed["reference_cached"].get<bool>(), reached <= 0.01) << reached;
  Cli after = kope({"bench", op_dir("matmul/matmul_small"), "--json", "--target-ci", "0.01"});
  ASSERT_EQ(after.code, 0) << after.err;
  if (retimed["reference_ci95_us"].get<double>() <= 0.01 * retimed["reference_us"].get<double>() || reached <= 0.01) {
    EXPECT_TRUE(json::parse(after.out)["rows"][0]["reference_cached"].get<bool>()) << after.out;
  }
  Cli table = kope({"bench", op_dir("matmul/matmul_small")});
  EXPECT_NE(table.out.find("matmul_small"), std::string::npos) << table.out;
}

}  // namespace
}  // namespace kope::testing
