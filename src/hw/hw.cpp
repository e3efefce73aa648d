#include "kope/hw.h"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <ctime>
#include <fstream>

#include <nlohmann/json.hpp>

#include "hw/isa.h"
#include "hw/probe_source.h"
#include "util/file_lock.h"
#include "util/fs.h"
#include "util/strings.h"
#include "util/subprocess.h"
#include "util/system.h"
#include "util/time.h"

namespace kope {

namespace {

using nlohmann::json;

uint64_t parse_cache_size(std::string s) {
  s = std::string(util::trim(s));
  if (s.empty()) return 0;
  uint64_t mult = 1;
  char last = s.back();
  if (last == 'K') mult = 1024;
  if (last == 'M') mult = 1024 * 1024;
  if (last == 'G') mult = 1024ULL * 1024 * 1024;
  return std::strtoull(s.c_str(), nullptr, 10) * mult;
}

std::string read_trimmed(const std::string& path) {
  auto r = util::read_file(path);
  return r ? std::string(util::trim(*r)) : std::string();
}

std::string compiler_command() {
  if (auto v = util::get_env("KOPE_CXX")) return *v;
  return "g++";
}

Result<std::string> compiler_version(const std::string& cxx) {
  util::RunOptions ro;
  ro.spawn.argv = {cxx, "--version"};
  ro.timeout = std::chrono::seconds(20);
  KOPE_ASSIGN(util::RunResult r, util::run(ro));
  if (!r.status.success()) return fail(ErrorKind::io, "{} --version {}", cxx, r.status.describe());
  return std::string(util::trim(r.out.substr(0, r.out.find('\n'))));
}

Result<HardwareProfile> measure() {
  HardwareProfile p = describe_host();
  std::string cxx = compiler_command();
  KOPE_ASSIGN(p.compiler, compiler_version(cxx));
  KOPE_ASSIGN(util::TempDir dir, util::TempDir::create("kope-hw-"));
  auto src = dir.path() / "probe.cpp";
  auto exe = dir.path() / "probe";
  KOPE_TRY(util::write_file_atomic(src, hw::k_probe_source));
  // The probe measures what kernels of the chosen ISA level can reach (an x86-64-v3 kernel
  // on an AVX-512 CPU has AVX2's FMA peak).
  KOPE_ASSIGN(IsaLevel level, isa_level_from_env());
  util::RunOptions cc;
  cc.spawn.argv = {cxx, "-O3"};
  for (auto& f : isa_level_flags(level)) cc.spawn.argv.push_back(f);
  for (const auto& f : {"-fopenmp", "-ffp-contract=fast", "-std=gnu++17"}) cc.spawn.argv.emplace_back(f);
  for (const auto& f : {src.string(), std::string("-o"), exe.string()}) cc.spawn.argv.push_back(f);
  cc.timeout = std::chrono::seconds(120);
  KOPE_ASSIGN(util::RunResult built, util::run(cc));
  if (!built.status.success()) {
    return fail(ErrorKind::io, "cannot compile the hardware probe with {}: {}\n{}", cxx,
                built.status.describe(), util::truncate_text(built.err, 2000, 20));
  }
  uint64_t max_ws = std::max<uint64_t>(uint64_t{256} << 20, 4 * p.l3_bytes);
  if (p.memory_bytes > 0) max_ws = std::min<uint64_t>(max_ws, p.memory_bytes / 8);
  max_ws = std::min<uint64_t>(max_ws, uint64_t{1536} << 20);
  // Measuring is timing: never at the same time as an evaluator's timing (or another probe).
  KOPE_ASSIGN(util::SharedLock lock, util::lock_for_timing());
  util::RunOptions ro;
  ro.spawn.argv = {exe.string(), std::to_string(max_ws), std::to_string(p.l3_bytes > 0 ? p.l3_bytes : uint64_t{8} << 20)};
  ro.timeout = std::chrono::seconds(300);
  KOPE_ASSIGN(util::RunResult r, util::run(ro));
  if (!r.status.success()) {
    return fail(ErrorKind::io, "the hardware probe {}: {}", r.status.describe(), util::truncate_text(r.err, 2000, 20));
  }
  try {
    json j = json::parse(r.out);
    p.peak_gflops = j.at("gflops").get<double>();
    p.peak_gflops_core = j.at("gflops_core").get<double>();
    p.peak_gflops_f64 = j.at("gflops_f64").get<double>();
    p.peak_gflops_f64_core = j.at("gflops_f64_core").get<double>();
    p.peak_giops = j.value("giops", 0.0);
    p.peak_giops_core = j.value("giops_core", 0.0);
    for (const auto& pt : j.at("bandwidth")) {
      p.bandwidth.push_back({pt.at(0).get<uint64_t>(), pt.at(1).get<double>()});
    }
  } catch (const json::exception& e) {
    return fail(ErrorKind::internal, "the hardware probe printed unreadable output ({}): {}", e.what(), util::truncate_text(r.out, 500));
  }
  if (p.bandwidth.empty() || p.peak_gflops <= 0) return fail(ErrorKind::internal, "the hardware probe measured nothing");
  p.peak_gbps = p.bandwidth.back().gbps;
  p.measured_at = util::now_iso8601(util::TimePrecision::seconds);
  p.probe_version = k_hw_probe_version;
  return p;
}

}  // namespace

HardwareProfile describe_host() {
  HardwareProfile p;
  p.target = Target::host();
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.starts_with("model name")) {
      p.cpu_model = std::string(util::trim(line.substr(line.find(':') + 1)));
      break;
    }
  }
  if (p.cpu_model.empty()) p.cpu_model = "unknown";
  cpu_set_t set;
  CPU_ZERO(&set);
  p.cores = ::sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : static_cast<int>(::sysconf(_SC_NPROCESSORS_ONLN));
  for (int idx = 0; idx < 8; ++idx) {
    std::string base = fmt::format("/sys/devices/system/cpu/cpu0/cache/index{}/", idx);
    std::string level = read_trimmed(base + "level");
    if (level.empty()) break;
    std::string type = read_trimmed(base + "type");
    uint64_t size = parse_cache_size(read_trimmed(base + "size"));
    if (level == "1" && type != "Instruction") p.l1d_bytes = size;
    if (level == "2") p.l2_bytes = size;
    if (level == "3") p.l3_bytes = size;
  }
  // Without the kernel's cache description (some VMs have no /sys/.../cache) the per-core
  // levels come from CPUID through the C library. Not the L3: a guest is often shown the host's
  // whole L3, far beyond what it gets, and the roofline reads DRAM bandwidth past it.
  auto from_cpuid = [](int name) { long v = ::sysconf(name); return v > 0 ? static_cast<uint64_t>(v) : uint64_t{0}; };
  if (p.l1d_bytes == 0) p.l1d_bytes = from_cpuid(_SC_LEVEL1_DCACHE_SIZE);
  if (p.l2_bytes == 0) p.l2_bytes = from_cpuid(_SC_LEVEL2_CACHE_SIZE);
  p.memory_bytes = util::physical_memory_bytes();
  return p;
}

