// The side-by-side comparison of compared runs' best kernels (side_by_side.h).
#include "side_by_side.h"

#include <cmath>
#include <map>

#include <fmt/format.h>

#include "child_run.h"
#include "kope/eval.h"
#include "kope/hw.h"
#include "kope/spec.h"
#include "report/stats.h"
#include "util/fs.h"
#include "util/hash.h"

namespace kope::cli {

namespace {

using nlohmann::json;
namespace fs = std::filesystem;

// An operator a run solved: its level and its best kernel's source.
struct Best {
  int level = 1;
  std::string dir;  // the op's folder as the run loaded it
  std::string code;
  std::string hash;
};

// A string field of results.json ("" when absent or null).
std::string text_of(const json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

Result<std::map<std::string, Best>> solved_ops(const SideBySideRun& run) {
  KOPE_ASSIGN(json results, read_results(run.run_dir));
  if (!results.value("complete", false)) {
    return fail(ErrorKind::usage, "{} is not complete: the side-by-side comparison needs every run finished", run.run_dir.string());
  }
  std::map<std::string, Best> out;
  for (const json& op : results.value("ops", json::array())) {
    std::string file = text_of(op, "best_code_file");
    auto solved = op.find("solved");
    if (solved == op.end() || !solved->is_boolean() || !solved->get<bool>() || file.empty()) continue;
    fs::path path = fs::path(file).is_absolute() ? fs::path(file) : run.run_dir / file;
    auto code = util::read_file(path);
    if (!code) return fail(ErrorKind::io, "{}: the best kernel of {} ({}) cannot be read: {}", run.label, text_of(op, "name"),
                           path.string(), code.error().message);
    auto level = op.find("level");
    Best b{level != op.end() && level->is_number_integer() ? level->get<int>() : 1, text_of(op, "dir"), *code, util::sha256_hex(*code)};
    out.emplace(text_of(op, "name"), std::move(b));
  }
  return out;
}

// The decision as seen from the mode's kernel (the candidate): §3's name without its suffix.
std::string decision_name(eval::IncumbentDecision d) {
  switch (d) {
    case eval::IncumbentDecision::faster: return "faster";
    case eval::IncumbentDecision::slower: return "slower";
    case eval::IncumbentDecision::not_faster: return "not_faster";
    case eval::IncumbentDecision::undecided: return "undecided";
    case eval::IncumbentDecision::unavailable: break;
  }
  return "unavailable";
}

json opt(const std::optional<double>& v) { return v ? json(*v) : json(nullptr); }

// Times `mine` against `theirs` (the baseline's kernel, in the incumbent's place).
Result<json> compare_pair(eval::Evaluator& evaluator, const spec::OpSpec& op, const Best& mine, const Best& theirs,
                          const SideBySideOptions& o) {
  eval::EvalOptions eo;
  eo.seed = o.seed;
  eo.incumbent_source = theirs.code;
  eo.comparison_seconds = o.seconds;
  eo.max_seconds_per_case = o.seconds;
  eo.quiet_wait_seconds = 30;  // the comparison waits for outside load to pass before it starts
  KOPE_ASSIGN(eval::EvalResult r, evaluator.evaluate(op, mine.code, eo));
  json row = {{"verdict", std::string(eval::verdict_name(r.verdict))}};
  if (r.verdict != eval::Verdict::correct) {
    row["problem"] = fmt::format("the mode's kernel: {}", r.message);
    return row;
  }
  if (!r.incumbent || r.incumbent->decision == eval::IncumbentDecision::unavailable) {
    row["problem"] = fmt::format("the baseline's kernel: {}", r.incumbent ? r.incumbent->problem : std::string("not compared"));
    return row;
  }
  const eval::IncumbentComparison& c = *r.incumbent;
  row["decision"] = decision_name(c.decision);
  row["ratio"] = c.ratio;
  row["lower"] = c.lower;
  row["upper"] = opt(c.upper);
  row["pairs"] = c.pairs;
  row["seconds"] = c.seconds;
  row["disturbed"] = c.disturbed;
  row["outside_load"] = c.outside_load;
  return row;
}

// Each mode's geometric mean of the ratios, over all its compared operators and per level group.
json summarise(const std::vector<SideBySideRun>& runs, const json& rows, const SideBySideOptions& o) {
  json out = json::array();
  struct Group {
    const char* name;
    int min_level, max_level;
  };
  const Group groups[] = {{"all", 1, 99}, {"level 1", 1, 1}, {"levels 2-4", 2, 99}};
  for (size_t m = 1; m < runs.size(); ++m) {
    for (const Group& g : groups) {
      std::vector<double> ratios;
      int faster = 0, slower = 0, tied = 0;
      for (const json& r : rows) {
        if (r.value("mode", "") != runs[m].label || !r.contains("ratio")) continue;
        int level = r.value("level", 1);
        if (level < g.min_level || level > g.max_level) continue;
        double ratio = r.at("ratio").get<double>();
        if (!(ratio > 0) || !std::isfinite(ratio)) continue;
        ratios.push_back(ratio);
        std::string d = r.value("decision", "");
        if (d == "faster") ++faster;
        else if (d == "slower" || d == "not_faster") ++slower;
        else ++tied;
      }
      if (ratios.empty()) continue;
      std::vector<double> ones(ratios.size(), 1.0);
      report::BootstrapOptions bo;
      bo.resamples = o.resamples;
      bo.seed = o.seed;
      auto iv = report::bootstrap_geomean_ratio(ones, ratios, bo);
      out.push_back({{"mode", runs[m].label},
                     {"baseline", runs[0].label},
                     {"over", g.name},
                     {"ops", ratios.size()},
                     {"geomean_ratio", iv ? json(iv->estimate) : json(nullptr)},
                     {"low", iv ? json(iv->low) : json(nullptr)},
                     {"high", iv ? json(iv->high) : json(nullptr)},
                     {"faster", faster},
                     {"slower_or_not_faster", slower},
                     {"undecided_or_same", tied}});
    }
  }
  return out;
}

}  // namespace

Result<json> side_by_side(const std::vector<SideBySideRun>& runs, const fs::path& cache, const SideBySideOptions& o,
                          const std::function<void(const std::string&)>& say) {
  if (runs.size() < 2) return fail(ErrorKind::usage, "the side-by-side comparison needs a baseline and at least one other run");
  std::vector<std::map<std::string, Best>> best;
  for (const auto& r : runs) {
    KOPE_ASSIGN(auto b, solved_ops(r));
    best.push_back(std::move(b));
  }
  // Rows already measured for the same kernels and budget.
  std::map<std::string, json> done;
  auto key = [](const std::string& op, const std::string& mode, const std::string& a, const std::string& b, double s) {
    return fmt::format("{}|{}|{}|{}|{}", op, mode, a, b, s);
  };
  if (auto text = util::read_file(cache)) {
    json old = json::parse(*text, nullptr, false);
    if (!old.is_discarded()) {
      for (const json& r : old.value("rows", json::array())) {
        done[key(r.value("op", ""), r.value("mode", ""), r.value("mode_kernel", ""), r.value("baseline_kernel", ""),
                 r.value("budget_seconds", 0.0))] = r;
      }
    }
  }
  KOPE_ASSIGN(HardwareProfile hw, load_hardware_profile());
  std::unique_ptr<eval::Evaluator> evaluator;
  json rows = json::array();
  json out;
  auto save = [&]() -> Status {
    out = {{"baseline", runs[0].label}, {"rows", rows}, {"summary", summarise(runs, rows, o)}};
    return util::write_file_atomic(cache, out.dump(2) + "\n");
  };
  const fs::path suite = o.suite.empty() ? spec::default_ops_dir() : fs::path(o.suite);
  for (const auto& [name, theirs] : best[0]) {
    for (size_t m = 1; m < runs.size(); ++m) {
      auto it = best[m].find(name);
      if (it == best[m].end()) continue;
      const Best& mine = it->second;
      std::string k = key(name, runs[m].label, mine.hash, theirs.hash, o.seconds);
      if (auto d = done.find(k); d != done.end()) {
        rows.push_back(d->second);
        continue;
      }
      json row = {{"op", name},
                  {"level", theirs.level},
                  {"mode", runs[m].label},
                  {"baseline", runs[0].label},
                  {"mode_kernel", mine.hash},
                  {"baseline_kernel", theirs.hash},
                  {"budget_seconds", o.seconds}};
      if (mine.hash == theirs.hash) {
        row["decision"] = "same_kernel";  // the same source: nothing to time
        row["ratio"] = 1.0;
      } else {
        if (!evaluator) {
          eval::EvaluatorOptions eo;
          KOPE_ASSIGN(evaluator, eval::make_evaluator(o.backend, hw, eo));
        }
        // The op as the baseline's run loaded it (a folder), else by name from the suite.
        std::error_code ec;
        bool folder = !theirs.dir.empty() && fs::is_directory(theirs.dir, ec);
        KOPE_ASSIGN(spec::OpSpec op, spec::resolve_op(folder ? theirs.dir : name, suite));
        say(fmt::format("side by side: {} {} vs {}...", name, runs[m].label, runs[0].label));
        KOPE_ASSIGN(json measured, compare_pair(*evaluator, op, mine, theirs, o));
        row.update(measured);
      }
      rows.push_back(std::move(row));
      KOPE_TRY(save());
    }
  }
  KOPE_TRY(save());
  return out;
}

std::string side_by_side_text(const json& result) {
  auto num = [](const json& v, const char* f) { return v.is_number() ? fmt::format(fmt::runtime(f), v.get<double>()) : std::string("-"); };
  std::string base = result.value("baseline", "");
  std::string out = fmt::format(
      "side by side: each mode's best kernel timed against {}'s in alternating batches (ratio > 1: the mode's is faster; "
      "95% interval of the sequential rule)\n",
      base);
  out += fmt::format("  {:<20} {:>5} {:<10} {:<12} {:>8} {:>18} {:>6}\n", "operator", "level", "mode", "decision", "ratio", "interval",
                     "pairs");
  for (const json& r : result.value("rows", json::array())) {
    std::string interval = r.contains("lower") ? fmt::format("[{}, {}]", num(r["lower"], "{:.3f}"), num(r.value("upper", json()), "{:.3f}"))
                                               : std::string("-");
    std::string decision = r.value("decision", r.contains("problem") ? std::string("failed") : std::string("-"));
    out += fmt::format("  {:<20} {:>5} {:<10} {:<12} {:>8} {:>18} {:>6}{}{}\n", r.value("op", ""), r.value("level", 1), r.value("mode", ""),
                       decision, num(r.value("ratio", json()), "{:.3f}x"), interval, r.value("pairs", 0),
                       r.value("disturbed", false) ? "  (disturbed)" : "",
                       r.contains("problem") ? "  " + r.value("problem", "") : "");
  }
  for (const json& s : result.value("summary", json::array())) {
    out += fmt::format("  {} vs {}, {} ({} operators): geomean {} [{}, {}]; faster {}, slower or not faster {}, undecided or same {}\n",
                       s.value("mode", ""), base, s.value("over", ""), s.value("ops", 0), num(s["geomean_ratio"], "{:.3f}x"),
                       num(s["low"], "{:.3f}"), num(s["high"], "{:.3f}"), s.value("faster", 0), s.value("slower_or_not_faster", 0),
                       s.value("undecided_or_same", 0));
  }
  return out;
}

}  // namespace kope::cli
