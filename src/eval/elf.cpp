#include "eval/elf.h"

#include <elf.h>

#include <cstring>

#include "util/fs.h"

namespace kope::eval::elf {

namespace {

template <class T>
bool read_at(std::string_view bytes, uint64_t offset, T* out) {
  if (offset > bytes.size() || bytes.size() - offset < sizeof(T)) return false;
  std::memcpy(out, bytes.data() + offset, sizeof(T));
  return true;
}

// A NUL-terminated string inside [table, table + size).
bool string_at(std::string_view bytes, const Elf64_Shdr& table, uint32_t index, std::string* out) {
  if (table.sh_offset > bytes.size() || table.sh_size > bytes.size() - table.sh_offset) return false;
  if (index >= table.sh_size) return false;
  std::string_view t = bytes.substr(table.sh_offset, table.sh_size);
  size_t end = t.find('\0', index);
  if (end == std::string_view::npos) return false;
  *out = std::string(t.substr(index, end - index));
  return true;
}

}  // namespace

Result<File> parse(std::string_view bytes) {
  Elf64_Ehdr eh;
  if (!read_at(bytes, 0, &eh) || std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0) {
    return fail(ErrorKind::corrupt, "not an ELF file");
  }
  if (eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_ident[EI_DATA] != ELFDATA2LSB) {
    return fail(ErrorKind::corrupt, "not a 64-bit little-endian ELF file");
  }
  if (eh.e_shentsize != sizeof(Elf64_Shdr) && eh.e_shnum != 0) return fail(ErrorKind::corrupt, "unexpected section header size {}", eh.e_shentsize);
  File f;
  f.type = eh.e_type;
  f.machine = eh.e_machine;
  uint64_t shnum = eh.e_shnum;
  uint32_t shstrndx = eh.e_shstrndx;
  Elf64_Shdr first{};
  if (eh.e_shoff != 0 && read_at(bytes, eh.e_shoff, &first)) {
    if (shnum == 0) shnum = first.sh_size;  // extended numbering
    if (shstrndx == SHN_XINDEX) shstrndx = first.sh_link;
  }
  if (shnum > 1'000'000) return fail(ErrorKind::corrupt, "{} sections", shnum);
  std::vector<Elf64_Shdr> sh(shnum);
  for (uint64_t i = 0; i < shnum; ++i) {
    if (!read_at(bytes, eh.e_shoff + i * sizeof(Elf64_Shdr), &sh[i])) {
      return fail(ErrorKind::corrupt, "section header {} lies outside the file", i);
    }
  }
  if (shnum > 0 && shstrndx >= shnum) return fail(ErrorKind::corrupt, "bad section name table index");
  for (uint64_t i = 0; i < shnum; ++i) {
    Section s;
    if (!string_at(bytes, sh[shstrndx], sh[i].sh_name, &s.name)) return fail(ErrorKind::corrupt, "section {} has a bad name", i);
    s.type = sh[i].sh_type;
    s.flags = sh[i].sh_flags;
    s.size = sh[i].sh_size;
    f.sections.push_back(std::move(s));
  }
  uint32_t want = f.type == ET_REL ? SHT_SYMTAB : SHT_DYNSYM;
  for (uint64_t i = 0; i < shnum; ++i) {
    if (sh[i].sh_type != want) continue;
    const Elf64_Shdr& st = sh[i];
    if (st.sh_link >= shnum) return fail(ErrorKind::corrupt, "symbol table {} links to no string table", i);
    if (st.sh_entsize != sizeof(Elf64_Sym)) return fail(ErrorKind::corrupt, "symbol table {} has entries of {} bytes", i, st.sh_entsize);
    if (st.sh_offset > bytes.size() || st.sh_size > bytes.size() - st.sh_offset) return fail(ErrorKind::corrupt, "symbol table {} lies outside the file", i);
    uint64_t count = st.sh_size / sizeof(Elf64_Sym);
    for (uint64_t k = 1; k < count; ++k) {
      Elf64_Sym sym;
      read_at(bytes, st.sh_offset + k * sizeof(Elf64_Sym), &sym);
      Symbol s;
      if (!string_at(bytes, sh[st.sh_link], sym.st_name, &s.name)) return fail(ErrorKind::corrupt, "symbol {} has a bad name", k);
      s.bind = ELF64_ST_BIND(sym.st_info);
      s.type = ELF64_ST_TYPE(sym.st_info);
      s.visibility = ELF64_ST_VISIBILITY(sym.st_other);
      s.defined = sym.st_shndx != SHN_UNDEF;
      s.section = sym.st_shndx;
      s.size = sym.st_size;
      f.symbols.push_back(std::move(s));
    }
  }
  return f;
}

Result<File> read(const std::filesystem::path& path) {
  KOPE_ASSIGN(std::string bytes, util::read_file(path));
  auto f = parse(bytes);
  if (!f) return fail(f.error().kind, "{}: {}", path.string(), f.error().message);
  return f;
}

Result<std::vector<std::string>> exported_names(const std::filesystem::path& shared_library) {
  KOPE_ASSIGN(File f, read(shared_library));
  std::vector<std::string> out;
  for (const auto& s : f.symbols) {
    if (s.defined && (s.bind == STB_GLOBAL || s.bind == STB_WEAK || s.bind == STB_GNU_UNIQUE)) out.push_back(s.name);
  }
  return out;
}

Result<std::vector<std::string>> archive_symbols(const std::filesystem::path& archive) {
  auto bytes = util::read_file(archive);
  if (!bytes) return std::unexpected(bytes.error());
  std::string_view b = *bytes;
  if (!b.starts_with("!<arch>\n")) return fail(ErrorKind::corrupt, "{}: not an ar archive", archive.string());
  // The first member "/" is the System V symbol index: a big-endian count, offsets, then names.
  constexpr size_t k_header = 60;
  if (b.size() < 8 + k_header) return fail(ErrorKind::corrupt, "{}: truncated", archive.string());
  std::string_view name = b.substr(8, 16);
  if (!name.starts_with("/ ")) return fail(ErrorKind::corrupt, "{}: no symbol index", archive.string());
  size_t size = std::strtoull(std::string(b.substr(8 + 48, 10)).c_str(), nullptr, 10);
  size_t start = 8 + k_header;
  if (size > b.size() - start || size < 4) return fail(ErrorKind::corrupt, "{}: bad symbol index", archive.string());
  std::string_view idx = b.substr(start, size);
  auto u = [&](size_t o) {
    return (static_cast<uint32_t>(static_cast<uint8_t>(idx[o])) << 24) | (static_cast<uint32_t>(static_cast<uint8_t>(idx[o + 1])) << 16) |
           (static_cast<uint32_t>(static_cast<uint8_t>(idx[o + 2])) << 8) | static_cast<uint32_t>(static_cast<uint8_t>(idx[o + 3]));
  };
  uint32_t count = u(0);
  size_t names = 4 + static_cast<size_t>(count) * 4;
  if (names > idx.size()) return fail(ErrorKind::corrupt, "{}: bad symbol count", archive.string());
  std::vector<std::string> out;
  size_t pos = names;
  for (uint32_t i = 0; i < count && pos < idx.size(); ++i) {
    size_t end = idx.find('\0', pos);
    if (end == std::string_view::npos) break;
    out.emplace_back(idx.substr(pos, end - pos));
    pos = end + 1;
  }
  return out;
}

}  // namespace kope::eval::elf