double HardwareProfile::gbps_for_working_set(uint64_t ws) const {
  if (bandwidth.empty()) return peak_gbps;
  double best = 0;
  for (const auto& pt : bandwidth) best = std::max(best, pt.gbps);
  for (const auto& pt : bandwidth) {
    if (pt.working_set_bytes >= ws) {
      // Smaller working sets never see less bandwidth than larger ones.
      double b = pt.gbps;
      for (const auto& q : bandwidth) {
        if (q.working_set_bytes >= pt.working_set_bytes) b = std::max(b, q.gbps);
      }
      return b;
    }
  }
  return peak_gbps;
}

double HardwareProfile::gbps_at(uint64_t ws) const {
  if (bandwidth.empty()) return peak_gbps;
  if (l3_bytes > 0 && ws > l3_bytes && peak_gbps > 0) return peak_gbps;
  if (ws <= bandwidth.front().working_set_bytes) return bandwidth.front().gbps;
  for (size_t i = 1; i < bandwidth.size(); ++i) {
    const BandwidthPoint& lo = bandwidth[i - 1];
    const BandwidthPoint& hi = bandwidth[i];
    if (ws > hi.working_set_bytes) continue;
    if (hi.working_set_bytes <= lo.working_set_bytes) return hi.gbps;
    double t = (std::log2(static_cast<double>(ws)) - std::log2(static_cast<double>(lo.working_set_bytes))) /
               (std::log2(static_cast<double>(hi.working_set_bytes)) - std::log2(static_cast<double>(lo.working_set_bytes)));
    return lo.gbps + t * (hi.gbps - lo.gbps);
  }
  return bandwidth.back().gbps;
}

