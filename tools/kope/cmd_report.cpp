// `kope report`: figures, comparisons and the lineage view of one or more run directories
// (docs/design.md §6).
//
//   kope report RUN_DIR... [--html FILE] [--markdown | --json | --csv TABLE] [--memory PATH]
//               [--ops SET] [--suite DIR] [--labels A,B,..] [--baseline LABEL]
//               [--resamples N] [--seed N] [--width N]
//
// stdout gets the report as console tables (default), markdown, JSON or one table as CSV. With
// --html alone, stdout gets one line naming the file written. Reading a run never changes it.
#include <cstdio>
#include <nlohmann/json.hpp>

#include "cli.h"
#include "report/figures.h"
#include "report/html.h"
#include "report/memory_view.h"
#include "report/tables.h"
#include "util/fs.h"
#include "util/strings.h"

namespace kope::cli {

namespace {

namespace fs = std::filesystem;

struct ReportCliOptions {
  std::vector<std::string> runs;
  std::string html;
  bool markdown = false;
  bool json_out = false;
  std::string csv;
  std::string memory;
  std::vector<std::string> ops;
  std::string suite;
  std::vector<std::string> labels;
  std::string baseline;
  int resamples = 10000;
  uint64_t seed = 1;
  int width = 100;
};

Result<int> run_report(const ReportCliOptions& o) {
  if (static_cast<int>(o.markdown) + static_cast<int>(o.json_out) +
          static_cast<int>(!o.csv.empty()) >
      1) {
    return fail(ErrorKind::usage, "choose one of --markdown, --json and --csv");
  }
  if (o.resamples < 100)
    return fail(ErrorKind::usage, "--resamples must be at least 100 (got {})", o.resamples);
  std::vector<report::RunData> runs;
  for (const auto& dir : o.runs) {
    auto r = report::load_run(dir);
    if (!r) return std::unexpected(std::move(r.error()));
    runs.push_back(std::move(*r));
  }
  report::ReportOptions opts;
  opts.op_selectors = o.ops;
  opts.suite_root = o.suite;
  opts.labels = o.labels;
  opts.baseline = o.baseline;
  opts.bootstrap.resamples = o.resamples;
  opts.bootstrap.seed = o.seed;
  KOPE_ASSIGN(report::Analysis an, report::analyse(std::move(runs), opts));
  if (!o.memory.empty()) {
    auto m = report::load_memory_overview(o.memory);
    if (!m) return std::unexpected(std::move(m.error()).with_context("--memory: "));
    an.memory = std::move(*m);
  }
  std::vector<report::Table> tables = report::build_tables(an);

  if (!o.html.empty()) {
    std::string page = report::render_html(an, tables);
    fs::path out = o.html;
    if (out.has_parent_path()) KOPE_TRY(util::make_dirs(out.parent_path()));
    KOPE_TRY(util::write_file_atomic(out, page));
    if (!o.markdown && !o.json_out && o.csv.empty()) {
      print(
          fmt::format("wrote {} ({}): {} over {}\n", out.string(),
                      util::human_bytes(static_cast<double>(page.size())),
                      an.figures.size() == 1 ? "1 run" : fmt::format("{} runs", an.figures.size()),
                      an.set.description()));
      return 0;
    }
  }
  if (o.json_out) {
    print(report::report_json(an, tables).dump(2) + "\n");
  } else if (!o.csv.empty()) {
    std::vector<std::string> ids;
    for (const auto& t : tables) {
      if (t.id == o.csv) {
        print(report::print_csv(t));
        return 0;
      }
      ids.push_back(t.id);
    }
    return fail(ErrorKind::usage, "--csv {}: no such table (this report has {})", o.csv,
                util::join(ids, ", "));
  } else {
    print(report::report_text(an, tables, o.markdown, o.width));
  }
  return 0;
}

}  // namespace

void register_report(CLI::App& app, Action& action) {
  auto o = std::make_shared<ReportCliOptions>();
  CLI::App* cmd = app.add_subcommand(
      "report",
      "Figures, run comparisons and lineage of run directories (console, markdown, JSON, HTML)");
  cmd->add_option("runs", o->runs,
                  "Run directories written by `kope run`; several are compared side by side")
      ->required();
  cmd->add_option("--html", o->html,
                  "Write a self-contained HTML report (plots, lineage view) to this file");
  cmd->add_flag("--markdown", o->markdown, "Print markdown tables instead of console tables");
  cmd->add_flag("--json", o->json_out,
                "Print the report as JSON (every table, the sets, the bootstrap settings)");
  cmd->add_option(
      "--csv", o->csv,
      "Print one table as CSV (runs, summary, levels, categories, ops, comparison, ...)");
  cmd->add_option(
      "--memory", o->memory,
      "Add a section on this experience database (lessons, helpful/harmful, quarantined wins)");
  cmd->add_option("--ops", o->ops,
                  "The operator set figures are over: names, globs, category:x, level:N (default: "
                  "the runs' selections)")
      ->delimiter(',');
  cmd->add_option("--suite", o->suite,
                  "Operator suite --ops selects from (default: the first run's suite)");
  cmd->add_option("--labels", o->labels,
                  "Names for the runs, in order (default: what differs between them)")
      ->delimiter(',');
  cmd->add_option("--baseline", o->baseline,
                  "Label of the run the others are compared with (default: the first)");
  cmd->add_option("--resamples", o->resamples, "Bootstrap resamples for confidence intervals")
      ->default_val(10000);
  cmd->add_option("--seed", o->seed, "Bootstrap seed (intervals are deterministic for a seed)")
      ->default_val(1);
  cmd->add_option("--width", o->width, "Console width for wrapping captions")
      ->default_val(100)
      ->check(CLI::Range(40, 400));
  cmd->callback([o, &action] { action = [o] { return run_report(*o); }; });
}

}  // namespace kope::cli
