#include "run_end.h"

#include <array>
#include <set>

#include <fmt/format.h>

#include "memory/starter.h"
#include "report/figures.h"
#include "report/html.h"
#include "report/memory_view.h"
#include "report/run_data.h"
#include "report/tables.h"
#include "run/policy.h"
#include "util/fs.h"
#include "util/strings.h"

namespace kope::cli {

namespace {

using nlohmann::json;
namespace fs = std::filesystem;

std::string times(const json& v) { return v.is_number() ? fmt::format("{:.2f}x", v.get<double>()) : std::string("-"); }
std::string percent(const json& v) {
  return v.is_number() ? fmt::format("{:.0f}%", 100 * v.get<double>()) : std::string("-");
}

}  // namespace

Result<fs::path> write_run_report(const fs::path& run_dir, const std::string& memory_path) {
  KOPE_ASSIGN(report::RunData run, report::load_run(run_dir));
  std::vector<report::RunData> runs;
  runs.push_back(std::move(run));
  report::ReportOptions opts;
  KOPE_ASSIGN(report::Analysis an, report::analyse(std::move(runs), opts));
  if (!memory_path.empty() && fs::exists(memory_path)) {
    auto m = report::load_memory_overview(memory_path);
    if (m) an.memory = std::move(*m);  // the memory section is extra; the run's figures are not
  }
  std::vector<report::Table> tables = report::build_tables(an);
  fs::path out = run_dir / "report.html";
  KOPE_TRY(util::write_file_atomic(out, report::render_html(an, tables)));
  return out;
}

std::string kernel_source(const json& op, const json& run_model, memory::Store& store,
                          const std::set<std::string>& starter_origins, const std::string& here) {
  if (!op.value("solved", false)) return "";
  const json& p = op.contains("best_policy") ? op["best_policy"] : json();
  const std::optional<run::Policy> policy = p.is_string() ? run::parse_policy(p.get<std::string>()) : std::nullopt;
  if (policy.value_or(run::Policy::llm) != run::Policy::replay) {
    std::string model = run_model.is_object() ? run_model.value("model", std::string()) : std::string();
    return model.empty() ? std::string("this run's model") : fmt::format("model {} (this run)", model);
  }
  const json& id = op.contains("best_source_case") ? op["best_source_case"] : json();
  if (!id.is_number_integer()) return "replay of memory";
  auto src = store.get_case(id.get<int64_t>());
  if (!src || !*src) return fmt::format("replay of case {}", id.get<int64_t>());
  memory::CaseRecord c = std::move(**src);
  // A replay of a replay: the kernel came from where its first record came from (the chain of
  // parents with the same code).
  for (int hops = 0; hops < 32 && c.parent_id; ++hops) {
    auto parent = store.get_case(*c.parent_id);
    if (!parent || !*parent || (*parent)->code_hash != c.code_hash) break;
    c = std::move(**parent);
  }
  std::string what = c.task.op == op.value("name", std::string()) ? std::string() : c.task.op + "'s kernel, ";
  if (starter_origins.contains(c.origin)) return fmt::format("starter ({}re-verified here)", what);
  if (c.foreign_origin || c.hardware.target != here) {
    return fmt::format("foreign experience ({}{}, re-verified here)", what, c.hardware.target);
  }
  return fmt::format("this machine's memory ({}run {})", what, c.run_id);
}

std::string run_summary_table(const json& results, memory::Database& store, const std::string& here) {
  std::set<std::string> starters;
  if (auto s = memory::starter_origins(store)) starters = std::move(*s);
  const json model = results.contains("model") ? results["model"] : json();
  std::vector<std::string> unsolved;
  std::vector<std::array<std::string, 5>> rows;
  for (const auto& op : results.value("ops", json::array())) {
    std::string name = op.value("name", std::string());
    if (!op.value("solved", false)) {
      unsolved.push_back(name);
      continue;
    }
    rows.push_back({name, times(op.value("best_speedup_vs_reference", json())),
                    times(op.value("best_speedup_vs_library", json())), percent(op.value("fraction_of_roofline", json())),
                    kernel_source(op, model, store, starters, here)});
  }
  size_t w = 8;
  for (const auto& r : rows) w = std::max(w, r[0].size());
  std::string out;
  if (!rows.empty()) {
    out += fmt::format("{:<{}}  {:>8}  {:>8}  {:>7}  {}\n", "operator", w, "vs ref", "vs lib", "roof", "kernel from");
    for (const auto& r : rows) out += fmt::format("{:<{}}  {:>8}  {:>8}  {:>7}  {}\n", r[0], w, r[1], r[2], r[3], r[4]);
  }
  if (!unsolved.empty()) {
    out += fmt::format("unsolved ({}): {}\n", unsolved.size(), util::join(unsolved, ", "));
  }
  return out;
}

}  // namespace kope::cli
