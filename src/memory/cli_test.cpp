// Drives `kope memory ...` as a user would: exit codes, JSON keys, human output.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "memory/test_util.h"
#include "util/subprocess.h"

namespace kope::memory {
namespace {

using namespace testing;
using nlohmann::json;

struct Out {
  int code = -1;
  std::string out, err;
  json j() const { return json::parse(out); }
};

Out kope(std::vector<std::string> args, const std::vector<std::string>& extra_env = {}) {
  util::RunOptions o;
  o.spawn.argv = {KOPE_EXE};
  o.spawn.argv.insert(o.spawn.argv.end(), args.begin(), args.end());
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e) {
    if (std::string_view(*e).starts_with("KOPE_MEMORY=")) continue;
    env.emplace_back(*e);
  }
  env.insert(env.end(), extra_env.begin(), extra_env.end());
  o.spawn.env = env;
  o.timeout = std::chrono::seconds(60);
  auto r = util::run(o);
  EXPECT_TRUE(r);
  if (!r) return {};
  return {r->status.exited ? r->status.code : 128 + r->status.signal, r->out, r->err};
}

class MemoryCli : public ::testing::Test {
 protected:
  void SetUp() override {
    auto d = util::TempDir::create("kope-memory-cli");
    ASSERT_TRUE(d);
    dir = std::make_unique<util::TempDir>(std::move(*d));
    db = (dir->path() / "m.db").string();
    auto s = open_store(db);
    ASSERT_TRUE(s);
    auto failed = (*s)->record_case(make_case("run-1/softmax/0", "softmax", 0));
    ASSERT_TRUE(failed);
    auto fixed = (*s)->record_case(make_case("run-1/softmax/1", "softmax", 1.5, k_native, *failed));
    ASSERT_TRUE(fixed);
    fixed_id = *fixed;
    auto jump = (*s)->record_case(make_case("run-1/softmax/2", "softmax", 40.0, k_native, *fixed));
    ASSERT_TRUE(jump);
    jump_id = *jump;
    ASSERT_TRUE((*s)->record_case(make_case("run-1/layernorm/0", "layernorm", 2.0, k_foreign)));
    LessonDelta d2;
    d2.lesson.kind = LessonKind::fix;
    d2.lesson.title = "Declare helpers before kope_kernel";
    d2.lesson.text = "An undeclared helper is a compile error; define it first";
    d2.lesson.error_signature = "compile_error: error: 'X' was not declared in this scope";
    d2.lesson.scope.category = "normalization";
    d2.source_case = fixed_id;
    auto lid = (*s)->apply(d2);
    ASSERT_TRUE(lid);
    lesson_id = *lid;
  }

