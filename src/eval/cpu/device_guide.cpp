// The CPU backend's facts for the prompt's hardware section.
#include "eval/cpu/cpu.h"

#include <algorithm>

#include <fmt/format.h>

#include "eval/native.h"
#include "hw/cpu_id.h"
#include "hw/isa.h"
#include "util/strings.h"

namespace kope::eval {

void describe_cpu_device(HardwareGuide& g) {
  auto tc = cpu_toolchain();
  if (!tc) return;
  if (auto t = compiler_target(*tc)) {
    g.isa_extensions = t->isa_extensions;
    g.compiler_tune = t->tune;
  }
}

std::string cpu_identity_line(const HardwareProfile& hw, const HardwareGuide& guide) {
  std::string out;
  if (!hw.cpu_model.empty()) {
    std::string cpu = hw.cpu_model;
    std::vector<std::string> ident;
    if (!guide.microarchitecture.empty()) ident.push_back(guide.microarchitecture + " microarchitecture");
    if (guide.cpu_family > 0) ident.push_back(fmt::format("CPUID family {:#x} model {:#x}", guide.cpu_family, guide.cpu_model));
    if (!ident.empty()) cpu += " (" + util::join(ident, ", ") + ")";
    out += fmt::format("- CPU: {}\n", cpu);
  }
  return out;
}

std::string cpu_memory_lines(const HardwareProfile& hw) {
  std::string out;
  std::vector<std::string> caches;
  auto level = [&](const char* name, uint64_t bytes, const char* scope) {
    if (bytes > 0) caches.push_back(fmt::format("{} {} {}", name, util::human_bytes(static_cast<double>(bytes)), scope));
  };
  level("L1d", hw.l1d_bytes, "per core");
  level("L2", hw.l2_bytes, "per core");
  level("L3", hw.l3_bytes, "shared");
  // A guest often learns no L3 size it could trust (hw.cpp); the bandwidth curve shows instead
  // where a working set leaves the caches.
  if (!caches.empty() && hw.l3_bytes == 0 && !hw.bandwidth.empty()) {
    caches.push_back("L3 size not known here (the triad bandwidth by working set below shows where a working set leaves the caches)");
  }
  if (!caches.empty()) out += "- caches: " + util::join(caches, ", ") + "\n";
  if (hw.peak_gflops > 0) {
    bool measured_core = hw.peak_gflops_core > 0;
    double core = measured_core ? hw.peak_gflops_core : hw.peak_gflops / std::max(1, hw.cores);
    out += fmt::format("- FP32 FMA throughput: {:.0f} GFLOP/s per core ({}), {:.0f} GFLOP/s on all {} cores (measured; an "
                       "FMA counts as 2 flops)\n",
                       core, measured_core ? "measured on one core" : "all-core figure / cores", hw.peak_gflops, hw.cores);
  }
  if (hw.peak_gbps > 0) {
    out += fmt::format("- DRAM bandwidth: {:.1f} GB/s, measured with the STREAM triad a[i] = b[i] + s*c[i] on all cores running "
                       "together and counted as 24 bytes per element (reads of b and c, write of a): the better of a triad with "
                       "plain stores, whose write-allocate read of a is not counted (the bytes the memory moves are up to 4/3 of "
                       "this), and one with non-temporal (streaming) stores, which skip that read\n",
                       hw.peak_gbps);
  }
  if (hw.peak_gflops_f64 > 0) {
    out += fmt::format("- FP64 FMA throughput: {:.0f} GFLOP/s on all cores ({:.0f} per core; measured)\n", hw.peak_gflops_f64,
                       hw.peak_gflops_f64_core);
  }
  if (hw.peak_giops > 0) {
    std::string core = hw.peak_giops_core > 0 ? fmt::format(", {:.0f} per core", hw.peak_giops_core) : "";
    out += fmt::format("- int8 multiply-add throughput: {:.0f} GOP/s on all cores{} (measured with u8 x s8 multiply-adds, "
                       "each counted as 2 ops): the compute roof of ops whose work is on integer data\n",
                       hw.peak_giops, core);
  }
  if (!hw.bandwidth.empty()) {
    std::vector<std::string> pts;
    for (const auto& p : hw.bandwidth) pts.push_back(fmt::format("{} {:.0f} GB/s", util::human_bytes(static_cast<double>(p.working_set_bytes)), p.gbps));
    out += "- triad bandwidth by working set (same counting): " + util::join(pts, ", ") + "\n";
    std::string llc = hw.l3_bytes > 0 && hw.peak_gbps > 0
                          ? fmt::format("; a working set larger than the L3 ({}) streams from DRAM and gets the DRAM figure, {:.1f} GB/s",
                                        util::human_bytes(static_cast<double>(hw.l3_bytes)), hw.peak_gbps)
                          : std::string();
    out += "- roofline of a case: max(flops / the peak of its dtype (the integer peak when its integer inputs outweigh its float "
           "ones), bytes / the bandwidth at a working set of 2 x `bytes`: timing alternates two data sets, so a call finds "
           "its data in a cache only when both fit); the "
           "bandwidth is read from the table above, interpolated linearly in log2(working set) between its two nearest points "
           "(so a figure between rows appears in no row)" + llc + "\n";
  }
  return out;
}

std::string cpu_device_section(const HardwareProfile& hw, const HardwareGuide& guide) {
  std::vector<std::string> isa = guide.isa_extensions;
  if (isa.empty()) isa = hw.target.features;
  // Below the host's ISA ($KOPE_ISA, like the guide's extensions) the flags name the level, not
  // this CPU: the note on how -march=native picks a CPU does not apply.
  IsaLevel level = isa_level_from_env().value_or(IsaLevel::native);
  std::string why = hw::compiler_tune_note(guide.compiler_tune, guide.microarchitecture);
  std::string tune;
  if (!guide.compiler_tune.empty() && level == IsaLevel::native) {
    tune = fmt::format(" ({})", why.empty() ? "the compiler targets " + guide.compiler_tune : why);
  } else if (!guide.compiler_tune.empty()) {
    // -mtune=native below the level: the scheduling model is the nearest CPU the compiler knows.
    tune = fmt::format(" (-mtune=native schedules for {}{})", guide.compiler_tune,
                       why.empty() ? "" : fmt::format(", the nearest CPU this compiler knows to this {}", guide.microarchitecture));
  }
  std::string out;
  if (level != IsaLevel::native) {
    out += fmt::format("- ISA level: {0}: kernels are compiled for any {0} CPU ({1}), not for this CPU's own ISA; the code "
                       "must run on every {0} CPU, so only the extensions below are available\n",
                       isa_level_name(level), util::join(isa_level_flags(level), " "));
  }
  out += fmt::format("- ISA extensions the compile flags enable{}: {}; intrinsics for these, and only these, may be used\n",
                     tune, isa.empty() ? "none beyond the base ISA" : util::join(isa, ", "));
  out += fmt::format("- cores available to the kernel: {0} (OpenMP uses all of them: OMP_NUM_THREADS={0}, threads not pinned "
                     "to CPUs)\n",
                     hw.cores);
  return cpu_identity_line(hw, guide) + out + cpu_memory_lines(hw);
}

}  // namespace kope::eval