double HardwareProfile::peak_gflops_for(bool f64) const {
  return f64 && peak_gflops_f64 > 0 ? peak_gflops_f64 : peak_gflops;
}

Roof HardwareProfile::roofline(double flops, double bytes, bool f64, uint64_t working_set_bytes) const {
  Roof r;
  r.f64 = f64 && peak_gflops_f64 > 0;
  r.gflops = peak_gflops_for(f64);
  r.working_set_bytes = working_set_bytes > 0 ? working_set_bytes : bytes > 0 ? static_cast<uint64_t>(bytes) : 0;
  r.gbps = gbps_at(r.working_set_bytes);
  if (r.gflops > 0) r.compute_seconds = flops / (r.gflops * 1e9);
  if (r.gbps > 0) r.memory_seconds = bytes / (r.gbps * 1e9);
  r.seconds = std::max(r.compute_seconds, r.memory_seconds);
  return r;
}

Roof HardwareProfile::memory_roofline(double bytes, uint64_t working_set_bytes) const {
  Roof r = roofline(0, bytes, false, working_set_bytes);
  r.gflops = 0;
  r.memory_only = true;
  return r;
}

Roof HardwareProfile::integer_roofline(double ops, double bytes, uint64_t working_set_bytes) const {
  if (!(peak_giops > 0)) return memory_roofline(bytes, working_set_bytes);
  Roof r = roofline(0, bytes, false, working_set_bytes);
  r.integer = true;
  r.gflops = peak_giops;
  r.compute_seconds = ops / (peak_giops * 1e9);
  r.seconds = std::max(r.compute_seconds, r.memory_seconds);
  return r;
}

std::string Roof::describe() const {
  if (bound() == "memory") {
    // The bytes a call moves, and the working set the bandwidth was read at when it is larger
    // (the data sets timing alternates).
    double moved = memory_seconds * gbps * 1e9;
    std::string at = static_cast<double>(working_set_bytes) > moved * 1.01
                         ? fmt::format(" (the bandwidth of a {} working set)", util::human_bytes(static_cast<double>(working_set_bytes)))
                         : std::string();
    return fmt::format("memory roof: {} at {:.1f} GB/s{}{}", util::human_bytes(moved), gbps, at,
                       memory_only ? " (integer op: no integer peak is measured, so no compute roof)" : "");
  }
  if (integer) return fmt::format("compute roof: {:.1f} GOP/s integer (the int8 multiply-add peak)", gflops);
  return fmt::format("compute roof: {:.1f} GFLOP/s {}", gflops, f64 ? "FP64" : "FP32");
}

double HardwareProfile::roofline_seconds(double flops, double bytes) const {
  double t = 0;
  if (peak_gflops > 0) t = std::max(t, flops / (peak_gflops * 1e9));
  if (peak_gbps > 0) t = std::max(t, bytes / (peak_gbps * 1e9));
  return t;
}

double HardwareProfile::floor_seconds(double flops, double bytes, uint64_t ws) const {
  double t = 0;
  if (peak_gflops > 0) t = std::max(t, flops / (peak_gflops * 1e9));
  double bw = gbps_for_working_set(ws);
  if (bw > 0) t = std::max(t, bytes / (bw * 1e9));
  return t;
}

