// hw/cpu_id.h — which processor this is: vendor, family and model from CPUID, and the
// microarchitecture they name.
//
// The hardware guide of a prompt shows the microarchitecture ("Zen 5") because the model
// string alone ("AMD EPYC") does not say which units and widths the cores have. Pure functions
// over the CPUID fields, plus one read of this machine's; thread-safe.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace kope::hw {

struct CpuIdentity {
  std::string vendor;  // "AuthenticAMD", "GenuineIntel", ... ("" when not x86 or unknown)
  int family = 0;      // display family (base family + extended family when the base is 0xF)
  int model = 0;       // display model (extended model folded in for families 6 and 0xF)
  int stepping = 0;
};

// This machine's identity from the CPUID instruction (empty vendor on other architectures).
CpuIdentity cpu_identity();

// "Zen 5", "Zen 4", "Sapphire Rapids", ... or "" when the family/model pair is not one this
// table knows (a guess would mislead more than silence).
std::string microarchitecture(const CpuIdentity& id);

// The names GCC's -march/-mtune use for a microarchitecture as microarchitecture() names it
// ("Zen 4": znver4; "Kaby Lake / Coffee Lake": skylake, which GCC uses for them), empty when the
// table does not know it. A compiler older than the CPU tunes for another name: with
// -march=native it names the newest CPU of the family it knows (GCC 12 on Zen 4: znver3) and adds
// the ISA extensions the CPU reports one by one.
std::vector<std::string> gcc_cpu_names(std::string_view microarchitecture);
// Why the compiler's tuning target `tune` ("znver3") differs from `microarchitecture` ("Zen 4"),
// as a sentence for the prompt; "" when it does not differ, or either is unknown.
std::string compiler_tune_note(std::string_view tune, std::string_view microarchitecture);

}  // namespace kope::hw
