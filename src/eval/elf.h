// eval/elf.h — a small, bounds-checked reader for ELF64 objects and shared libraries.
//
// Reads what the inspection needs: section headers, the static symbol table of relocatable
// objects (.symtab) and the dynamic symbol table of shared libraries (.dynsym). The input is
// hostile (an object built from a candidate's source, which can steer its contents with inline
// assembly), so every offset is checked and a malformed file is an error, never a crash.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "kope/error.h"

namespace kope::eval::elf {

struct Section {
  std::string name;
  uint32_t type = 0;   // SHT_*
  uint64_t flags = 0;  // SHF_*
  uint64_t size = 0;
};

struct Symbol {
  std::string name;
  uint8_t bind = 0;  // STB_LOCAL, STB_GLOBAL, STB_WEAK, STB_GNU_UNIQUE
  uint8_t type = 0;  // STT_*
  uint8_t visibility = 0;
  bool defined = false;  // st_shndx != SHN_UNDEF
  uint32_t section = 0;  // st_shndx: index into File::sections when below SHN_LORESERVE
  uint64_t size = 0;     // st_size
};

struct File {
  uint16_t type = 0;     // ET_REL, ET_DYN, ...
  uint16_t machine = 0;  // EM_X86_64, ...
  std::vector<Section> sections;
  std::vector<Symbol> symbols;  // .symtab for ET_REL, .dynsym otherwise
};

// Parses an ELF64 little-endian file held in memory. Fails with corrupt naming what is wrong.
Result<File> parse(std::string_view bytes);

// Reads and parses a file.
Result<File> read(const std::filesystem::path& path);

// The global and weak symbols a shared library defines (its exported names).
Result<std::vector<std::string>> exported_names(const std::filesystem::path& shared_library);

// The symbols defined by the members of an `ar` archive (from its symbol index), e.g. libgcc.a.
Result<std::vector<std::string>> archive_symbols(const std::filesystem::path& archive);

}  // namespace kope::eval::elf
