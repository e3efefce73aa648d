// `kope report` driven as a user would, on the hand-made run directories of
// tests/report/fixtures (their figures are checked by hand in src/report/figures_test.cpp).
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "kope/memory.h"
#include "util/fs.h"
#include "util/strings.h"
#include "util/subprocess.h"

namespace kope {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const fs::path k_fixtures = fs::path(KOPE_SOURCE_DIR) / "tests/report/fixtures";

struct Output {
  int code = -1;
  std::string out, err;
};

Output kope(std::vector<std::string> args) {
  util::RunOptions o;
  o.spawn.argv = {KOPE_EXE};
  for (auto& a : args) o.spawn.argv.push_back(std::move(a));
  o.timeout = std::chrono::seconds(120);
  o.stdout_cap = 64 << 20;
  auto r = util::run(o);
  EXPECT_TRUE(r) << r.error().message;
  if (!r) return {};
  return {r->status.exited ? r->status.code : -1, r->out, r->err};
}

std::string run(const char* name) {
  return (k_fixtures / name).string();
}

TEST(ReportCli, ConsoleTablesStateTheSet) {
  auto o = kope({"report", run("run-none"), run("run-active")});
  ASSERT_EQ(o.code, 0) << o.err;
  EXPECT_NE(o.out.find("kope report: 2 runs over the 4 operators of the union of the 2 runs' "
                       "selections (14 cases)"),
            std::string::npos)
      << o.out;
  EXPECT_NE(o.out.find("78.6%"), std::string::npos);  // 11 of 14 cases
  EXPECT_NE(o.out.find("85.7%"), std::string::npos);  // 12 of 14
  EXPECT_NE(o.out.find("the 1 operator solved in every run"), std::string::npos);
  EXPECT_NE(o.out.find("not run"), std::string::npos);
  EXPECT_NE(o.out.find("10000 resamples, seed 1"), std::string::npos);
}

TEST(ReportCli, JsonIsTheSameRecords) {
  auto o = kope({"report", run("run-none"), run("run-active"), "--json", "--resamples", "500",
                 "--seed", "3"});
  ASSERT_EQ(o.code, 0) << o.err;
  json j = json::parse(o.out);
  EXPECT_EQ(j["set"]["cases_total"], 14);
  EXPECT_EQ(j["set"]["ops"].size(), 4u);
  EXPECT_EQ(j["bootstrap"]["resamples"], 500);
  const json& rows = j["tables"]["summary"]["rows"];
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0]["label"], "none");
  EXPECT_NEAR(rows[0]["pass_rate"].get<double>(), 11.0 / 14.0, 1e-12);
  EXPECT_NEAR(rows[1]["fast_1.5"].get<double>(), 0.5, 1e-12);
  EXPECT_EQ(rows[0]["tokens_total"], 8400);
  bool found = false;
  for (const auto& r : j["tables"]["comparison"]["rows"]) {
    if (r["key"] == "tokens") {
      found = true;
      EXPECT_NEAR(r["estimate"].get<double>(), 2400.0 / 8400.0, 1e-12);
      EXPECT_EQ(r["resamples"], 500);
      EXPECT_EQ(r["over"], "the 3 operators both none and active selected");
    }
  }
  EXPECT_TRUE(found);
  // Deterministic: the same command gives the same bytes.
  auto again = kope({"report", run("run-none"), run("run-active"), "--json", "--resamples", "500",
                     "--seed", "3"});
  EXPECT_EQ(again.out, o.out);
}

TEST(ReportCli, MarkdownCsvAndLabels) {
  auto md = kope(
      {"report", run("run-none"), run("run-active"), "--markdown", "--labels", "no-memory,memory"});
  ASSERT_EQ(md.code, 0) << md.err;
  EXPECT_NE(md.out.find("### Figures"), std::string::npos);
  EXPECT_NE(md.out.find("| no-memory |"), std::string::npos) << md.out;
  auto csv = kope({"report", run("run-none"), "--csv", "ops"});
  ASSERT_EQ(csv.code, 0) << csv.err;
  EXPECT_TRUE(util::starts_with(csv.out, "label,op,category,level,status,")) << csv.out;
  EXPECT_NE(
      csv.out.find(
          "fixture-none,fx_scale,elementwise,1,solved,true,4,4,3,4,3.2,0.4,2,3,3000,600,3600,"),
      std::string::npos)
      << csv.out;
}