std::string HardwareProfile::to_json() const {
  json j;
  j["target"] = target.str();
  j["cpu_model"] = cpu_model;
  j["cores"] = cores;
  j["l1d_bytes"] = l1d_bytes;
  j["l2_bytes"] = l2_bytes;
  j["l3_bytes"] = l3_bytes;
  j["memory_bytes"] = memory_bytes;
  j["peak_gflops"] = peak_gflops;
  j["peak_gflops_core"] = peak_gflops_core;
  j["peak_gflops_f64"] = peak_gflops_f64;
  j["peak_gflops_f64_core"] = peak_gflops_f64_core;
  j["peak_giops"] = peak_giops;
  j["peak_giops_core"] = peak_giops_core;
  j["peak_gbps"] = peak_gbps;
  json bw = json::array();
  for (const auto& pt : bandwidth) bw.push_back({{"working_set_bytes", pt.working_set_bytes}, {"gbps", pt.gbps}});
  j["bandwidth"] = bw;
  j["compiler"] = compiler;
  j["measured_at"] = measured_at;
  j["probe_version"] = probe_version;
  return j.dump(2);
}

Result<HardwareProfile> HardwareProfile::from_json(std::string_view text) {
  try {
    json j = json::parse(text);
    HardwareProfile p;
    KOPE_ASSIGN(p.target, Target::parse(j.at("target").get<std::string>()));
    p.cpu_model = j.at("cpu_model").get<std::string>();
    p.cores = j.at("cores").get<int>();
    p.l1d_bytes = j.value("l1d_bytes", uint64_t{0});
    p.l2_bytes = j.value("l2_bytes", uint64_t{0});
    p.l3_bytes = j.value("l3_bytes", uint64_t{0});
    p.memory_bytes = j.value("memory_bytes", uint64_t{0});
    p.peak_gflops = j.at("peak_gflops").get<double>();
    p.peak_gflops_core = j.value("peak_gflops_core", 0.0);
    p.peak_gflops_f64 = j.value("peak_gflops_f64", 0.0);
    p.peak_gflops_f64_core = j.value("peak_gflops_f64_core", 0.0);
    p.peak_giops = j.value("peak_giops", 0.0);
    p.peak_giops_core = j.value("peak_giops_core", 0.0);
    p.peak_gbps = j.at("peak_gbps").get<double>();
    for (const auto& pt : j.value("bandwidth", json::array())) {
      p.bandwidth.push_back({pt.at("working_set_bytes").get<uint64_t>(), pt.at("gbps").get<double>()});
    }
    p.compiler = j.value("compiler", "");
    p.measured_at = j.value("measured_at", "");
    p.probe_version = j.value("probe_version", 0);
    return p;
  } catch (const json::exception& e) {
    return fail(ErrorKind::corrupt, "hardware profile JSON is unreadable: {}", e.what());
  }
}

Result<HardwareProfile> load_hardware_profile(bool refresh) {
  // One cached profile per ISA level (hw.json for native, hw-x86-64-v3.json, ...): switching
  // --isa does not measure again.
  KOPE_ASSIGN(IsaLevel level, isa_level_from_env());
  auto path = util::cache_dir() / (level == IsaLevel::native ? std::string("hw.json") : fmt::format("hw-{}.json", isa_level_name(level)));
  HardwareProfile host = describe_host();
  if (!refresh) {
    if (auto text = util::read_file(path)) {
      if (auto cached = HardwareProfile::from_json(*text)) {
        // A profile of an older probe (no FP64 peak, no small working sets) is measured again.
        if (cached->target == host.target && cached->cpu_model == host.cpu_model && cached->cores == host.cores &&
            cached->probe_version >= k_hw_probe_version && cached->peak_gflops_f64 > 0) {
          // The per-core caches are static facts, read again: a profile cached by a kope that
          // could not read them (no /sys/.../cache on some VMs) gets them without a new
          // measurement. (Not the L3: the roofline was measured with what the file says.)
          if (cached->l1d_bytes == 0) cached->l1d_bytes = host.l1d_bytes;
          if (cached->l2_bytes == 0) cached->l2_bytes = host.l2_bytes;
          return *cached;
        }
      }
    }
  }
  KOPE_ASSIGN(HardwareProfile p, measure());
  KOPE_TRY(util::write_file_atomic(path, p.to_json()));
  return p;
}

}  // namespace kope
