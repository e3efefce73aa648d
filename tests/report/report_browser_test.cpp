// The HTML report opened in a real browser (headless Chromium): no console errors, every chart
// present and non-empty, the lineage view answers a real click, tables sort; a screenshot is
// kept as a test artifact in <build>/test-artifacts/report/. The run directories are written by
// the agent's own Run with its fakes (demo_runs.h). Skips, saying why, when chromium is absent
// (scripts/setup.sh installs it).
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "demo_runs.h"
#include "util/fs.h"
#include "util/strings.h"
#include "util/subprocess.h"

namespace kope {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const fs::path k_artifacts = fs::path(KOPE_BINARY_DIR) / "test-artifacts" / "report";

std::optional<fs::path> chromium() {
  for (const char* name : {"chromium", "chromium-browser", "google-chrome"}) {
    if (auto p = util::find_executable(name)) return p;
  }
  return std::nullopt;
}

struct Browser {
  int code = -1;
  std::string out, err;
};

// One headless Chromium call with a private profile; no network, no first-run work.
Browser chrome(const fs::path& exe, const fs::path& profile, std::vector<std::string> args,
               const std::string& url) {
  util::RunOptions o;
  o.spawn.argv = {exe.string(),
                  "--headless",
                  "--no-sandbox",
                  "--disable-gpu",
                  "--disable-background-networking",
                  "--disable-component-update",
                  "--disable-sync",
                  "--no-first-run",
                  "--disable-extensions",
                  "--user-data-dir=" + profile.string(),
                  "--enable-logging=stderr",
                  "--v=0"};
  for (auto& a : args) o.spawn.argv.push_back(std::move(a));
  o.spawn.argv.push_back(url);
  o.timeout = std::chrono::seconds(120);
  o.stdout_cap = 64 << 20;
  auto r = util::run(o);
  EXPECT_TRUE(r) << r.error().message;
  if (!r) return {};
  EXPECT_FALSE(r->timed_out) << "chromium did not finish within 120 s";
  return {r->status.exited ? r->status.code : -1, r->out, r->err};
}

std::string html_unescape(std::string s) {
  s = util::replace_all(std::move(s), "&lt;", "<");
  s = util::replace_all(std::move(s), "&gt;", ">");
  s = util::replace_all(std::move(s), "&quot;", "\"");
  s = util::replace_all(std::move(s), "&#39;", "'");
  return util::replace_all(std::move(s), "&amp;", "&");
}

// Console messages Chromium logged for the page (any at all is unexpected: the page logs none).
std::vector<std::string> console_lines(const std::string& err) {
  std::vector<std::string> out;
  for (const auto& l : util::split(err, '\n')) {
    if (l.find(":CONSOLE") != std::string::npos) out.push_back(l);
  }
  return out;
}

int kope_report(std::vector<std::string> args, std::string* out = nullptr) {
  util::RunOptions o;
  o.spawn.argv = {KOPE_EXE, "report"};
  for (auto& a : args) o.spawn.argv.push_back(std::move(a));
  o.timeout = std::chrono::seconds(120);
  o.stdout_cap = 64 << 20;
  auto r = util::run(o);
  EXPECT_TRUE(r) << r.error().message;
  if (!r) return -1;
  EXPECT_TRUE(r->status.success()) << r->err;
  if (out) *out = r->out;
  return r->status.exited ? r->status.code : -1;
}

// Opens `html` with #selftest and checks what the page recorded; saves a screenshot as `png`.
void check_in_browser(const fs::path& html, const fs::path& png,
                      const std::vector<std::string>& expected_charts) {
  auto exe = chromium();
  if (!exe)
    GTEST_SKIP() << "chromium is not installed (scripts/setup.sh installs it); " << html
                 << " was written but not opened";
  auto profile = util::TempDir::create("kope-chromium");
  ASSERT_TRUE(profile);
  std::string url = "file://" + fs::absolute(html).string();
  Browser dom = chrome(*exe, profile->path(), {"--virtual-time-budget=10000", "--dump-dom"},
                       url + "#selftest");
  ASSERT_EQ(dom.code, 0) << dom.err;
  EXPECT_TRUE(console_lines(dom.err).empty()) << util::join(console_lines(dom.err), "\n");
  const std::string open = "<pre id=\"kope-selftest\">";
  size_t a = dom.out.find(open);
  ASSERT_NE(a, std::string::npos) << "the self-test did not run (no result in the DOM)";
  size_t b = dom.out.find("</pre>", a);
  json r = json::parse(html_unescape(dom.out.substr(a + open.size(), b - a - open.size())), nullptr,
                       false);
  ASSERT_FALSE(r.is_discarded()) << dom.out.substr(a, 400);
  EXPECT_TRUE(r["errors"].empty()) << r["errors"].dump(2);
  EXPECT_TRUE(r["missing_charts"].empty()) << r["missing_charts"].dump();
  EXPECT_TRUE(r["empty_charts"].empty()) << r["empty_charts"].dump();
  for (const auto& name : expected_charts) {
    ASSERT_TRUE(r["charts"].contains(name)) << name;
    EXPECT_GT(r["charts"][name].get<int>(), 0) << name;
  }
  ASSERT_TRUE(r["lineage"].is_object()) << "no lineage node to click";
  EXPECT_TRUE(r["lineage"]["selected"].get<bool>());
  EXPECT_TRUE(r["lineage"]["changed"].get<bool>());
  std::string detail = r["lineage"]["detail"].get<std::string>();
  EXPECT_NE(detail.find("Attempt "), std::string::npos) << detail;
  EXPECT_NE(detail.find("Strategy"), std::string::npos) << detail;
  EXPECT_NE(detail.find("Diff to "), std::string::npos) << detail;
  EXPECT_TRUE(r["sort"]["ascending"].get<bool>()) << r["sort"].dump();
  EXPECT_GT(r["sort"]["values"].get<int>(), 0);

  std::error_code ec;
  fs::remove(png, ec);
  Browser shot =
      chrome(*exe, profile->path(),
             {"--screenshot=" + png.string(), "--window-size=1400,2000", "--hide-scrollbars"}, url);
  ASSERT_EQ(shot.code, 0) << shot.err;
  EXPECT_TRUE(console_lines(shot.err).empty()) << util::join(console_lines(shot.err), "\n");
  auto bytes = util::read_file(png);
  ASSERT_TRUE(bytes) << "no screenshot at " << png;
  EXPECT_TRUE(util::starts_with(*bytes, "\x89PNG")) << png;
  EXPECT_GT(bytes->size(), 20000u) << "the screenshot looks blank";
}

TEST(ReportBrowser, AblationOfThreeContextModes) {
  std::error_code ec;
  fs::remove_all(k_artifacts / "runs", ec);
  ASSERT_TRUE(util::make_dirs(k_artifacts));
  auto runs = report::testing::make_demo_runs(k_artifacts / "runs", {"none", "passive", "active"});
  ASSERT_EQ(runs.size(), 3u);
  fs::path html = k_artifacts / "report.html";
  fs::path memory = report::testing::demo_memory(k_artifacts / "runs");
  ASSERT_EQ(kope_report({runs[0].dir.string(), runs[1].dir.string(), runs[2].dir.string(), "--html",
                         html.string(), "--memory", memory.string()}),
            0);
  // The report's own JSON names the charts the page must hold.
  std::string out;
  ASSERT_EQ(kope_report(
                {runs[0].dir.string(), runs[1].dir.string(), runs[2].dir.string(), "--json"}, &out),
            0);
  json j = json::parse(out);
  EXPECT_EQ(j["set"]["ops"].size(), 12u);
  EXPECT_EQ(j["tables"]["summary"]["rows"].size(), 3u);
  EXPECT_EQ(j["tables"]["comparison"]["rows"][0]["baseline"], "none");
  auto page = util::read_file(html);
  ASSERT_TRUE(page);
  EXPECT_NE(page->find("Memory: lessons by scope"), std::string::npos);
  check_in_browser(html, k_artifacts / "report.png",
                   {"speedup", "fast_p", "stream", "tiers", "iterations", "lineage", "comparison-1",
                    "comparison-2"});
}

TEST(ReportBrowser, SingleRun) {
  ASSERT_TRUE(util::make_dirs(k_artifacts));
  auto tmp = util::TempDir::create("kope-report-browser");
  ASSERT_TRUE(tmp);
  auto runs = report::testing::make_demo_runs(tmp->path(), {"active"}, 4);
  ASSERT_EQ(runs.size(), 1u);
  fs::path html = k_artifacts / "report-single.html";
  ASSERT_EQ(kope_report({runs[0].dir.string(), "--html", html.string()}), 0);
  check_in_browser(html, k_artifacts / "report-single.png",
                   {"speedup", "fast_p", "stream", "tiers", "iterations", "lineage"});
}

}  // namespace
}  // namespace kope
