// hw/cpu_id.h — which processor this is: vendor, family and model from CPUID, and the
// microarchitecture they name.
//
// The hardware guide of a prompt shows the microarchitecture ("Zen 5") because the model
// string alone ("AMD EPYC") does not say which units and widths the cores have. Pure functions
// over the CPUID fields, plus one read of this machine's; thread-safe.
#pragma once

#include <string>

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

}  // namespace kope::hw
