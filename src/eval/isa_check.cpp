#include "eval/isa_check.h"

#include <algorithm>
#include <regex>

#include <fmt/format.h>

#include "eval/inspect.h"
#include "util/strings.h"

namespace kope::eval {

namespace {

// The extensions above both levels, by mnemonic (matched whole, as objdump spells it in AT&T
// syntax). x86-64-v4 is AVX-512 F, BW, CD, DQ and VL; gcc at -march=x86-64-v4 emits none of
// these, and none is in x86-64-v3. The patterns are POSIX extended expressions: the same text
// is the build script's grep filter and the classifier below.
struct Extension {
  const char* name;
  const char* mnemonics;
};

const std::vector<Extension>& extensions_above_v4() {
  static const std::vector<Extension> k = {
      // AVX-VNNI (VEX), AVX512-VNNI, AVX-VNNI-INT8/INT16, AVX512-4VNNIW.
      {"VNNI", "vpdp[a-z0-9]+|vp4dpwssds?"},
      // AVX512-IFMA and AVX-IFMA.
      {"IFMA", "vpmadd52[hl]uq"},
      // AVX512-BF16 and AVX-NE-CONVERT.
      {"BF16", "vcvtne2ps2bf16|vcvtneps2bf16|vdpbf16ps|vbcstne[a-z0-9]+|vcvtne[eo][a-z0-9]+"},
      // AVX512-FP16: arithmetic on *ph/*sh, its FMAs, its conversions, vmovw. F16C's vcvtph2ps
      // and vcvtps2ph (in both levels) match none of these.
      {"FP16",
       "v[a-z0-9]*[a-z][ps]h|vf[a-z]+[0-9]+[ps]h|vcvtt[ps]h2[a-z0-9]+|vcvtsh2[a-z0-9]+|vcvtph2(u?dq|u?qq|u?w|pd|psx)|"
       "vcvt(u?dq|u?qq|u?w|pd|sd|ss|u?si)2[ps]h[lq]?|vcvtps2phx|vmovw"},
      // AVX512-VBMI and VBMI2.
      {"VBMI", "vpermb|vperm[it]2b|vpmultishiftqb|vp(compress|expand)[bw]|vpsh[lr]dv?[wdq]"},
      {"VPOPCNTDQ/BITALG", "vpopcnt[bwdq]|vpshufbitqmb"},
      {"VP2INTERSECT", "vp2intersect[dq]"},
      {"AMX", "t(ile|dp|cmm)[a-z0-9]*|(ld|st)tilecfg"},
      // AVX512-ER, -PF, -4FMAPS (Xeon Phi).
      {"Xeon Phi AVX-512", "vexp2p[sd]|vrcp28[a-z]+|vrsqrt28[a-z]+|v4fn?madd[a-z]+|v(gather|scatter)pf[01][a-z]+"},
      {"AES/PCLMUL/GFNI/SHA/SM", "v?aes[a-z0-9]+|v?pclmul[a-z]+|v?gf2p8[a-z0-9]+|v?sha[0-9]+[a-z0-9]*|vsm[34][a-z0-9]+"},
      // AMD's four-operand FMA (FMA3's mnemonics carry an operand order: vfmadd231ps).
      {"FMA4", "vfn?m(add|sub|addsub|subadd)[ps][sd]"},
  };
  return k;
}

// Above x86-64-v3 only (AVX-512 itself): an EVEX prefix (0x62, after at most address-size and
// segment prefixes; in 64-bit mode 0x62 starts nothing else) on a line with raw bytes, and the
// registers only EVEX can name or that hold AVX-512 masks.
constexpr const char* k_evex_bytes = "^ *[0-9a-f]+:[[:space:]]+((26|2e|36|3e|64|65|67) )*62 ";
constexpr const char* k_avx512_registers = "%(zmm[0-9]|[xy]mm(1[6-9]|2[0-9]|3[01])|k[0-7])";
constexpr const char* k_avx512 = "AVX-512";

struct Compiled {
  std::vector<std::pair<std::string, std::regex>> extensions;
  std::regex evex_bytes{k_evex_bytes, std::regex::extended};
  std::regex avx512_registers{k_avx512_registers, std::regex::extended};
};

const Compiled& compiled() {
  static const Compiled k = [] {
    Compiled c;
    for (const auto& e : extensions_above_v4()) c.extensions.emplace_back(e.name, std::regex(e.mnemonics, std::regex::extended));
    return c;
  }();
  return k;
}

// The mnemonic of an instruction: the first word that is no pseudo-prefix ({vex}, {evex}) and
// no prefix objdump prints apart ("lock", "rep", "notrack", "cs", "rex.W", ...).
std::string mnemonic_of(std::string_view insn) {
  static const std::vector<std::string_view> k_prefixes = {"lock", "rep", "repz", "repe", "repnz", "repne", "notrack", "bnd",
                                                           "data16", "data32", "addr16", "addr32", "xacquire", "xrelease",
                                                           "cs", "ds", "es", "fs", "gs", "ss"};
  for (const auto& word : util::split(insn, ' ')) {
    if (word.empty() || word.starts_with("{") || word.starts_with("rex")) continue;
    if (std::find(k_prefixes.begin(), k_prefixes.end(), word) != k_prefixes.end()) continue;
    return word;
  }
  return "";
}

std::string collapse_spaces(std::string_view text) {
  std::string out;
  for (char c : text) {
    if (c == ' ' || c == '\t') {
      if (!out.empty() && out.back() != ' ') out.push_back(' ');
    } else {
      out.push_back(c);
    }
  }
  while (!out.empty() && out.back() == ' ') out.pop_back();
  return out.size() > 80 ? out.substr(0, 77) + "..." : out;
}

void add_unique(std::vector<std::string>& list, const std::string& item) {
  if (std::find(list.begin(), list.end(), item) == list.end()) list.push_back(item);
}

// The first `n` items, then "and N more".
std::string first_few(const std::vector<std::string>& items, size_t n) {
  std::vector<std::string> shown(items.begin(), items.begin() + static_cast<std::ptrdiff_t>(std::min(n, items.size())));
  if (items.size() > n) shown.push_back(fmt::format("and {} more", items.size() - n));
  return util::join(shown, ", ");
}

}  // namespace

std::string isa_disassembly_filter(IsaLevel level) {
  if (level == IsaLevel::native) return "";
  std::vector<std::string> mnemonics;
  for (const auto& e : extensions_above_v4()) mnemonics.push_back(fmt::format("({})", e.mnemonics));
  std::string filter = fmt::format("[[:space:]]({})([[:space:]]|$)", util::join(mnemonics, "|"));
  if (level == IsaLevel::x86_64_v3) filter += fmt::format("|{}|{}", k_evex_bytes, k_avx512_registers);
  return filter;
}

std::string isa_extension_above(std::string_view line, IsaLevel level) {
  if (level == IsaLevel::native || !disassembled_function(line).empty()) return "";
  std::string_view insn = disassembled_instruction(line);
  std::string mnemonic = mnemonic_of(insn);
  if (mnemonic.empty()) return "";
  const Compiled& c = compiled();
  for (const auto& [name, re] : c.extensions) {
    if (std::regex_match(mnemonic, re)) return name;
  }
  if (level == IsaLevel::x86_64_v3) {
    std::string text(line);
    if (std::regex_search(text, c.evex_bytes) || std::regex_search(std::string(insn), c.avx512_registers)) return k_avx512;
  }
  return "";
}

std::vector<IsaViolation> instructions_above_level(std::string_view disassembly, IsaLevel level, size_t limit) {
  std::vector<IsaViolation> out;
  if (level == IsaLevel::native) return out;
  std::string function = "?";
  for (const auto& line : util::split(disassembly, '\n')) {
    if (out.size() >= limit) break;
    if (std::string header = disassembled_function(line); !header.empty()) {
      function = header;
      continue;
    }
    std::string extension = isa_extension_above(line, level);
    if (!extension.empty()) out.push_back({extension, collapse_spaces(disassembled_instruction(line)), function});
  }
  return out;
}

std::string above_level_message(const std::vector<IsaViolation>& found, IsaLevel level, const std::vector<std::string>& flags) {
  std::vector<std::string> extensions, instructions, functions;
  for (const auto& v : found) {
    add_unique(extensions, v.extension);
    add_unique(instructions, v.instruction);
    add_unique(functions, v.function);
  }
  return fmt::format("the compiled kernel's {} instructions ({}) in {} are above the target level {}: #pragma GCC target, "
                     "target attributes and inline asm cannot lift a kernel above the level (kernels are compiled with {}); "
                     "use only the ISA extensions the hardware section lists",
                     util::join(extensions, " and "), first_few(instructions, 3), first_few(functions, 3), isa_level_name(level),
                     util::join(flags, " "));
}

std::string above_level_diagnostics(const std::vector<IsaViolation>& found) {
  std::vector<std::string> lines;
  for (const auto& v : found) lines.push_back(fmt::format("{} in {} ({})", v.instruction, v.function, v.extension));
  return util::join(lines, "\n");
}

}  // namespace kope::eval
