// `kope hw`: the hardware profile (target, cores, caches, measured peaks).
#include <cstdlib>

#include <nlohmann/json.hpp>

#include "cli.h"
#include "cli_json.h"
#include "hw/isa.h"
#include "isa_option.h"
#include "kope/eval.h"
#include "kope/hw.h"
#include "util/fs.h"
#include "util/strings.h"

namespace kope::cli {

std::string backends_text(const std::vector<eval::BackendInfo>& list);  // cmd_backends.cpp

void add_isa_option(CLI::App* cmd, std::string& isa) {
  cmd->add_option("--isa", isa,
                  "ISA level candidates are compiled for: native (this CPU's own ISA), or x86-64-v3 (AVX2, FMA) / "
                  "x86-64-v4 (AVX-512) below it; also names the target memory records")
      ->default_str("native")
      ->check(CLI::IsMember(isa_level_names()));
}

Status apply_isa(const std::string& isa) {
  std::string name = isa.empty() ? util::get_env("KOPE_ISA").value_or("native") : isa;
  KOPE_ASSIGN(IsaLevel level, parse_isa_level(name));
  KOPE_TRY(target_at_level(host_cpu_target(), level));
  if (::setenv("KOPE_ISA", std::string(isa_level_name(level)).c_str(), 1) != 0) {
    return fail(ErrorKind::internal, "cannot set $KOPE_ISA");
  }
  return {};
}

Result<nlohmann::json> hardware_json(bool refresh) {
  KOPE_ASSIGN(HardwareProfile p, load_hardware_profile(refresh));
  // The profile's own fields, plus what each kernel backend finds here.
  auto j = nlohmann::json::parse(p.to_json());
  j["backends"] = nlohmann::json::array();
  for (const auto& b : eval::list_backends(p)) {
    j["backends"].push_back({{"name", b.name}, {"target", b.target}, {"usable", b.usable}, {"can_compile", b.can_compile},
                             {"toolchain", b.toolchain}, {"detail", b.detail}});
  }
  return j;
}

void register_hw(CLI::App& app, Action& action) {
  auto* hw = app.add_subcommand("hw", "Show the hardware profile and measured roofline (cached)");
  struct Options {
    bool json = false;
    bool refresh = false;
    std::string isa;
  };
  auto o = std::make_shared<Options>();
  hw->add_flag("--json", o->json, "Print JSON");
  hw->add_flag("--refresh", o->refresh, "Measure again instead of using the cached profile");
  add_isa_option(hw, o->isa);
  hw->callback([&action, o] {
    action = [o]() -> Result<int> {
      KOPE_TRY(apply_isa(o->isa));
      if (o->json) {
        KOPE_ASSIGN(nlohmann::json j, hardware_json(o->refresh));
        print(j.dump(2) + "\n");
        return 0;
      }
      KOPE_ASSIGN(HardwareProfile p, load_hardware_profile(o->refresh));
      auto backends = eval::list_backends(p);
      std::string out;
      out += fmt::format("target       {}\n", p.target.str());
      out += fmt::format("cpu          {}\n", p.cpu_model);
      out += fmt::format("cores        {}\n", p.cores);
      // 0: not readable here (no /sys/.../cache; the L3 is never taken from CPUID, see describe_host).
      auto cache = [](uint64_t b) { return b > 0 ? util::human_bytes(static_cast<double>(b)) : std::string("unknown"); };
      out += fmt::format("caches       L1d {}  L2 {}  L3 {}\n", cache(p.l1d_bytes), cache(p.l2_bytes), cache(p.l3_bytes));
      out += fmt::format("memory       {}\n", util::human_bytes(static_cast<double>(p.memory_bytes)));
      out += fmt::format("peak fp32    {:.1f} GFLOP/s ({:.1f} per core)\n", p.peak_gflops, p.peak_gflops_core);
      out += fmt::format("peak fp64    {:.1f} GFLOP/s ({:.1f} per core)\n", p.peak_gflops_f64, p.peak_gflops_f64_core);
      if (p.peak_giops > 0) {
        out += fmt::format("peak integer {:.1f} GOP/s ({:.1f} per core; int8 multiply-add)\n", p.peak_giops, p.peak_giops_core);
      }
      out += fmt::format("peak dram    {:.1f} GB/s (triad)\n", p.peak_gbps);
      for (const auto& pt : p.bandwidth) {
        out += fmt::format("  bandwidth  {:>10} working set: {:.1f} GB/s\n", util::human_bytes(static_cast<double>(pt.working_set_bytes)), pt.gbps);
      }
      out += "roofline     max(flops / the dtype's peak, bytes / the bandwidth at a working set of 2 x `bytes` (the two data "
             "sets timing alternates), log-interpolated on the curve above)\n";
      out += fmt::format("compiler     {}\n", p.compiler);
      out += fmt::format("measured     {}\n", p.measured_at);
      out += "\nkernel backends (kope backends):\n" + backends_text(backends);
      print(out);
      return 0;
    };
  });
}

}  // namespace kope::cli