TEST(ReportCli, OpsSetAndBaseline) {
  auto o = kope({"report", run("run-none"), run("run-active"), "--ops", "level:2", "--suite",
                 (k_fixtures / "ops").string(), "--baseline", "active"});
  ASSERT_EQ(o.code, 0) << o.err;
  EXPECT_NE(o.out.find("the 2 operators of --ops level:2 (7 cases)"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("Each run against the baseline active"), std::string::npos);
}

TEST(ReportCli, HtmlFileIsWritten) {
  auto tmp = util::TempDir::create("kope-report-cli");
  ASSERT_TRUE(tmp);
  fs::path html = tmp->path() / "sub" / "report.html";
  auto o = kope({"report", run("run-none"), run("run-active"), "--html", html.string()});
  ASSERT_EQ(o.code, 0) << o.err;
  EXPECT_NE(o.out.find("wrote " + html.string()), std::string::npos) << o.out;
  auto page = util::read_file(html);
  ASSERT_TRUE(page);
  EXPECT_TRUE(util::starts_with(*page, "<!DOCTYPE html>"));
  EXPECT_EQ(page->find("http://"),
            page->find("http://www.w3.org/2000/svg"));  // only the SVG namespace
  EXPECT_EQ(page->find("https://"), std::string::npos);
  EXPECT_EQ(page->find("<link"), std::string::npos);
  EXPECT_EQ(page->find("src="), std::string::npos);
}

TEST(ReportCli, BadInputGetsAClearMessage) {
  auto missing = kope({"report", (k_fixtures / "nope").string()});
  EXPECT_EQ(missing.code, 2);
  EXPECT_NE(missing.err.find("no such run directory"), std::string::npos) << missing.err;
  auto not_run = kope({"report", (k_fixtures / "ops").string()});
  EXPECT_EQ(not_run.code, 2);
  EXPECT_NE(not_run.err.find("no config.json"), std::string::npos) << not_run.err;
  auto both = kope({"report", run("run-none"), "--json", "--markdown"});
  EXPECT_EQ(both.code, 2);
  auto csv = kope({"report", run("run-none"), "--csv", "nonsense"});
  EXPECT_EQ(csv.code, 2);
  EXPECT_NE(csv.err.find("no such table"), std::string::npos);
  auto ops = kope(
      {"report", run("run-none"), "--ops", "zzz_none", "--suite", (k_fixtures / "ops").string()});
  EXPECT_EQ(ops.code, 2) << ops.out;
  auto base = kope({"report", run("run-none"), run("run-active"), "--baseline", "nobody"});
  EXPECT_EQ(base.code, 2);
  EXPECT_NE(base.err.find("names no run"), std::string::npos);
  auto twice = kope({"report", run("run-none"), run("run-none")});
  EXPECT_EQ(twice.code, 2);
  EXPECT_NE(twice.err.find("given twice"), std::string::npos) << twice.err;
}

TEST(ReportCli, DamagedEventLogIsReportedWithItsLine) {
  auto tmp = util::TempDir::create("kope-report-cli");
  ASSERT_TRUE(tmp);
  fs::path dir = tmp->path() / "run";
  fs::copy(k_fixtures / "run-none", dir, fs::copy_options::recursive);
  fs::copy(k_fixtures / "ops", tmp->path() / "ops", fs::copy_options::recursive);
  auto events = util::read_file(dir / "events.jsonl");
  ASSERT_TRUE(events);
  std::string damaged = "{not json\n" + *events;
  ASSERT_TRUE(util::write_file_atomic(dir / "events.jsonl", damaged));
  auto o = kope({"report", dir.string()});
  EXPECT_NE(o.code, 0);
  EXPECT_NE(o.err.find("events.jsonl:1: malformed event line"), std::string::npos) << o.err;
  // The report never writes into the run directory.
  auto after = util::read_file(dir / "events.jsonl");
  EXPECT_EQ(*after, damaged);
}

TEST(ReportCli, MovedOperatorFallsBackToResultsJson) {
  auto tmp = util::TempDir::create("kope-report-cli");
  ASSERT_TRUE(tmp);
  fs::path dir = tmp->path() / "run";
  fs::copy(k_fixtures / "run-none", dir, fs::copy_options::recursive);
  // No ops/ beside the copy: every op folder is gone; results.json describes them.
  auto with_results = kope({"report", run("run-none"), "--json"});
  ASSERT_EQ(with_results.code, 0);
  json ops = json::array();
  json listed = json::parse(with_results.out);
  for (const auto& r : listed["tables"]["ops"]["rows"]) {
    ops.push_back({{"name", r["op"]},
                   {"category", r["category"]},
                   {"level", r["level"]},
                   {"cases_total", r["cases_total"]},
                   {"best_speedup_vs_library", r["speedup_vs_library"]}});
  }
  auto bare = kope({"report", dir.string()});
  EXPECT_EQ(bare.code, 2);
  EXPECT_NE(bare.err.find("results.json does not describe it"), std::string::npos) << bare.err;
  json results = json::object();
  results["ops"] = ops;
  ASSERT_TRUE(util::write_file_atomic(dir / "results.json", results.dump()));
  auto o = kope({"report", dir.string(), "--json"});
  ASSERT_EQ(o.code, 0) << o.err;
  json j = json::parse(o.out);
  EXPECT_NEAR(j["tables"]["summary"]["rows"][0]["pass_rate"].get<double>(), 11.0 / 12.0, 1e-12);
  EXPECT_NE(j["notes"].dump().find("come from results.json"), std::string::npos);
}

TEST(ReportCli, MemorySection) {
  auto tmp = util::TempDir::create("kope-report-cli");
  ASSERT_TRUE(tmp);
  fs::path db = tmp->path() / "memory.db";
  {
    auto store = memory::open_store(db);
    ASSERT_TRUE(store) << store.error().message;
    memory::CaseRecord c;
    c.natural_key = "r/fx_scale/1";
    c.run_id = "r";
    c.task.op = "fx_scale";
    c.task.category = "elementwise";
    c.hardware.target = "x86_64-avx2-fma";
    c.toolchain.id = "g++ 12";
    c.toolchain.backend = "cpu";
    c.code = "extern \"C\" void kope_kernel() {}";
    c.verdict = eval::Verdict::correct;
    c.speedup_vs_reference = 4000.0;  // implausible for a first kernel: quarantined
    c.timings.push_back({0, 0.025, 0.001, 100.0, std::nullopt, false, 0.0, std::nullopt});
    ASSERT_TRUE((*store)->record_case(c));
    memory::LessonDelta d;
    d.lesson.title = "Vectorise the inner loop";
    d.lesson.text = "Use 8-wide AVX2 loads for contiguous rows.";
    d.lesson.scope.category = "elementwise";
    ASSERT_TRUE((*store)->apply(d));
  }
  auto o = kope({"report", run("run-none"), "--memory", db.string(), "--json"});
  ASSERT_EQ(o.code, 0) << o.err;
  json j = json::parse(o.out);
  ASSERT_EQ(j["tables"]["memory_lessons"]["rows"].size(), 1u);
  EXPECT_EQ(j["tables"]["memory_lessons"]["rows"][0]["title"], "Vectorise the inner loop");
  EXPECT_EQ(j["tables"]["memory_lessons"]["rows"][0]["scope"], "elementwise");
  ASSERT_EQ(j["tables"]["memory_quarantined"]["rows"].size(), 1u);
  EXPECT_EQ(j["tables"]["memory_quarantined"]["rows"][0]["op"], "fx_scale");
  auto missing = kope({"report", run("run-none"), "--memory", (tmp->path() / "nope.db").string()});
  EXPECT_EQ(missing.code, 2);
  EXPECT_NE(missing.err.find("--memory: "), std::string::npos) << missing.err;
  EXPECT_FALSE(fs::exists(tmp->path() / "nope.db"));
}

}  // namespace
}  // namespace kope
