#include "memory/json_io.h"

namespace kope::memory {

using nlohmann::json;

namespace {
json opt_json(const std::optional<double>& v) { return v ? json(*v) : json(nullptr); }
}  // namespace

std::string_view item_kind_name(RetrievedItem::Kind k) {
  switch (k) {
    case RetrievedItem::Kind::case_summary: return "case_summary";
    case RetrievedItem::Kind::lesson: return "lesson";
    case RetrievedItem::Kind::best_kernel: return "best_kernel";
  }
  return "case_summary";
}

json case_json(const CaseRecord& c, bool with_code, const std::string& parent_key) {
  json timings = json::array();
  for (const auto& t : c.timings) {
    timings.push_back({{"case_index", t.case_index}, {"median_us", t.median_us}, {"ci95_us", t.ci95_us},
                       {"reference_us", t.reference_us}, {"library_us", opt_json(t.library_us)},
                       {"disturbed", t.disturbed}, {"contention", t.contention},
                       {"floor_us", opt_json(t.floor_us)}});
  }
  json j{
      {"id", c.id},
      {"natural_key", c.natural_key},
      {"run_id", c.run_id},
      {"origin", c.origin},
      {"foreign_origin", c.foreign_origin},
      {"task",
       {{"op", c.task.op}, {"spec_hash", c.task.spec_hash}, {"category", c.task.category}, {"level", c.task.level},
        {"signature", c.task.signature}, {"timed_dims", c.task.timed_dims},
        {"arithmetic_intensity", c.task.arithmetic_intensity}, {"log2_flops", c.task.log2_flops},
        {"log2_bytes", c.task.log2_bytes}}},
      {"hardware",
       {{"target", c.hardware.target}, {"cpu_model", c.hardware.cpu_model}, {"cores", c.hardware.cores},
        {"peak_gflops", c.hardware.peak_gflops}, {"peak_gbps", c.hardware.peak_gbps}}},
      {"toolchain", {{"id", c.toolchain.id}, {"backend", c.toolchain.backend}}},
      {"parent_id", c.parent_id ? json(*c.parent_id) : json(nullptr)},
      {"stage", stage_name(c.stage)},
      {"optimisation", c.optimisation},
      {"code_hash", c.code_hash},
      {"verdict", std::string(eval::verdict_name(c.verdict))},
      {"message", c.message},
      {"diagnostics", c.diagnostics},
      {"error_signature", c.error_signature},
      {"timings", timings},
      {"speedup_vs_parent", opt_json(c.speedup_vs_parent)},
      {"speedup_vs_reference", opt_json(c.speedup_vs_reference)},
      {"speedup_vs_library", opt_json(c.speedup_vs_library)},
      {"fraction_of_roofline", opt_json(c.fraction_of_roofline)},
      {"ratio", c.ratio},
      {"outcome", outcome_name(c.outcome)},
      {"downstream", c.downstream},
      {"quarantined", c.quarantined},
      {"quarantine_status", std::string(quarantine_status_name(c.quarantine_status))},
      {"quarantine_reason", c.quarantine_reason},
      {"tokens_prompt", c.tokens_prompt},
      {"tokens_completion", c.tokens_completion},
      {"wall_seconds", c.wall_seconds},
      {"journal", c.journal},
      {"created_at", c.created_at},
  };
  if (c.task.signature_shape) j["task"]["signature_shape"] = c.task.signature_shape->str();
  if (!parent_key.empty()) j["parent_key"] = parent_key;
  if (with_code) j["code"] = c.code;
  return j;
}

json lesson_json(const Lesson& l) {
  json value = json::object();
  for (const auto& [k, v] : l.value) value[k] = v;
  return {{"id", l.id},
          {"kind", lesson_kind_name(l.kind)},
          {"title", l.title},
          {"text", l.text},
          {"error_signature", l.error_signature},
          {"scope", {{"category", l.scope.category}, {"backend", l.scope.backend}, {"target", l.scope.target},
                     {"toolchain", l.scope.toolchain}}},
          {"helpful", l.helpful},
          {"harmful", l.harmful},
          {"value", value},
          {"status", lesson_status_name(l.status)},
          {"merged_into", l.merged_into},
          {"source_cases", l.source_cases},
          {"origin", l.origin},
          {"foreign_origin", l.foreign_origin},
          {"valid_from", l.valid_from},
          {"valid_to", l.valid_to}};
}

json lesson_log_json(const LessonLogEntry& e) {
  json payload = json::parse(e.payload, nullptr, false);
  return {{"seq", e.seq},
          {"lesson_id", e.lesson_id},
          {"op", e.op},
          {"reason", e.reason},
          {"source_case", e.source_case ? json(*e.source_case) : json(nullptr)},
          {"payload", payload.is_discarded() ? json(e.payload) : payload},
          {"helpful_after", e.helpful_after},
          {"harmful_after", e.harmful_after},
          {"status_after", e.status_after},
          {"created_at", e.created_at}};
}

json import_record_json(const ImportRecord& r) {
  json j{{"id", r.id},
         {"origin", r.origin},
         {"source", r.source},
         {"foreign", r.foreign},
         {"cases_added", r.cases_added},
         {"lessons_added", r.lessons_added},
         {"imported_at", r.imported_at},
         {"provenance", nullptr}};
  if (!r.provenance.empty()) {
    json p = json::parse(r.provenance, nullptr, false);
    if (!p.is_discarded()) j["provenance"] = std::move(p);
  }
  return j;
}

json stats_json(const Stats& s) {
  json imports = json::array();
  for (const auto& r : s.imports) imports.push_back(import_record_json(r));
  return {{"tasks", s.tasks},
          {"cases", s.cases},
          {"lessons", s.lessons},
          {"targets", s.targets},
          {"bytes", s.bytes},
          {"toolchains", s.toolchains},
          {"runs", s.runs},
          {"quarantined", s.quarantined},
          {"foreign_cases", s.foreign_cases},
          {"lessons_active", s.lessons_active},
          {"lesson_deltas", s.lesson_deltas},
          {"prompts", s.prompts},
          {"prompts_credited", s.prompts_credited},
          {"code_blobs", s.code_blobs},
          {"code_bytes_raw", s.code_bytes_raw},
          {"code_bytes_stored", s.code_bytes_stored},
          {"schema_version", s.schema_version},
          {"instance", s.instance},
          {"by_verdict", s.by_verdict},
          {"by_outcome", s.by_outcome},
          {"by_stage", s.by_stage},
          {"lessons_by_status", s.lessons_by_status},
          {"imports", std::move(imports)}};
}

json lineage_json(const LineageNode& n) {
  return {{"id", n.id},
          {"parent_id", n.parent_id ? json(*n.parent_id) : json(nullptr)},
          {"depth", n.depth},
          {"target", n.target},
          {"run_id", n.run_id},
          {"stage", stage_name(n.stage)},
          {"verdict", std::string(eval::verdict_name(n.verdict))},
          {"outcome", outcome_name(n.outcome)},
          {"ratio", n.ratio},
          {"speedup_vs_reference", opt_json(n.speedup_vs_reference)},
          {"downstream", n.downstream},
          {"optimisation", n.optimisation},
          {"quarantine_status", std::string(quarantine_status_name(n.quarantine_status))}};
}

json import_report_json(const ImportReport& r) {
  return {{"origin", r.origin},
          {"cases_added", r.cases_added},
          {"cases_skipped", r.cases_skipped},
          {"cases_renamed", r.cases_renamed},
          {"lessons_added", r.lessons_added},
          {"lessons_merged", r.lessons_merged},
          {"lessons_skipped", r.lessons_skipped},
          {"provenance", r.provenance.empty() ? json(nullptr) : json::parse(r.provenance, nullptr, false)}};
}

json check_report_json(const CheckReport& r) {
  return {{"ok", r.ok()},
          {"problems", r.problems},
          {"cases_checked", r.cases_checked},
          {"blobs_checked", r.blobs_checked},
          {"lessons_checked", r.lessons_checked}};
}

}  // namespace kope::memory
