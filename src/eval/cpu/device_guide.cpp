// The CPU backend's facts for the prompt's hardware section.
#include "eval/cpu/cpu.h"
#include "eval/native.h"
#include "hw/cpu_id.h"
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

std::string cpu_device_section(const HardwareProfile& hw, const HardwareGuide& guide) {
  std::vector<std::string> isa = guide.isa_extensions;
  if (isa.empty()) isa = hw.target.features;
  std::string why = hw::compiler_tune_note(guide.compiler_tune, guide.microarchitecture);
  std::string tune = guide.compiler_tune.empty() ? "" : fmt::format(" ({})", why.empty() ? "the compiler targets " + guide.compiler_tune : why);
  std::string out;
  out += fmt::format("- ISA extensions the compile flags enable{}: {}; intrinsics for these, and only these, may be used\n",
                     tune, isa.empty() ? "none beyond the base ISA" : util::join(isa, ", "));
  out += fmt::format("- cores available to the kernel: {} (OpenMP uses all of them)\n", hw.cores);
  return out;
}

}  // namespace kope::eval
