#include <sys/utsname.h>

#include <algorithm>
#include <fstream>
#include <set>
#include <sstream>

#include "kope/target.h"
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

Target Target::host() {
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
