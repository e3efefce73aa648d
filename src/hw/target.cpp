#include <sys/utsname.h>

#include <algorithm>
#include <fstream>
#include <set>
#include <sstream>

#include "kope/target.h"

#include "hw/isa.h"
#include "util/fs.h"
#include "util/strings.h"

namespace kope {

namespace {

// Known features in their canonical order; implied ones (avx by avx2) are not repeated.
const std::vector<std::string>& known_features() {
  static const std::vector<std::string> k = {
      "sse41", "avx", "avx2", "fma", "avx512", "avx512vnni", "avx512bf16", "avx512fp16", "amx",
      "neon", "sve", "sve2", "pocl", "cpu", "gpu"};
  return k;
}

bool valid_part(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '.';
  });
}

}  // namespace

Result<Target> Target::parse(std::string_view text) {
  if (text.empty()) return fail(ErrorKind::config, "empty target string (expected e.g. x86_64-avx2-fma)");
  auto parts = util::split(text, '-');
  Target t;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (!valid_part(parts[i])) {
      return fail(ErrorKind::config, "target '{}': part '{}' must be lower-case letters, digits, '_' or '.'", text, parts[i]);
    }
    if (i == 0) {
      t.arch = parts[i];
    } else if (!t.has(parts[i])) {
      t.features.push_back(parts[i]);
    }
  }
  // Canonical order.
  std::string canon = t.str();
  t.features = util::split(canon, '-');
  t.features.erase(t.features.begin());
  return t;
}

std::string Target::str() const {
  const auto& known = known_features();
  std::vector<std::string> ordered, unknown;
  for (const auto& k : known) {
    if (has(k)) ordered.push_back(k);
  }
  for (const auto& f : features) {
    if (std::find(known.begin(), known.end(), f) == known.end()) unknown.push_back(f);
  }
  std::sort(unknown.begin(), unknown.end());
  // Unknown features of device targets (sm90, pocl) keep their given order: they are qualifiers.
  if (family() != "cpu") {
    std::vector<std::string> all;
    for (const auto& f : features) all.push_back(f);
    std::string out = arch;
    for (const auto& f : all) out += "-" + f;
    return out;
  }
  std::string out = arch;
  for (const auto& f : ordered) out += "-" + f;
  for (const auto& f : unknown) out += "-" + f;
  return out;
}

bool Target::has(std::string_view feature) const {
  return std::find(features.begin(), features.end(), feature) != features.end();
}

std::string Target::family() const {
  if (arch == "x86_64" || arch == "aarch64" || arch == "riscv64" || arch == "ppc64le") return "cpu";
  return arch;
}

std::string_view isa_level_name(IsaLevel level) {
  switch (level) {
    case IsaLevel::native: return "native";
    case IsaLevel::x86_64_v3: return "x86-64-v3";
    case IsaLevel::x86_64_v4: return "x86-64-v4";
  }
  return "native";
}

const std::vector<std::string>& isa_level_names() {
  static const std::vector<std::string> k = {"native", "x86-64-v3", "x86-64-v4"};
  return k;
}

Result<IsaLevel> parse_isa_level(std::string_view name) {
  for (IsaLevel l : {IsaLevel::native, IsaLevel::x86_64_v3, IsaLevel::x86_64_v4}) {
    if (name == isa_level_name(l)) return l;
  }
  return fail(ErrorKind::config, "unknown ISA level '{}' (expected {})", name, util::join(isa_level_names(), ", "));
}

Result<IsaLevel> isa_level_from_env() {
  auto v = util::get_env("KOPE_ISA");
  if (!v || v->empty()) return IsaLevel::native;
  auto level = parse_isa_level(*v);
  if (!level) return fail(ErrorKind::config, "$KOPE_ISA: {}", level.error().message);
  return level;
}

std::vector<std::string> isa_level_flags(IsaLevel level) {
  if (level == IsaLevel::native) return {"-march=native"};
  return {"-march=" + std::string(isa_level_name(level)), "-mtune=native"};
}

