#include "memory/starter.h"

#include <iostream>
#include <sstream>

#include "memory/codec.h"
#include "memory/text.h"
#include "util/fs.h"
#include "util/hash.h"
#include "util/time.h"

namespace kope::memory {

namespace {

using nlohmann::json;

constexpr std::string_view k_starter_file = "starter/memory.json.zst";

Result<std::string> read_raw(const std::filesystem::path& path) {
  if (path == "-") {
    std::ostringstream ss;
    ss << std::cin.rdbuf();
    return ss.str();
  }
  return util::read_file(path);
}

}  // namespace

Result<std::string> read_export_file(const std::filesystem::path& path) {
  KOPE_ASSIGN(std::string raw, read_raw(path));
  if (!is_zstd_frame(raw)) return raw;
  return zstd_decompress_file(raw, path.string());
}

Status write_export_file(const std::filesystem::path& path, std::string_view json_text) {
  if (path.extension() != ".zst") return util::write_file_atomic(path, json_text);
  KOPE_ASSIGN(std::string frame, zstd_compress_file(json_text));
  return util::write_file_atomic(path, frame);
}

Result<ExportSummary> summarise_export(std::string_view json_text, std::string_view source) {
  json doc = json::parse(json_text, nullptr, false);
  if (doc.is_discarded() || !doc.is_object() || doc.value("format", "") != "kope-memory") {
    return fail(ErrorKind::config, "{}: not a kope memory export (expected the JSON `kope memory export` writes)", source);
  }
  ExportSummary s;
  s.origin = doc.value("origin", "");
  s.exported_at = doc.value("exported_at", "");
  if (auto it = doc.find("provenance"); it != doc.end() && it->is_object()) s.provenance = *it;
  if (auto it = doc.find("cases"); it != doc.end() && it->is_array()) {
    for (const auto& c : *it) {
      if (!c.is_object()) continue;
      ++s.cases;
      if (std::string o = c.value("origin", ""); !o.empty()) s.case_origins.insert(o);
      std::string op;
      if (auto t = c.find("task"); t != c.end() && t->is_object()) op = t->value("op", "");
      if (auto h = c.find("hardware"); h != c.end() && h->is_object()) {
        std::string target = h->value("target", "");
        if (!target.empty()) s.targets.insert(target);
      }
      if (!op.empty()) s.ops.insert(op);
      if (eval::parse_verdict(c.value("verdict", "")) == eval::Verdict::correct) {
        ++s.correct_cases;
        if (!op.empty()) s.solved_ops.insert(op);
      }
    }
  }
  if (auto it = doc.find("lessons"); it != doc.end() && it->is_array()) s.lessons = static_cast<int64_t>(it->size());
  return s;
}

json export_summary_json(const ExportSummary& s) {
  return {{"origin", s.origin},       {"exported_at", s.exported_at}, {"provenance", s.provenance},
          {"cases", s.cases},         {"correct_cases", s.correct_cases}, {"lessons", s.lessons},
          {"ops", s.ops},             {"solved_ops", s.solved_ops},   {"targets", s.targets}};
}

std::optional<std::filesystem::path> starter_memory_file() { return util::find_share_file(k_starter_file); }

Result<StarterImport> import_starter(StoreAdmin& store, const std::filesystem::path& file) {
  StarterImport out;
  out.file = file;
  KOPE_ASSIGN(std::string raw, util::read_file(file));
  out.sha256 = util::sha256_hex(raw);
  std::string text;
  if (is_zstd_frame(raw)) {
    KOPE_ASSIGN(text, zstd_decompress_file(raw, file.string()));
  } else {
    text = std::move(raw);
  }
  KOPE_ASSIGN(out.summary, summarise_export(text, file.string()));
  std::string key = std::string(k_starter_meta_prefix) + out.sha256;
  KOPE_ASSIGN(auto seen, store.get_meta(key));
  if (seen) return out;
  ImportOptions io;
  io.foreign = true;  // recorded on other hardware: feasibility, not speed, until re-timed here
  io.source = "starter " + file.string();
  KOPE_ASSIGN(out.report, store.import_json(text, io));
  json note{{"file", file.string()},
            {"origin", out.report.origin},
            {"case_origins", out.summary.case_origins},
            {"imported_at", util::now_iso8601()},
            {"cases_added", out.report.cases_added},
            {"lessons_added", out.report.lessons_added}};
  // After the import: a crash in between only repeats an idempotent import.
  KOPE_TRY(store.set_meta(key, note.dump()));
  out.imported = true;
  return out;
}

Result<std::set<std::string>> starter_origins(StoreAdmin& store) {
  KOPE_ASSIGN(auto rows, store.meta_with_prefix(std::string(k_starter_meta_prefix)));
  std::set<std::string> out;
  for (const auto& [key, value] : rows) {
    json j = json::parse(value, nullptr, false);
    if (!j.is_object()) continue;
    if (j.contains("origin") && j["origin"].is_string()) out.insert(j["origin"].get<std::string>());
    // Imports before case_origins was recorded name the file's origin only.
    if (auto it = j.find("case_origins"); it != j.end() && it->is_array()) {
      for (const auto& o : *it) {
        if (o.is_string()) out.insert(o.get<std::string>());
      }
    }
  }
  return out;
}

}  // namespace kope::memory
