#include "hw/cpu_id.h"

#include <algorithm>
#include <array>
#include <utility>
#include <cstring>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

namespace kope::hw {

CpuIdentity cpu_identity() {
  CpuIdentity id;
#if defined(__x86_64__) || defined(__i386__)
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (!__get_cpuid(0, &eax, &ebx, &ecx, &edx)) return id;
  std::array<char, 13> vendor{};
  std::memcpy(vendor.data(), &ebx, 4);
  std::memcpy(vendor.data() + 4, &edx, 4);
  std::memcpy(vendor.data() + 8, &ecx, 4);
  id.vendor = vendor.data();
  if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx)) return id;
  int base_family = static_cast<int>((eax >> 8) & 0xF);
  int base_model = static_cast<int>((eax >> 4) & 0xF);
  int ext_family = static_cast<int>((eax >> 20) & 0xFF);
  int ext_model = static_cast<int>((eax >> 16) & 0xF);
  id.family = base_family == 0xF ? base_family + ext_family : base_family;
  id.model = (base_family == 0x6 || base_family == 0xF) ? (ext_model << 4) | base_model : base_model;
  id.stepping = static_cast<int>(eax & 0xF);
#endif
  return id;
}

namespace {

bool in(int v, int lo, int hi) { return v >= lo && v <= hi; }

std::string amd(int family, int model) {
  switch (family) {
    case 0x17:
      if (in(model, 0x00, 0x2F)) return "Zen or Zen+";
      if (in(model, 0x30, 0xAF)) return "Zen 2";
      return "";
    case 0x19:
      if (in(model, 0x00, 0x0F) || in(model, 0x20, 0x5F)) return "Zen 3";
      if (in(model, 0x10, 0x1F) || in(model, 0x60, 0xAF)) return "Zen 4";
      return "";
    case 0x1A:
      return in(model, 0x00, 0x7F) ? "Zen 5" : "";
    default:
      return "";
  }
}

std::string intel(int family, int model) {
  if (family != 6) return "";
  switch (model) {
    case 0x55: return "Skylake-SP / Cascade Lake";
    case 0x4E: case 0x5E: return "Skylake";
    case 0x8E: case 0x9E: return "Kaby Lake / Coffee Lake";
    case 0x66: return "Cannon Lake";
    case 0x6A: case 0x6C: return "Ice Lake-SP";
    case 0x7D: case 0x7E: return "Ice Lake";
    case 0x8C: case 0x8D: return "Tiger Lake";
    case 0xA7: return "Rocket Lake";
    case 0x97: case 0x9A: return "Alder Lake";
    case 0xB7: case 0xBA: case 0xBF: return "Raptor Lake";
    case 0xAA: case 0xAC: return "Meteor Lake";
    case 0xC5: case 0xC6: return "Arrow Lake";
    case 0xBD: return "Lunar Lake";
    case 0x8F: return "Sapphire Rapids";
    case 0xCF: return "Emerald Rapids";
    case 0xAD: case 0xAE: return "Granite Rapids";
    case 0xAF: return "Sierra Forest";
    case 0x3F: return "Haswell-EP";
    case 0x3C: case 0x45: case 0x46: return "Haswell";
    case 0x4F: case 0x56: return "Broadwell-EP";
    case 0x3D: case 0x47: return "Broadwell";
    default: return "";
  }
}

}  // namespace

std::string microarchitecture(const CpuIdentity& id) {
  if (id.vendor == "AuthenticAMD") return amd(id.family, id.model);
  if (id.vendor == "GenuineIntel") return intel(id.family, id.model);
  return "";
}

std::vector<std::string> gcc_cpu_names(std::string_view uarch) {
  static const std::pair<std::string_view, std::vector<std::string>> k_names[] = {
      {"Zen or Zen+", {"znver1"}},
      {"Zen 2", {"znver2"}},
      {"Zen 3", {"znver3"}},
      {"Zen 4", {"znver4"}},
      {"Zen 5", {"znver5"}},
      {"Skylake-SP / Cascade Lake", {"skylake-avx512", "cascadelake"}},
      {"Skylake", {"skylake"}},
      {"Kaby Lake / Coffee Lake", {"skylake"}},
      {"Cannon Lake", {"cannonlake"}},
      {"Ice Lake-SP", {"icelake-server"}},
      {"Ice Lake", {"icelake-client"}},
      {"Tiger Lake", {"tigerlake"}},
      {"Rocket Lake", {"rocketlake"}},
      {"Alder Lake", {"alderlake"}},
      {"Raptor Lake", {"raptorlake", "alderlake"}},
      {"Meteor Lake", {"meteorlake"}},
      {"Arrow Lake", {"arrowlake"}},
      {"Lunar Lake", {"lunarlake"}},
      {"Sapphire Rapids", {"sapphirerapids"}},
      {"Emerald Rapids", {"emeraldrapids", "sapphirerapids"}},
      {"Granite Rapids", {"graniterapids"}},
      {"Sierra Forest", {"sierraforest"}},
      {"Haswell-EP", {"haswell"}},
      {"Haswell", {"haswell"}},
      {"Broadwell-EP", {"broadwell"}},
      {"Broadwell", {"broadwell"}},
  };
  for (const auto& [name, gcc] : k_names) {
    if (name == uarch) return gcc;
  }
  return {};
}

std::string compiler_tune_note(std::string_view tune, std::string_view uarch) {
  std::vector<std::string> names = gcc_cpu_names(uarch);
  if (tune.empty() || names.empty() || std::find(names.begin(), names.end(), tune) != names.end()) return "";
  std::string own = names.front();
  return "the compiler targets " + std::string(tune) + ", not " + std::string(uarch) + ": this compiler knows no " + own +
         ", so -march=native names the nearest CPU it knows and enables each ISA extension this CPU reports one by one; the "
         "code is tuned for " + std::string(tune) + " and may use every extension listed here";
}

}  // namespace kope::hw