  std::unique_ptr<util::TempDir> dir;
  std::string db;
  int64_t fixed_id = 0, jump_id = 0;
  std::string lesson_id;
};

TEST_F(MemoryCli, StatsJsonHasTheContractKeys) {
  Out r = kope({"memory", "stats", "--json", "--memory", db});
  ASSERT_EQ(r.code, 0) << r.err;
  json j = r.j();
  EXPECT_EQ(j["tasks"], 2);
  EXPECT_EQ(j["cases"], 4);
  EXPECT_EQ(j["lessons"], 1);
  EXPECT_EQ(j["targets"], 2);
  EXPECT_EQ(j["quarantined"], 1);
  EXPECT_EQ(j["by_verdict"]["compile_error"], 1);
  // KOPE_MEMORY selects the database; --memory may also come before the subcommand.
  Out env = kope({"memory", "stats", "--json"}, {"KOPE_MEMORY=" + db});
  ASSERT_EQ(env.code, 0) << env.err;
  EXPECT_EQ(env.j()["cases"], 4);
  Out before = kope({"memory", "--memory", db, "--json", "stats"});
  ASSERT_EQ(before.code, 0) << before.err;
  EXPECT_EQ(before.j()["cases"], 4);
  // A fresh database reports zeros.
  Out fresh = kope({"memory", "stats", "--json", "--memory", (dir->path() / "fresh.db").string()});
  ASSERT_EQ(fresh.code, 0) << fresh.err;
  EXPECT_EQ(fresh.j()["tasks"], 0);
  EXPECT_EQ(fresh.j()["cases"], 0);
  EXPECT_EQ(fresh.j()["lessons"], 0);
  Out human = kope({"memory", "stats", "--memory", db});
  ASSERT_EQ(human.code, 0);
  EXPECT_NE(human.out.find("cases       4"), std::string::npos) << human.out;
}

TEST_F(MemoryCli, ListingsShowAndJournal) {
  Out cases = kope({"memory", "cases", "--json", "--memory", db, "--op", "softmax"});
  ASSERT_EQ(cases.code, 0) << cases.err;
  ASSERT_EQ(cases.j().size(), 3u);
  EXPECT_EQ(cases.j()[0]["natural_key"], "run-1/softmax/2");
  EXPECT_EQ(cases.j()[0]["quarantine_status"], "quarantined");
  EXPECT_FALSE(cases.j()[0].contains("code"));
  Out q = kope({"memory", "cases", "--json", "--memory", db, "--quarantined"});
  ASSERT_EQ(q.code, 0);
  EXPECT_EQ(q.j().size(), 1u);
  Out table = kope({"memory", "cases", "--memory", db});
  ASSERT_EQ(table.code, 0);
  EXPECT_NE(table.out.find("verdict"), std::string::npos);
  EXPECT_NE(table.out.find("4 cases"), std::string::npos);
  Out bad = kope({"memory", "cases", "--memory", db, "--stage", "sideways"});
  EXPECT_EQ(bad.code, 2);

  Out lessons = kope({"memory", "lessons", "--json", "--memory", db});
  ASSERT_EQ(lessons.code, 0) << lessons.err;
  ASSERT_EQ(lessons.j().size(), 1u);
  EXPECT_EQ(lessons.j()[0]["id"], lesson_id);
  EXPECT_EQ(kope({"memory", "lessons", "--json", "--memory", db, "--search", "undeclared helper"}).j().size(), 1u);
  EXPECT_EQ(kope({"memory", "lessons", "--json", "--memory", db, "--kind", "recipe"}).j().size(), 0u);

  Out show = kope({"memory", "show", std::to_string(fixed_id), "--json", "--memory", db});
  ASSERT_EQ(show.code, 0) << show.err;
  EXPECT_EQ(show.j()["natural_key"], "run-1/softmax/1");
  EXPECT_FALSE(show.j()["code"].get<std::string>().empty());
  Out by_key = kope({"memory", "show", "run-1/softmax/1", "--memory", db, "--code"});
  ASSERT_EQ(by_key.code, 0);
  EXPECT_NE(by_key.out.find("kope_kernel"), std::string::npos);
  Out lesson = kope({"memory", "show", lesson_id, "--json", "--memory", db});
  ASSERT_EQ(lesson.code, 0) << lesson.err;
  EXPECT_EQ(lesson.j()["history"][0]["op"], "add");
  Out missing = kope({"memory", "show", "99999", "--memory", db});
  EXPECT_EQ(missing.code, 2);
  EXPECT_NE(missing.err.find("no case"), std::string::npos);

  Out journal = kope({"memory", "journal", std::to_string(fixed_id), "--memory", db});
  ASSERT_EQ(journal.code, 0);
  EXPECT_NE(journal.out.find("strategy: attempt run-1/softmax/1"), std::string::npos);
  EXPECT_EQ(kope({"memory", "journal", std::to_string(fixed_id), "--json", "--memory", db}).j()["case"], fixed_id);

  Out lineage = kope({"memory", "lineage", "softmax", "--json", "--memory", db});
  ASSERT_EQ(lineage.code, 0);
  ASSERT_EQ(lineage.j().size(), 3u);
  EXPECT_EQ(lineage.j()[2]["depth"], 2);
  Out tree = kope({"memory", "lineage", "softmax", "--memory", db});
  EXPECT_NE(tree.out.find("    #" + std::to_string(jump_id)), std::string::npos) << tree.out;

  Out retrieve = kope({"memory", "retrieve", "softmax", "--json", "--memory", db, "--target", k_native, "--stage",
                       "repair", "--error", "compile_error: error: 'X' was not declared in this scope"});
  ASSERT_EQ(retrieve.code, 0) << retrieve.err;
  ASSERT_GE(retrieve.j().size(), 2u);
  EXPECT_TRUE(retrieve.j()[0].contains("score_parts"));
  EXPECT_TRUE(retrieve.j()[0].contains("tokens"));
}

TEST_F(MemoryCli, ExportImportMergeAndDot) {
  std::string file = (dir->path() / "export.json").string();
  Out ex = kope({"memory", "export", "--memory", db, "-o", file});
  ASSERT_EQ(ex.code, 0) << ex.err;
  // The provenance names the targets of the cases written, though no run is named.
  auto text = util::read_file(file);
  ASSERT_TRUE(text);
  EXPECT_EQ(json::parse(*text)["provenance"]["targets"], json::array({k_foreign, k_native})) << *text;
  Out one_op = kope({"memory", "export", "--op", "layernorm", "--memory", db});
  ASSERT_EQ(one_op.code, 0) << one_op.err;
  EXPECT_EQ(one_op.j()["provenance"]["targets"], json::array({k_foreign})) << one_op.out;
  std::string other = (dir->path() / "other.db").string();
  Out im = kope({"memory", "import", file, "--json", "--memory", other});
  ASSERT_EQ(im.code, 0) << im.err;
  EXPECT_EQ(im.j()["cases_added"], 4);
  EXPECT_EQ(im.j()["lessons_added"], 1);
  Out again = kope({"memory", "import", file, "--json", "--memory", other});
  ASSERT_EQ(again.code, 0);
  EXPECT_EQ(again.j()["cases_added"], 0);
  EXPECT_EQ(again.j()["cases_skipped"], 4);
  std::string third = (dir->path() / "third.db").string();
  Out merge = kope({"memory", "merge", db, "--foreign", "--json", "--memory", third});
  ASSERT_EQ(merge.code, 0) << merge.err;
  EXPECT_EQ(merge.j()["cases_added"], 4);
  EXPECT_EQ(kope({"memory", "stats", "--json", "--memory", third}).j()["foreign_cases"], 4);
  Out not_export = kope({"memory", "import", db, "--memory", other});
  EXPECT_EQ(not_export.code, 2);
  EXPECT_NE(not_export.err.find("not a JSON document"), std::string::npos) << not_export.err;
  EXPECT_EQ(kope({"memory", "import", (dir->path() / "nope.json").string(), "--memory", other}).code, 2);

  std::string dot_file = (dir->path() / "m.dot").string();
  Out dot = kope({"memory", "export", "--format", "dot", "--memory", db, "-o", dot_file});
  ASSERT_EQ(dot.code, 0) << dot.err;
  auto dot_exe = util::find_executable("dot");
  if (!dot_exe) GTEST_SKIP() << "graphviz not installed";
  util::RunOptions o;
  o.spawn.argv = {dot_exe->string(), "-Tsvg", dot_file};
  o.timeout = std::chrono::seconds(30);
  auto r = util::run(o);
  ASSERT_TRUE(r);
  EXPECT_TRUE(r->status.success()) << r->err;
  EXPECT_NE(r->out.find("<svg"), std::string::npos);
}

TEST_F(MemoryCli, CheckVerifyAndDamagedFiles) {
  Out ok = kope({"memory", "check", "--memory", db});
  EXPECT_EQ(ok.code, 0) << ok.out << ok.err;
  EXPECT_NE(ok.out.find("ok: 4 cases"), std::string::npos);
  EXPECT_EQ(kope({"memory", "check", "--json", "--memory", db}).j()["ok"], true);

  Out verify = kope({"memory", "verify", std::to_string(jump_id), "--note", "re-timed", "--json", "--memory", db});
  ASSERT_EQ(verify.code, 0) << verify.err;
  EXPECT_EQ(verify.j()["quarantine_status"], "verified");
  EXPECT_EQ(kope({"memory", "verify", std::to_string(jump_id), "--memory", db}).code, 2);  // not quarantined now

  // Break an invariant behind kope's back: check lists it and exits 1.
  {
    auto db_handle = Db::open(db);
    ASSERT_TRUE(db_handle);
    ASSERT_TRUE((*db_handle)->exec("UPDATE case_derived SET downstream = downstream + 5 WHERE case_id = 1"));
  }
  Out broken = kope({"memory", "check", "--memory", db});
  EXPECT_EQ(broken.code, 1);
  EXPECT_NE(broken.out.find("d(v)"), std::string::npos) << broken.out;
  Out broken_json = kope({"memory", "check", "--json", "--memory", db});
  EXPECT_EQ(broken_json.code, 1);
  EXPECT_EQ(broken_json.j()["ok"], false);

  std::string junk = (dir->path() / "junk.db").string();
  ASSERT_TRUE(util::write_file_atomic(junk, std::string(5000, 'x')));
  Out corrupt = kope({"memory", "stats", "--memory", junk});
  EXPECT_EQ(corrupt.code, 1);
  EXPECT_NE(corrupt.err.find(junk), std::string::npos) << corrupt.err;
  EXPECT_NE(corrupt.err.find("not an SQLite database"), std::string::npos) << corrupt.err;
}

}  // namespace
}  // namespace kope::memory
