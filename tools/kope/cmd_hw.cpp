// `kope hw`: the hardware profile (target, cores, caches, measured peaks).
#include <nlohmann/json.hpp>

#include "cli.h"
#include "kope/hw.h"
#include "util/strings.h"

namespace kope::cli {

void register_hw(CLI::App& app, Action& action) {
  auto* hw = app.add_subcommand("hw", "Show the hardware profile and measured roofline (cached)");
  struct Options {
    bool json = false;
    bool refresh = false;
  };
  auto o = std::make_shared<Options>();
  hw->add_flag("--json", o->json, "Print JSON");
  hw->add_flag("--refresh", o->refresh, "Measure again instead of using the cached profile");
  hw->callback([&action, o] {
    action = [o]() -> Result<int> {
      KOPE_ASSIGN(HardwareProfile p, load_hardware_profile(o->refresh));
      if (o->json) {
        print(p.to_json() + "\n");
        return 0;
      }
      std::string out;
      out += fmt::format("target       {}\n", p.target.str());
      out += fmt::format("cpu          {}\n", p.cpu_model);
      out += fmt::format("cores        {}\n", p.cores);
      out += fmt::format("caches       L1d {}  L2 {}  L3 {}\n", util::human_bytes(static_cast<double>(p.l1d_bytes)),
                         util::human_bytes(static_cast<double>(p.l2_bytes)), util::human_bytes(static_cast<double>(p.l3_bytes)));
      out += fmt::format("memory       {}\n", util::human_bytes(static_cast<double>(p.memory_bytes)));
      out += fmt::format("peak fp32    {:.1f} GFLOP/s ({:.1f} per core)\n", p.peak_gflops, p.peak_gflops_core);
      out += fmt::format("peak dram    {:.1f} GB/s (triad)\n", p.peak_gbps);
      for (const auto& pt : p.bandwidth) {
        out += fmt::format("  bandwidth  {:>10} working set: {:.1f} GB/s\n", util::human_bytes(static_cast<double>(pt.working_set_bytes)), pt.gbps);
      }
      out += fmt::format("compiler     {}\n", p.compiler);
      out += fmt::format("measured     {}\n", p.measured_at);
      print(out);
      return 0;
    };
  });
}

}  // namespace kope::cli