IsaLevel isa_level_of_flags(const std::vector<std::string>& flags) {
  IsaLevel level = IsaLevel::native;
  for (const auto& f : flags) {
    if (!f.starts_with("-march=")) continue;
    auto named = parse_isa_level(std::string_view(f).substr(7));
    level = named ? *named : IsaLevel::native;
  }
  return level;
}

Result<Target> target_at_level(const Target& cpu, IsaLevel level) {
  if (level == IsaLevel::native) return cpu;
  if (cpu.arch != "x86_64") {
    return fail(ErrorKind::config, "--isa {} needs an x86-64 CPU; this CPU is {}", isa_level_name(level), cpu.str());
  }
  // The features kope's target names for each level (x86-64-v4 is AVX-512 F, BW, CD, DQ and
  // VL: kope's "avx512"); the levels' other instructions (BMI, MOVBE, ...) are not named.
  std::vector<std::string> wanted = {"avx2", "fma"};
  if (level == IsaLevel::x86_64_v4) wanted.push_back("avx512");
  std::vector<std::string> missing;
  for (const auto& f : wanted) {
    if (!cpu.has(f)) missing.push_back(f);
  }
  if (!missing.empty()) {
    return fail(ErrorKind::config, "--isa {}: this CPU ({}) lacks {}, which the level requires; choose a level it has ({})",
                isa_level_name(level), cpu.str(), util::join(missing, ", "),
                level == IsaLevel::x86_64_v4 && cpu.has("avx2") && cpu.has("fma") ? "x86-64-v3 or native" : "native");
  }
  Target t;
  t.arch = cpu.arch;
  t.features = wanted;
  return t;
}

bool target_runs_on(const Target& built_for, const Target& host) {
  if (built_for.arch != host.arch) return false;
  return std::all_of(built_for.features.begin(), built_for.features.end(), [&](const std::string& f) { return host.has(f); });
}

// The target kernels are built for here: the CPU at the level of $KOPE_ISA (hw/isa.h); the CPU
// itself when the variable is unset, invalid or names a level it lacks (the CLI refuses those
// before setting it).
Target Target::host() {
  Target cpu = host_cpu_target();
  auto level = isa_level_from_env();
  if (!level) return cpu;
  auto t = target_at_level(cpu, *level);
  return t ? *t : cpu;
}

Target host_cpu_target() {
  Target t;
  struct utsname u {};
  ::uname(&u);
  t.arch = util::to_lower(u.machine);
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  std::set<std::string> flags;
  while (std::getline(in, line)) {
    if (line.starts_with("flags") || line.starts_with("Features")) {
      auto colon = line.find(':');
      std::istringstream words(line.substr(colon + 1));
      std::string w;
      while (words >> w) flags.insert(w);
      break;
    }
  }
  auto add = [&](const char* feature) { t.features.push_back(feature); };
  if (t.arch == "x86_64") {
    bool avx2 = flags.contains("avx2");
    if (flags.contains("sse4_1") && !flags.contains("avx")) add("sse41");
    if (flags.contains("avx") && !avx2) add("avx");
    if (avx2) add("avx2");
    if (flags.contains("fma")) add("fma");
    bool avx512 = flags.contains("avx512f") && flags.contains("avx512bw") && flags.contains("avx512dq") &&
                  flags.contains("avx512vl") && flags.contains("avx512cd");
    if (avx512) add("avx512");
    if (avx512 && flags.contains("avx512_vnni")) add("avx512vnni");
    if (avx512 && flags.contains("avx512_bf16")) add("avx512bf16");
    if (avx512 && flags.contains("avx512_fp16")) add("avx512fp16");
    if (flags.contains("amx_tile")) add("amx");
  } else if (t.arch == "aarch64") {
    if (flags.contains("asimd")) add("neon");
    if (flags.contains("sve")) add("sve");
    if (flags.contains("sve2")) add("sve2");
  }
  return *Target::parse(t.str());
}

}  // namespace kope
