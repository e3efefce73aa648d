// memory/starter.h — export files on disk and the starter experience shipped with kope.
//
// An export file is what `kope memory export` writes: one JSON document, plain or as a zstd
// frame (told apart by its first bytes, not its name). kope ships one as the starter memory
// (share/kope/starter/memory.json.zst, found through util::find_share_file): verified kernels
// with their lineage, journals and lessons, recorded on another machine, with a "provenance"
// object saying which kope, model, target and runs produced it. A user's memory imports it once
// per content (as foreign experience: feasibility, never speed evidence, until a replay re-verifies
// and re-times a kernel here), remembered by a meta row "starter:<sha256 of the file>".
// Functions are thread-compatible (the Store serialises its own writes).
#pragma once

#include <filesystem>
#include <optional>
#include <set>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "kope/memory.h"

namespace kope::memory {

// The bytes of an export file, decompressed when they are a zstd frame; "-" reads stdin.
// Fails with not_found / io naming the file, corrupt when the compressed data is damaged.
Result<std::string> read_export_file(const std::filesystem::path& path);
// Writes an export atomically; compressed with zstd when the name ends in ".zst".
Status write_export_file(const std::filesystem::path& path, std::string_view json_text);

// What an export file holds, without importing it.
struct ExportSummary {
  std::string origin;
  std::string exported_at;
  nlohmann::json provenance;          // null when the export carries none
  int64_t cases = 0;
  int64_t correct_cases = 0;
  int64_t lessons = 0;
  std::set<std::string> ops;          // every op with a case
  std::set<std::string> solved_ops;   // ops with a correct case
  std::set<std::string> targets;
  // The origins its cases were first recorded under: a starter refreshed from a memory that held
  // an earlier starter carries that one's cases under their own origin.
  std::set<std::string> case_origins;
};
// Fails with config, naming `source`, when the text is not a kope memory export.
Result<ExportSummary> summarise_export(std::string_view json_text, std::string_view source);
nlohmann::json export_summary_json(const ExportSummary& s);

// The starter memory shipped with this kope (share/kope/starter/memory.json.zst), if installed.
std::optional<std::filesystem::path> starter_memory_file();

inline constexpr std::string_view k_starter_meta_prefix = "starter:";

struct StarterImport {
  std::filesystem::path file;
  std::string sha256;                 // of the file's bytes as shipped
  bool imported = false;              // false: this content was imported before (nothing done)
  ImportReport report;                // when imported
  ExportSummary summary;
};

// Imports the starter memory in `file` into `store` as foreign experience, once per content: a
// meta row "starter:<sha256>" records the import (file, origin, time) and a second call only
// reads it back. Fails as read_export_file, summarise_export and Store::import_json do.
Result<StarterImport> import_starter(StoreAdmin& store, const std::filesystem::path& file);

// Instance ids (origins) of every starter export this store imported.
Result<std::set<std::string>> starter_origins(StoreAdmin& store);

}  // namespace kope::memory
