// load_hardware_profile with a hw.json of an older probe: measured again and replaced, never a
// crash. Runs the real probe once (a few seconds), in a private cache directory.
#include <cstdlib>
#include <optional>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "hw/probe_source.h"
#include "kope/hw.h"
#include "util/fs.h"
#include "util/strings.h"
#include "util/subprocess.h"

namespace kope {
namespace {

// Each test gets its own cache directory (only hw.json lives there), for this executable.
class HardwareProfileCache : public ::testing::Test {
 protected:
  void SetUp() override {
    auto t = util::TempDir::create("kope-hw-cache-");
    ASSERT_TRUE(t) << t.error().message;
    tmp.emplace(std::move(*t));
    ::setenv("KOPE_CACHE_DIR", tmp->path().c_str(), 1);
  }
  std::optional<util::TempDir> tmp;
  HardwareProfile host = describe_host();
};

TEST_F(HardwareProfileCache, AnOldProfileIsMeasuredAgainWithTheNewFields) {
  std::string old = fmt::format(R"({{"target": "{}", "cpu_model": "{}", "cores": {}, "peak_gflops": 1.5,
      "peak_gflops_core": 1, "peak_gbps": 0.5, "bandwidth": [{{"working_set_bytes": 262144, "gbps": 0.5}}],
      "compiler": "g++ 12", "measured_at": "2026-01-01T00:00:00Z"}})",
                                host.target.str(), host.cpu_model, host.cores);
  auto path = tmp->path() / "hw.json";
  ASSERT_TRUE(util::write_file_atomic(path, old));
  auto p = load_hardware_profile();
  ASSERT_TRUE(p) << p.error().message;
  EXPECT_EQ(p->probe_version, k_hw_probe_version);
  EXPECT_GT(p->peak_gflops_f64, 0);
  EXPECT_GT(p->peak_gflops, 0);
  EXPECT_NE(p->measured_at, "2026-01-01T00:00:00Z");
  ASSERT_GE(p->bandwidth.size(), 3u);
  EXPECT_LT(p->bandwidth.front().working_set_bytes, uint64_t{256} << 10);  // cache-sized points too
  // The file now holds the new profile, and the next load reads it instead of measuring.
  auto text = util::read_file(path);
  ASSERT_TRUE(text);
  auto j = nlohmann::json::parse(*text);
  EXPECT_EQ(j.at("probe_version").get<int>(), k_hw_probe_version);
  EXPECT_GT(j.at("peak_gflops_f64").get<double>(), 0);
  auto again = load_hardware_profile();
  ASSERT_TRUE(again);
  EXPECT_EQ(again->measured_at, p->measured_at);
}

// A current profile cached without cache sizes (measured where they could not be read) takes
// the host's per-core caches as they are read now, and is not measured again.
TEST_F(HardwareProfileCache, ACurrentProfileWithoutCacheSizesTakesTheHosts) {
  std::string current = fmt::format(R"({{"target": "{}", "cpu_model": "{}", "cores": {}, "peak_gflops": 100,
      "peak_gflops_core": 50, "peak_gflops_f64": 50, "peak_gbps": 20, "probe_version": {},
      "l1d_bytes": 0, "l2_bytes": 0, "l3_bytes": 0,
      "bandwidth": [{{"working_set_bytes": 16384, "gbps": 100}}, {{"working_set_bytes": 268435456, "gbps": 20}}],
      "compiler": "g++ 12", "measured_at": "2026-01-01T00:00:00Z"}})",
                                    host.target.str(), host.cpu_model, host.cores, k_hw_probe_version);
  ASSERT_TRUE(util::write_file_atomic(tmp->path() / "hw.json", current));
  auto p = load_hardware_profile();
  ASSERT_TRUE(p) << p.error().message;
  EXPECT_EQ(p->measured_at, "2026-01-01T00:00:00Z");  // read, not measured
  EXPECT_EQ(p->l1d_bytes, host.l1d_bytes);
  EXPECT_EQ(p->l2_bytes, host.l2_bytes);
  EXPECT_EQ(p->l3_bytes, 0u);
  EXPECT_EQ(p->peak_gflops, 100);
}

// The integer peak is measured with the widest int8 dot product each level offers kernels, so
// an int8 kernel is never "beyond the roof": vpdpbusd on zmm with AVX-512 VNNI (the AVX2
// vpmaddubsw figure is half of what a VNNI kernel reaches on a Zen 5 core), vpmaddubsw on zmm
// with AVX-512 BW, the VEX vpdpbusd with AVX-VNNI, vpmaddubsw on ymm with AVX2. Compiled only
// (with the flags, not the host, deciding), and read back with objdump.
TEST(HardwareProbe, TheIntegerPeakUsesTheWidestInt8DotProductOfEachLevel) {
  auto dir = util::TempDir::create("kope-probe-isa-");
  ASSERT_TRUE(dir) << dir.error().message;
  auto src = dir->path() / "probe.cpp";
  ASSERT_TRUE(util::write_file_atomic(src, hw::k_probe_source));
  struct Level {
    std::vector<std::string> flags;
    std::string expected;     // the instruction and register kind, as objdump prints them
    std::string not_expected;
    int chains;
  };
  const std::vector<Level> levels = {
      {{"-march=x86-64-v3"}, "vpmaddubsw %ymm", "vpdpbusd", 12},
      {{"-march=x86-64-v3", "-mavxvnni"}, "{vex} vpdpbusd %ymm", "vpmaddubsw", 12},
      {{"-march=x86-64-v4"}, "vpmaddubsw %zmm", "vpdpbusd", 16},
      {{"-march=x86-64-v4", "-mavx512vnni"}, "vpdpbusd %zmm", "vpmaddubsw", 16},
  };
  std::string cxx = util::get_env("KOPE_CXX").value_or("g++");
  for (const Level& l : levels) {
    SCOPED_TRACE(util::join(l.flags, " "));
    auto obj = dir->path() / "probe.o";
    util::RunOptions cc;
    cc.spawn.argv = {cxx, "-O3", "-fopenmp", "-std=gnu++17", "-c", src.string(), "-o", obj.string()};
    cc.spawn.argv.insert(cc.spawn.argv.begin() + 2, l.flags.begin(), l.flags.end());
    cc.timeout = std::chrono::seconds(120);
    auto built = util::run(cc);
    ASSERT_TRUE(built) << built.error().message;
    ASSERT_TRUE(built->status.success()) << built->err;
    util::RunOptions dis;
    dis.spawn.argv = {"objdump", "-d", "--no-show-raw-insn", obj.string()};
    dis.timeout = std::chrono::seconds(60);
    auto listing = util::run(dis);
    ASSERT_TRUE(listing) << listing.error().message;
    ASSERT_TRUE(listing->status.success()) << listing->err;
    int found = 0;
    for (size_t at = listing->out.find(l.expected); at != std::string::npos; at = listing->out.find(l.expected, at + 1)) ++found;
    EXPECT_GE(found, l.chains) << "every chain of the integer loop in " << l.expected;
    EXPECT_EQ(listing->out.find(l.not_expected), std::string::npos) << "a narrower int8 instruction: " << l.not_expected;
  }
}

}  // namespace
}  // namespace kope
