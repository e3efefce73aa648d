// memory/json_io.h — JSON forms of memory records, shared by export and `kope memory --json`.
#pragma once

#include <nlohmann/json.hpp>

#include "kope/memory.h"

namespace kope::memory {

// A case; `parent_key` is added when non-empty; code only when `with_code`.
nlohmann::json case_json(const CaseRecord& c, bool with_code, const std::string& parent_key = {});
nlohmann::json lesson_json(const Lesson& l);
nlohmann::json lesson_log_json(const LessonLogEntry& e);
nlohmann::json stats_json(const Stats& s);
nlohmann::json import_record_json(const ImportRecord& r);
nlohmann::json lineage_json(const LineageNode& n);
nlohmann::json import_report_json(const ImportReport& r);
nlohmann::json check_report_json(const CheckReport& r);
std::string_view item_kind_name(RetrievedItem::Kind k);

}  // namespace kope::memory
