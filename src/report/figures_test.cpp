// Figures of the hand-made run directories in tests/report/fixtures against values computed by
// hand (see the comments; tests/report/fixtures/README.md describes the runs).
#include "report/figures.h"

#include <gtest/gtest.h>

#include <cmath>

#include "report/tables.h"

namespace kope::report {
namespace {

const fs::path k_fixtures = fs::path(KOPE_SOURCE_DIR) / "tests/report/fixtures";

Analysis analyse_fixture(std::vector<std::string> dirs, ReportOptions options = {}) {
  std::vector<RunData> runs;
  for (const auto& d : dirs) {
    auto r = load_run(k_fixtures / d);
    EXPECT_TRUE(r) << r.error().message;
    if (r) runs.push_back(std::move(*r));
  }
  auto an = analyse(std::move(runs), options);
  EXPECT_TRUE(an) << an.error().message;
  return std::move(*an);
}

double fig(const RunFigures& f, const char* key) {
  return f.figures.at(key).get<double>();
}
double fp(const RunFigures& f, const char* p) {
  return f.figures.at("fast_p").at(p).get<double>();
}

TEST(Figures, OneRunOverItsSelection) {
  Analysis an = analyse_fixture({"run-none"});
  ASSERT_EQ(an.set.ops.size(), 3u);
  EXPECT_EQ(an.set.cases_total, 12);  // 4 + 3 + 5
  EXPECT_EQ(an.set.description(), "the 3 operators of the run's selection (12 cases)");
  const RunFigures& f = an.figures[0];
  EXPECT_EQ(f.label, "fixture-none");
  // fx_scale 4/4, fx_shift best attempt 2/3, fx_norm 5/5.
  EXPECT_NEAR(fig(f, "pass_rate"), 11.0 / 12.0, 1e-12);
  EXPECT_EQ(f.solved(), 2);
  EXPECT_NEAR(*an.common_geomean_reference.at(f.label), std::sqrt(4.0 * 1.5), 1e-12);
  EXPECT_EQ(an.common_set, "the 2 operators solved");
}

TEST(Figures, MissingOperatorCountsAsAllCasesFailed) {
  // The union of both runs' selections: fx_sum (2 cases) is missing from run-none.
  Analysis an = analyse_fixture({"run-none", "run-active"});
  ASSERT_EQ(an.set.ops.size(), 4u);
  EXPECT_EQ(an.set.cases_total, 14);
  const RunFigures& none = an.figures[0];
  const RunFigures& active = an.figures[1];
  EXPECT_EQ(none.label, "none");  // the context mode is what differs
  EXPECT_EQ(active.label, "active");
  EXPECT_NEAR(fig(none, "pass_rate"), 11.0 / 14.0, 1e-12);
  EXPECT_NEAR(fig(active, "pass_rate"), 12.0 / 14.0, 1e-12);  // 4 + 3 + 3 (best of fx_norm) + 2
  EXPECT_FALSE(none.op("fx_sum")->selected);
  EXPECT_EQ(none.op("fx_sum")->cases_passed, 0);
  EXPECT_EQ(none.op("fx_sum")->cases_total, 2);
  EXPECT_EQ(none.op("fx_shift")->cases_passed, 2);
}

TEST(Figures, FastPAtTheBoundaries) {
  Analysis an = analyse_fixture({"run-none", "run-active"});
  const RunFigures& none = an.figures[0];    // solved: 4.0x, 1.5x of 4 operators
  const RunFigures& active = an.figures[1];  // solved: 3.0x, 1.2x, 2.0x of 4
  EXPECT_DOUBLE_EQ(fp(none, "0"), 0.5);
  EXPECT_DOUBLE_EQ(fp(none, "1"), 0.5);
  EXPECT_DOUBLE_EQ(fp(none, "1.5"), 0.25);  // 1.5x is not more than 1.5x
  EXPECT_DOUBLE_EQ(fp(none, "2"), 0.25);
  EXPECT_DOUBLE_EQ(fp(active, "0"), 0.75);
  EXPECT_DOUBLE_EQ(fp(active, "1.5"), 0.5);
  EXPECT_DOUBLE_EQ(fp(active, "2"), 0.25);  // 2.0x is not more than 2x
  auto curve = fast_p_curve(active, 4, false, 10);
  ASSERT_EQ(curve.size(), 4u);
  EXPECT_DOUBLE_EQ(curve[0].second, 0.75);
  EXPECT_DOUBLE_EQ(curve[1].first, 1.2);
  EXPECT_DOUBLE_EQ(curve[1].second, 0.5);
  EXPECT_DOUBLE_EQ(curve[3].first, 3.0);
  EXPECT_DOUBLE_EQ(curve[3].second, 0.0);
}

TEST(Figures, GeomeansOverAStatedSet) {
  Analysis an = analyse_fixture({"run-none", "run-active"});
  ASSERT_EQ(an.solved_in_every_run, std::vector<std::string>{"fx_scale"});
  EXPECT_EQ(an.common_set, "the 1 operator solved in every run");
  EXPECT_DOUBLE_EQ(*an.common_geomean_reference.at("none"), 4.0);
  EXPECT_DOUBLE_EQ(*an.common_geomean_reference.at("active"), 3.0);
  EXPECT_DOUBLE_EQ(*an.common_geomean_library.at("none"), 3.2);
  // Each run's own set: the operators it solved.
  EXPECT_NEAR(fig(an.figures[0], "geomean_speedup_vs_reference"), std::sqrt(6.0), 1e-12);
  EXPECT_NEAR(fig(an.figures[1], "geomean_speedup_vs_reference"), std::cbrt(3.0 * 1.2 * 2.0),
              1e-12);
  // Tokens: 7 attempts x 1200 in run-none, 5 x 600 in run-active.
  EXPECT_EQ(an.figures[0].figures["tokens_total"].get<int64_t>(), 8400);
  EXPECT_DOUBLE_EQ(fig(an.figures[0], "tokens_per_solved_op"), 4200);
  EXPECT_DOUBLE_EQ(fig(an.figures[1], "tokens_per_solved_op"), 1000);
  EXPECT_NEAR(fig(an.figures[0], "cost_usd"), 0.07, 1e-12);
  EXPECT_DOUBLE_EQ(fig(an.figures[0], "attempts_to_first_correct_mean"), 1.5);
  EXPECT_DOUBLE_EQ(fig(an.figures[0], "attempts_to_best_mean"), 2.5);
}

TEST(Figures, PerLevelAndCategoryBreakdowns) {
  Analysis an = analyse_fixture({"run-none", "run-active"});
  const RunFigures& none = an.figures[0];
  ASSERT_EQ(none.by_level.size(), 2u);
  EXPECT_EQ(none.by_level[0].key, "level 1");  // fx_scale 4 + fx_shift 3 cases
  EXPECT_NEAR(none.by_level[0].figures["pass_rate"].get<double>(), 6.0 / 7.0, 1e-12);
  EXPECT_EQ(none.by_level[1].key, "level 2");  // fx_norm 5 + fx_sum 2 (not run)
  EXPECT_NEAR(none.by_level[1].figures["pass_rate"].get<double>(), 5.0 / 7.0, 1e-12);
  EXPECT_NEAR(an.figures[1].by_level[0].figures["pass_rate"].get<double>(), 1.0, 1e-12);
  EXPECT_NEAR(an.figures[1].by_level[1].figures["pass_rate"].get<double>(), 5.0 / 7.0, 1e-12);
  ASSERT_EQ(none.by_category.size(), 3u);
  EXPECT_EQ(none.by_category[0].key, "elementwise");
  EXPECT_EQ(none.by_category[2].key, "reduction");
  EXPECT_EQ(none.by_category[2].figures["solved"].get<int>(), 0);
  EXPECT_EQ(an.figures[1].by_category[2].figures["solved"].get<int>(), 1);
}

TEST(Figures, PairedComparisonIsDeterministic) {
  ReportOptions o;
  o.bootstrap.resamples = 4000;
  o.bootstrap.seed = 9;
  Analysis an = analyse_fixture({"run-none", "run-active"}, o);
  ASSERT_EQ(an.comparisons.size(), 1u);
  const Comparison& c = an.comparisons[0];
  EXPECT_EQ(c.baseline, "none");
  EXPECT_EQ(c.other, "active");
  auto metric = [&](const char* key) -> const PairedMetric& {
    for (const auto& m : c.metrics) {
      if (m.key == key) return m;
    }
    ADD_FAILURE() << key;
    return c.metrics.front();
  };
  const PairedMetric& pass = metric("pass_rate");
  EXPECT_EQ(pass.n, 4);
  EXPECT_NEAR(pass.interval->estimate, 1.0 / 14.0, 1e-12);
  EXPECT_LE(pass.interval->low, pass.interval->estimate);
  EXPECT_GE(pass.interval->high, pass.interval->estimate);
  const PairedMetric& geo = metric("geomean_speedup_vs_reference");
  EXPECT_EQ(geo.n, 1);
  EXPECT_EQ(geo.set, "the 1 operator solved by both none and active");
  EXPECT_DOUBLE_EQ(geo.interval->estimate, 0.75);
  EXPECT_DOUBLE_EQ(geo.interval->low, 0.75);
  const PairedMetric& tokens = metric("tokens");
  EXPECT_EQ(tokens.n, 3);  // fx_sum is selected by one run only
  EXPECT_NEAR(tokens.interval->estimate, 2400.0 / 8400.0, 1e-12);
  EXPECT_EQ(tokens.interval->resamples, 4000);
  // The same seed gives the same intervals.
  Analysis again = analyse_fixture({"run-none", "run-active"}, o);
  const PairedMetric& pass2 = again.comparisons[0].metrics[0];
  EXPECT_EQ(pass2.interval->low, pass.interval->low);
  EXPECT_EQ(pass2.interval->high, pass.interval->high);
  // A named baseline reverses the pair.
  o.baseline = "active";
  Analysis rev = analyse_fixture({"run-none", "run-active"}, o);
  EXPECT_EQ(rev.comparisons[0].baseline, "active");
  EXPECT_NEAR(rev.comparisons[0].metrics[0].interval->estimate, -1.0 / 14.0, 1e-12);
}

TEST(Figures, OpsSelectorDefinesTheSet) {
  ReportOptions o;
  o.op_selectors = {"level:1"};
  o.suite_root = k_fixtures / "ops";
  Analysis an = analyse_fixture({"run-none", "run-active"}, o);
  ASSERT_EQ(an.set.ops.size(), 2u);
  EXPECT_EQ(an.set.cases_total, 7);
  EXPECT_NEAR(an.figures[0].figures["pass_rate"].get<double>(), 6.0 / 7.0, 1e-12);
  bool noted = false;
  for (const auto& n : an.notes)
    noted = noted || n.find("left out of every figure") != std::string::npos;
  EXPECT_TRUE(noted);
  o.op_selectors = {"no_such_op"};
  std::vector<RunData> runs;
  runs.push_back(*load_run(k_fixtures / "run-none"));
  auto bad = analyse(std::move(runs), o);
  ASSERT_FALSE(bad);
}

TEST(Figures, ResultsAgreeWithTheAgentsOwnFiguresForItsSelection) {
  // The report computes run figures with the agent's compute_results; for the run's own
  // selection they equal what results.json would hold.
  Analysis an = analyse_fixture({"run-active"});
  EXPECT_NEAR(an.figures[0].figures["pass_rate"].get<double>(), 12.0 / 14.0, 1e-12);
  EXPECT_EQ(an.figures[0].stream,
            (std::vector<std::string>{"fx_sum", "fx_scale", "fx_shift", "fx_norm"}));
}

TEST(Figures, LabelsAndErrors) {
  auto a = load_run(k_fixtures / "run-none");
  ASSERT_TRUE(a);
  ReportOptions o;
  o.labels = {"x", "x"};
  std::vector<RunData> runs;
  runs.push_back(*load_run(k_fixtures / "run-none"));
  runs.push_back(*load_run(k_fixtures / "run-active"));
  auto dup = analyse(std::move(runs), o);
  ASSERT_FALSE(dup);
  EXPECT_EQ(dup.error().kind, ErrorKind::usage);
  auto missing = load_run(k_fixtures / "no-such-run");
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().kind, ErrorKind::not_found);
  auto not_a_run = load_run(k_fixtures / "ops");
  ASSERT_FALSE(not_a_run);
  EXPECT_NE(not_a_run.error().message.find("no config.json"), std::string::npos);
}

TEST(Tables, EveryFigureNamesItsSet) {
  Analysis an = analyse_fixture({"run-none", "run-active"});
  auto tables = build_tables(an);
  std::vector<std::string> ids;
  for (const auto& t : tables) ids.push_back(t.id);
  EXPECT_EQ(ids, (std::vector<std::string>{"runs", "summary", "levels", "categories", "ops",
                                           "comparison", "comparison_ops"}));
  for (const auto& t : tables) EXPECT_FALSE(t.caption.empty()) << t.id;
  const Table& summary = tables[1];
  EXPECT_NE(summary.caption.find("the 1 operator solved in every run"), std::string::npos);
  EXPECT_NE(
      summary.caption.find("the 4 operators of the union of the 2 runs' selections (14 cases)"),
      std::string::npos);
  const Table& cmp = tables[5];
  EXPECT_NE(cmp.caption.find("10000 resamples, seed 1"), std::string::npos);
  int over = cmp.column("over");
  for (const auto& row : cmp.rows)
    EXPECT_FALSE(std::get<std::string>(row[static_cast<size_t>(over)]).empty());
  auto j = report_json(an, tables);
  EXPECT_EQ(j["set"]["cases_total"], 14);
  EXPECT_EQ(j["tables"]["summary"]["rows"][0]["pass_rate"].get<double>(), 11.0 / 14.0);
  EXPECT_EQ(j["bootstrap"]["resamples"], 10000);
}

}  // namespace
}  // namespace kope::report
