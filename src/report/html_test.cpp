#include "report/html.h"

#include <gtest/gtest.h>

#include "report/lineage.h"
#include "report/tables.h"
#include "util/fs.h"
#include "util/strings.h"

namespace kope::report {
namespace {

const fs::path k_fixtures = fs::path(KOPE_SOURCE_DIR) / "tests/report/fixtures";

Analysis fixture(std::vector<std::string> dirs) {
  std::vector<RunData> runs;
  for (const auto& d : dirs) runs.push_back(*load_run(k_fixtures / d));
  auto an = analyse(std::move(runs), {});
  EXPECT_TRUE(an);
  return std::move(*an);
}

TEST(Html, SelfContainedWithEveryChartAndLineage) {
  Analysis an = fixture({"run-none", "run-active"});
  std::string page = render_html(an, build_tables(an));
  EXPECT_EQ(page.find("https://"), std::string::npos);
  EXPECT_EQ(page.find("http://"), page.find("http://www.w3.org/2000/svg"));
  EXPECT_EQ(page.find("<link"), std::string::npos);
  EXPECT_EQ(page.find("@import"), std::string::npos);
  EXPECT_EQ(page.find("url("), std::string::npos);
  for (const auto& name : expected_charts(an)) {
    EXPECT_NE(page.find("data-chart=\"" + name + "\""), std::string::npos) << name;
  }
  // One lineage tree per run and operator, with one node per attempt.
  for (size_t r = 0; r < an.figures.size(); ++r) {
    for (const auto& o : an.figures[r].ops) {
      std::string key = std::to_string(r) + "/" + o.name;
      EXPECT_NE(page.find("data-key=\"" + key + "\""), std::string::npos) << key;
      for (int k = 1; k <= o.attempts; ++k) {
        EXPECT_NE(page.find("data-node=\"" + key + "/" + std::to_string(k) + "\""),
                  std::string::npos);
      }
    }
  }
  // The error hook is the first script of the page.
  EXPECT_LT(page.find("window.__kopeErrors = []"), page.find("<style>"));
}

TEST(Html, ModelTextIsEscapedEverywhere) {
  Analysis an = fixture({"run-none"});
  const std::string hostile = "</script><script>alert(1)</script><img src=x onerror=alert(2)>";
  auto& attempts = an.runs[0].states["fx_scale"].attempts;
  for (auto& a : attempts) {
    a.optimisation = hostile;
    a.journal = hostile;
    a.message = hostile;
  }
  // Rebuild the figures that copy the strategy (best_optimisation).
  std::vector<RunData> runs;
  runs.push_back(std::move(an.runs[0]));
  auto again = analyse(std::move(runs), {});
  ASSERT_TRUE(again);
  std::string page = render_html(*again, build_tables(*again));
  EXPECT_EQ(page.find("<script>alert"), std::string::npos);
  EXPECT_EQ(page.find("<img"), std::string::npos);
  // Exactly the page's own scripts: the error hook, the data block and the main script.
  size_t scripts = 0;
  for (size_t p = page.find("<script"); p != std::string::npos; p = page.find("<script", p + 1))
    ++scripts;
  EXPECT_EQ(scripts, 3u);
}

TEST(Html, LineageTreeAndDiffs) {
  Analysis an = fixture({"run-none"});
  const OpFigures* scale = an.figures[0].op("fx_scale");
  LineageView v = lineage_view(an, 0, *scale);
  EXPECT_EQ(v.attempts, 3);
  const auto& nodes = v.detail["nodes"];
  ASSERT_EQ(nodes.size(), 3u);
  EXPECT_TRUE(nodes["1"]["parent"].is_null());
  EXPECT_EQ(nodes["2"]["parent"], 1);
  EXPECT_EQ(nodes["3"]["best"], true);
  EXPECT_EQ(nodes["3"]["diff"]["against"], "attempt 2");
  // Attempt 3 added the OpenMP pragma to attempt 2's loop.
  EXPECT_EQ(nodes["3"]["diff"]["added"], 2);
  EXPECT_EQ(nodes["3"]["diff"]["removed"], 1);
  EXPECT_EQ(nodes["1"]["diff"]["against"], "nothing (a fresh draft: the whole source)");
  // Failed verdicts are squares, correct attempts circles coloured by label; the best has a ring.
  EXPECT_NE(v.svg.find("<rect"), std::string::npos);
  EXPECT_NE(v.svg.find("best-ring"), std::string::npos);
  EXPECT_NE(v.svg.find("class=\"edge dashed\""), std::string::npos);  // the repair edge 1 -> 2
}

TEST(Figures, ARunInProgressIsReportedAsItStands) {
  auto tmp = util::TempDir::create("kope-report-test");
  ASSERT_TRUE(tmp);
  fs::copy(k_fixtures / "run-active", tmp->path() / "run", fs::copy_options::recursive);
  fs::copy(k_fixtures / "ops", tmp->path() / "ops", fs::copy_options::recursive);
  // Cut the log after fx_norm's first attempt: it is started, not finished.
  auto text = util::read_file(tmp->path() / "run/events.jsonl");
  ASSERT_TRUE(text);
  std::string cut;
  for (const auto& line : util::split(*text, '\n')) {
    if (line.empty()) continue;
    cut += line + "\n";
    if (line.find("\"type\": \"attempt\", \"op\": \"fx_norm\"") != std::string::npos) break;
  }
  ASSERT_TRUE(util::write_file_atomic(tmp->path() / "run/events.jsonl", cut));
  std::vector<RunData> runs;
  runs.push_back(*load_run(tmp->path() / "run"));
  EXPECT_FALSE(runs[0].complete());
  auto an = analyse(std::move(runs), {});
  ASSERT_TRUE(an);
  const OpFigures* norm = an->figures[0].op("fx_norm");
  EXPECT_TRUE(norm->started);
  EXPECT_FALSE(norm->done);
  EXPECT_EQ(norm->attempts, 1);
  EXPECT_EQ(norm->cases_passed, 3);
  bool noted = false;
  for (const auto& n : an->notes) noted = noted || n.find("is not complete") != std::string::npos;
  EXPECT_TRUE(noted);
  auto tables = build_tables(*an);
  std::string text_report = report_text(*an, tables, false);
  EXPECT_NE(text_report.find("not finished"), std::string::npos) << text_report;
}

}  // namespace
}  // namespace kope::report
