#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "memory/codec.h"
#include "memory/starter.h"
#include "memory/test_util.h"
#include "util/hash.h"
#include "util/subprocess.h"

namespace kope::memory {
namespace {

using namespace testing;

// A small history: a failed draft, its repair, a refinement, on two targets, plus lessons.
void populate(Database& s, const std::string& prefix) {
  auto failed = s.record_case(make_case(prefix + "/0", "softmax", 0));
  ASSERT_TRUE(failed);
  auto fixed = s.record_case(make_case(prefix + "/1", "softmax", 1.4, k_native, *failed));
  ASSERT_TRUE(fixed);
  ASSERT_TRUE(s.record_case(make_case(prefix + "/2", "softmax", 2.1, k_native, *fixed)));
  ASSERT_TRUE(s.record_case(make_case(prefix + "/3", "layernorm", 1.9, k_foreign)));
  LessonDelta d;
  d.lesson.kind = LessonKind::fix;
  d.lesson.title = prefix + " declare helpers first";
  d.lesson.text = "Define helper functions above kope_kernel so they are declared";
  d.lesson.error_signature = "compile_error: error: 'X' was not declared in this scope";
  d.source_case = *fixed;
  auto lid = s.apply(d);
  ASSERT_TRUE(lid);
  LessonDelta up;
  up.op = LessonDelta::Op::upvote;
  up.lesson_id = *lid;
  ASSERT_TRUE(s.apply(up));
}

std::string export_text(Database& s, const ExportOptions& o = {}) {
  std::ostringstream out;
  auto r = s.export_json(out, o);
  EXPECT_TRUE(r) << (r ? "" : r.error().message);
  return out.str();
}

class ExchangeTest : public StoreKindTest {};
KOPE_STORE_KINDS(ExchangeTest);

TEST_P(ExchangeTest, ExportImportRoundTripIsIdempotentAndKeepsProvenance) {
  auto a = temp_store("a.db");
  populate(*a.store, "run-a");
  std::string dump = export_text(*a.store);
  auto doc = nlohmann::json::parse(dump);
  EXPECT_EQ(doc["format"], "kope-memory");
  EXPECT_EQ(doc["cases"].size(), 4u);
  EXPECT_EQ(doc["lessons"].size(), 1u);
  EXPECT_EQ(doc["cases"][1]["parent_key"], "run-a/0");
  EXPECT_EQ(doc["lessons"][0]["history"].size(), 2u);

  auto b = temp_store("b.db");
  auto report = b.store->import_json(dump, {false, "a.json"});
  ASSERT_TRUE(report) << report.error().message;
  EXPECT_EQ(report->cases_added, 4);
  EXPECT_EQ(report->lessons_added, 1);
  EXPECT_EQ(report->origin, a.store->stats()->instance);
  auto again = b.store->import_json(dump, {false, "a.json"});
  ASSERT_TRUE(again);
  EXPECT_EQ(again->cases_added, 0);
  EXPECT_EQ(again->cases_skipped, 4);
  EXPECT_EQ(again->lessons_added, 0);
  EXPECT_EQ(again->lessons_skipped, 1);
  EXPECT_EQ(b.store->stats()->cases, 4);
  EXPECT_EQ(b.store->stats()->lessons, 1);

  auto orig = *a.store->find_case("run-a/2");
  auto copy = *b.store->find_case("run-a/2");
  ASSERT_TRUE(orig && copy);
  EXPECT_EQ(copy->code, orig->code);
  EXPECT_EQ(copy->code_hash, orig->code_hash);
  EXPECT_EQ(copy->origin, orig->origin);
  EXPECT_EQ(copy->created_at, orig->created_at);
  EXPECT_DOUBLE_EQ(copy->ratio, orig->ratio);
  EXPECT_EQ(copy->outcome, orig->outcome);
  EXPECT_NEAR((*b.store->find_case("run-a/0"))->downstream, (*a.store->find_case("run-a/0"))->downstream, 1e-12);
  auto parent = *b.store->get_case(*copy->parent_id);
  EXPECT_EQ(parent->natural_key, "run-a/1");
  auto lessons = b.store->find_lessons({});
  ASSERT_TRUE(lessons && lessons->size() == 1);
  EXPECT_EQ((*lessons)[0].id, doc["lessons"][0]["id"]);
  EXPECT_EQ((*lessons)[0].helpful, 1);
  EXPECT_EQ((*lessons)[0].source_cases, std::vector<int64_t>{parent->id});
  auto hist = b.store->lesson_history((*lessons)[0].id);
  ASSERT_TRUE(hist && hist->size() == 1);
  EXPECT_NE(hist->front().reason.find("imported from"), std::string::npos);
  EXPECT_TRUE(b.store->check()->ok());
}

// task.signature_shape is an optional field of an exported task: written when the task has a
// typed shape, read back by import; a file without it (an older kope's) imports as before.
TEST_P(ExchangeTest, TheTypedSignatureShapeTravelsAsAnOptionalTaskField) {
  auto a = temp_store("a.db");
  CaseRecord typed = make_case("run-a/silu_bf16/0", "silu_bf16", 1.5);
  typed.task.signature_shape = *spec::SignatureShape::parse("in:bf16,out:bf16,dim,dim");
  ASSERT_TRUE(a.store->record_case(typed));
  ASSERT_TRUE(a.store->record_case(make_case("run-a/softmax/0", "softmax", 2.0)));
  std::string dump = export_text(*a.store);
  auto doc = nlohmann::json::parse(dump);
  ASSERT_EQ(doc["cases"].size(), 2u);
  EXPECT_EQ(doc["cases"][0]["task"]["signature_shape"], "in:bf16,out:bf16,dim,dim");
  EXPECT_FALSE(doc["cases"][1]["task"].contains("signature_shape"));

  auto b = temp_store("b.db");
  ASSERT_TRUE(b.store->import_json(dump, {false, "a.json"}));
  auto copy = *b.store->find_case("run-a/silu_bf16/0");
  ASSERT_TRUE(copy && copy->task.signature_shape);
  EXPECT_EQ(copy->task.signature_shape->str(), "in:bf16,out:bf16,dim,dim");
  auto plain = *b.store->find_case("run-a/softmax/0");
  ASSERT_TRUE(plain);
  EXPECT_FALSE(plain->task.signature_shape);
  EXPECT_EQ(task_shape(plain->task).str(), "in:f32,out:f32,dim,dim");

  // A shape kope cannot read is named, and nothing of the file is imported.
  auto c = temp_store("c.db");
  for (auto [value, says] : std::initializer_list<std::pair<const char*, const char*>>{
           {R"("in:f32,out:float,dim")", "unknown dtype 'float'"}, {"42", "is not a string"}}) {
    std::string bad = fmt::format(R"({{"format": "kope-memory", "version": 1, "origin": "abc", "cases": [
      {{"natural_key": "k1", "stage": "draft", "verdict": "correct", "task": {{"op": "softmax", "signature_shape": {}}},
        "hardware": {{"target": "t"}}}}]}})", value);
    auto r = c.store->import_json(bad, {});
    ASSERT_FALSE(r) << value;
    EXPECT_EQ(r.error().kind, ErrorKind::config);
    EXPECT_NE(r.error().message.find("case k1: task"), std::string::npos) << r.error().message;
    EXPECT_NE(r.error().message.find(says), std::string::npos) << r.error().message;
  }
  EXPECT_EQ(c.store->stats()->cases, 0);
}

TEST_P(ExchangeTest, ForeignImportsAreFeasibilityNotSpeed) {
  auto a = temp_store("a.db");
  ASSERT_TRUE(a.store->record_case(make_case("x/0", "softmax", 9.0)));  // same target string
  auto b = temp_store("b.db");
  ASSERT_TRUE(b.store->record_case(make_case("y/0", "softmax", 1.5)));
  auto report = b.store->import_json(export_text(*a.store), {true, "other-machine.json"});
  ASSERT_TRUE(report);
  auto c = *b.store->find_case("x/0");
  ASSERT_TRUE(c);
  EXPECT_TRUE(c->foreign_origin);
  auto best = b.store->best_cases("softmax", k_native, 5);
  ASSERT_TRUE(best && best->size() == 1);
  EXPECT_EQ((*best)[0].natural_key, "y/0");
  RetrievalQuery q;
  q.task = task("softmax");
  q.target = k_native;
  q.stage = Stage::refine;
  auto items = b.store->retrieve(q);
  ASSERT_TRUE(items);
  for (const auto& it : *items) {
    if (it.id == "case:" + std::to_string(c->id)) {
      EXPECT_TRUE(it.foreign);
      EXPECT_EQ(it.score_parts.count("speed"), 0u);
    }
    EXPECT_NE(it.id, "kernel:" + std::to_string(c->id));
  }
  CaseFilter f;
  f.foreign_origin = true;
  EXPECT_EQ(b.store->cases(f)->size(), 1u);
  EXPECT_EQ(b.store->stats()->foreign_cases, 1);
}

TEST_P(ExchangeTest, CollidingKeysFromAnotherDatabaseAreKeptUnderANewKey) {
  auto a = temp_store("a.db");
  auto b = temp_store("b.db");
  ASSERT_TRUE(a.store->record_case(make_case("run-1/softmax/0", "softmax", 1.1)));
  ASSERT_TRUE(b.store->record_case(make_case("run-1/softmax/0", "softmax", 2.2)));
  std::string dump = export_text(*a.store);
  auto r = b.store->import_json(dump, {});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->cases_renamed, 1);
  EXPECT_EQ(b.store->stats()->cases, 2);
  auto r2 = b.store->import_json(dump, {});
  ASSERT_TRUE(r2);
  EXPECT_EQ(r2->cases_added, 0);
  EXPECT_EQ(b.store->stats()->cases, 2);
}

// An export's review states come back under their names; a name this kope does not know imports
// as none (as it always did), and a case that names none is assessed afresh.
TEST_P(ExchangeTest, ImportedQuarantineStatesKeepTheirNames) {
  auto a = temp_store("a.db");
  auto root = a.store->record_case(make_case("root", "softmax", 2.0));
  ASSERT_TRUE(root);
  for (const char* key : {"quarantined", "verified", "refuted", "bogus", "unnamed"}) {
    ASSERT_TRUE(a.store->record_case(make_case(key, "softmax", 40.0, k_native, *root)));  // 20x: quarantined
  }
  auto doc = nlohmann::json::parse(export_text(*a.store));
  for (auto& c : doc["cases"]) {
    std::string key = c["natural_key"];
    if (key != "root") c["quarantine_status"] = key == "unnamed" ? "" : key;
  }
  auto b = temp_store("b.db");
  auto r = b.store->import_json(doc.dump(), {});
  ASSERT_TRUE(r) << r.error().message;
  auto status = [&](const std::string& key) {
    auto c = b.store->find_case(key);
    EXPECT_TRUE(c && *c) << key;
    return c && *c ? std::pair{quarantine_status_name((*c)->quarantine_status), (*c)->quarantined}
                   : std::pair{std::string_view("?"), false};
  };
  EXPECT_EQ(status("root"), std::pair(std::string_view(""), false));
  EXPECT_EQ(status("quarantined"), std::pair(std::string_view("quarantined"), true));
  EXPECT_EQ(status("verified"), std::pair(std::string_view("verified"), false));
  EXPECT_EQ(status("refuted"), std::pair(std::string_view("refuted"), true));
  EXPECT_EQ(status("bogus"), std::pair(std::string_view(""), false));
  EXPECT_EQ(status("unnamed"), std::pair(std::string_view("quarantined"), true));
}

TEST(ExchangeFile, MergeReadsAnotherDatabaseWithoutChangingIt) {
  auto a = temp_store("a.db");
  auto b = temp_store("b.db");
  populate(*a.store, "run-a");
  populate(*b.store, "run-b");  // its lesson has the same words as a's: the same content-addressed id
  a.store.reset();              // closed: checkpointed into the main file
  auto before = util::read_file(a.path);
  ASSERT_TRUE(before);
  auto r = b.store->merge_from(a.path, {});
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->cases_added, 4);
  EXPECT_EQ(r->lessons_skipped, 1);
  EXPECT_EQ(b.store->stats()->lessons, 1);
  auto lessons = b.store->find_lessons({});
  ASSERT_TRUE(lessons && lessons->size() == 1);
  EXPECT_EQ((*lessons)[0].source_cases.size(), 2u);  // provenance from both databases
  auto r2 = b.store->merge_from(a.path, {});
  ASSERT_TRUE(r2);
  EXPECT_EQ(r2->cases_added, 0);
  EXPECT_EQ(r2->lessons_added + r2->lessons_merged, 0);
  EXPECT_EQ(b.store->lesson_history((*lessons)[0].id)->size(), 3u);  // add, upvote, provenance: not again
  EXPECT_EQ(b.store->stats()->cases, 8);
  auto after = util::read_file(a.path);
  ASSERT_TRUE(after);
  EXPECT_EQ(util::sha256_hex(*before), util::sha256_hex(*after));
  auto check = b.store->check();
  ASSERT_TRUE(check) << check.error().message;
  EXPECT_TRUE(check->ok()) << check->problems.front();
  EXPECT_EQ(b.store->merge_from(b.path, {}).error().kind, ErrorKind::usage);
  EXPECT_EQ(b.store->merge_from(b.dir.path() / "missing.db", {}).error().kind, ErrorKind::not_found);
}

// Between the two kinds, both ways: an SQLite file merged into a PostgreSQL store and that store
// merged back into a fresh SQLite file, export/import too; every step idempotent.
TEST(ExchangeKinds, MergeAndImportBetweenSqliteAndPostgresBothWays) {
  std::string why;
  if (!test_postgres_url(&why)) GTEST_SKIP() << why;
  auto file = temp_store("a.db");
  populate(*file.store, "run-a");
  auto server = temp_store("memory.db", StoreKind::postgres);
  ASSERT_TRUE(server.store);
  populate(*server.store, "run-b");
  auto in = server.store->merge_from(file.path, {});
  ASSERT_TRUE(in) << in.error().message;
  EXPECT_EQ(in->cases_added, 4);
  auto in_again = server.store->merge_from(file.path, {});
  ASSERT_TRUE(in_again);
  EXPECT_EQ(in_again->cases_added, 0);
  EXPECT_EQ(server.store->stats()->cases, 8);

  auto back = temp_store("back.db");
  auto out = back.store->merge_from(server.path, {});
  ASSERT_TRUE(out) << out.error().message;
  EXPECT_EQ(out->cases_added, 8);
  EXPECT_EQ(back.store->merge_from(server.path, {})->cases_added, 0);
  auto imported = back.store->import_json(export_text(*server.store), {});
  ASSERT_TRUE(imported);
  EXPECT_EQ(imported->cases_added, 0);
  EXPECT_EQ(back.store->stats()->cases, 8);
  EXPECT_EQ(back.store->stats()->lessons, server.store->stats()->lessons);
  auto best_here = back.store->best_cases("softmax", k_native, 10);
  auto best_there = server.store->best_cases("softmax", k_native, 10);
  ASSERT_TRUE(best_here && best_there);
  ASSERT_EQ(best_here->size(), best_there->size());
  for (size_t i = 0; i < best_here->size(); ++i) {
    EXPECT_EQ((*best_here)[i].natural_key, (*best_there)[i].natural_key);
    EXPECT_EQ((*best_here)[i].code, (*best_there)[i].code);
    EXPECT_NEAR((*best_here)[i].downstream, (*best_there)[i].downstream, 1e-12);
  }
  for (Database* s : {server.store.get(), back.store.get()}) {
    auto check = s->check();
    ASSERT_TRUE(check) << check.error().message;
    EXPECT_TRUE(check->ok()) << check->problems.front();
  }
  EXPECT_EQ(server.store->merge_from(server.path, {}).error().kind, ErrorKind::usage);
}

// The ablation's copies: the same cases, ids and lessons, while the original stays open and
// unchanged, and writes to the copy never reach it.
TEST(ExchangeFile, CopyDatabaseIsASnapshotIndependentOfTheOriginal) {
  auto a = temp_store("a.db");
  populate(*a.store, "run-a");
  std::filesystem::path copy = a.dir.path() / "copy.db";
  ASSERT_TRUE(copy_database(a.path, copy));
  {
    auto c = open_store(copy);
    ASSERT_TRUE(c) << c.error().message;
    EXPECT_EQ((*c)->stats()->cases, 4);
    EXPECT_EQ((*c)->stats()->lessons, 1);
    EXPECT_EQ((*(*c)->find_lessons({}))[0].id, (*a.store->find_lessons({}))[0].id);
    EXPECT_EQ((*(*c)->find_case("run-a/2"))->id, (*a.store->find_case("run-a/2"))->id);
    ASSERT_TRUE((*c)->record_case(make_case("copy/1", "relu", 1.2)));
    EXPECT_EQ((*c)->stats()->cases, 5);
  }
  EXPECT_EQ(a.store->stats()->cases, 4);
  ASSERT_TRUE(copy_database(a.path, copy));  // replaces the earlier copy
  EXPECT_EQ((*open_store(copy))->stats()->cases, 4);
  EXPECT_EQ(copy_database(a.dir.path() / "missing.db", copy).error().kind, ErrorKind::not_found);
}

TEST_P(ExchangeTest, RejectsDocumentsThatAreNotExports) {
  auto t = temp_store();
  EXPECT_EQ(t.store->import_json("{not json", {}).error().kind, ErrorKind::config);
  EXPECT_EQ(t.store->import_json(R"({"format": "something-else"})", {}).error().kind, ErrorKind::config);
  EXPECT_EQ(t.store->import_json(R"({"format": "kope-memory", "version": 99, "origin": "x"})", {}).error().kind,
            ErrorKind::config);
  // A broken case aborts the whole import: nothing half-imported.
  std::string bad = R"({"format": "kope-memory", "version": 1, "origin": "abc", "cases": [
    {"natural_key": "k1", "stage": "draft", "verdict": "correct", "task": {"op": "softmax"}, "hardware": {"target": "t"}},
    {"natural_key": "k2", "stage": "sideways", "verdict": "correct"}]})";
  auto r = t.store->import_json(bad, {});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().kind, ErrorKind::config);
  EXPECT_EQ(t.store->stats()->cases, 0);
  // A verdict kope does not know is named, with the ones it does.
  std::string unknown = R"({"format": "kope-memory", "version": 1, "origin": "abc", "cases": [
    {"natural_key": "k3", "stage": "draft", "verdict": "mostly_correct", "task": {"op": "softmax"}, "hardware": {"target": "t"}}]})";
  auto u = t.store->import_json(unknown, {});
  ASSERT_FALSE(u);
  EXPECT_EQ(u.error().kind, ErrorKind::usage);
  EXPECT_NE(u.error().message.find("unknown verdict 'mostly_correct' (expected one of correct, wrong_result"),
            std::string::npos) << u.error().message;
  EXPECT_EQ(t.store->stats()->cases, 0);
}

TEST_P(ExchangeTest, DotExportRendersWithGraphviz) {
  auto t = temp_store();
  populate(*t.store, "run-a");
  ASSERT_TRUE(t.store->verify_case(1, true, "").error().kind == ErrorKind::usage);  // not quarantined
  std::ostringstream out;
  ASSERT_TRUE(t.store->export_dot(out, {}));
  std::string dot = out.str();
  EXPECT_NE(dot.find("digraph kope_memory"), std::string::npos);
  EXPECT_NE(dot.find("c1 -> c2"), std::string::npos);
  EXPECT_NE(dot.find("shape=note"), std::string::npos);
  auto dot_exe = util::find_executable("dot");
  if (!dot_exe) GTEST_SKIP() << "graphviz `dot` not installed";
  auto file = t.dir.path() / "m.dot";
  ASSERT_TRUE(util::write_file_atomic(file, dot));
  util::RunOptions o;
  o.spawn.argv = {dot_exe->string(), "-Tsvg", file.string()};
  o.timeout = std::chrono::seconds(30);
  auto r = util::run(o);
  ASSERT_TRUE(r);
  EXPECT_TRUE(r->status.success()) << r->err;
  EXPECT_NE(r->out.find("<svg"), std::string::npos);
}

}  // namespace
}  // namespace kope::memory

namespace kope::memory {
namespace {

using namespace testing;

TEST_P(ExchangeTest, ProvenanceTravelsWithTheExportAndIsListedWithTheImport) {
  auto a = temp_store("prov-a.db");
  populate(*a.store, "run-p");
  ExportOptions o;
  o.provenance = R"({"kope_version": "9.9", "model": "m", "runs": ["r1"]})";
  std::string dump = export_text(*a.store, o);
  auto doc = nlohmann::json::parse(dump);
  EXPECT_EQ(doc["provenance"]["model"], "m");

  ExportOptions bad;
  bad.provenance = "[1, 2]";
  std::ostringstream sink;
  auto refused = a.store->export_json(sink, bad);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().kind, ErrorKind::usage);

  auto b = temp_store("prov-b.db");
  auto r = b.store->import_json(dump, {true, "p.json"});
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(nlohmann::json::parse(r->provenance)["kope_version"], "9.9");
  auto plain = temp_store("prov-c.db");
  populate(*plain.store, "run-q");
  ASSERT_TRUE(b.store->import_json(export_text(*plain.store), {false, "q.json"}));
  auto stats = b.store->stats();
  ASSERT_TRUE(stats);
  ASSERT_EQ(stats->imports.size(), 2u);
  EXPECT_EQ(stats->imports[0].source, "p.json");
  EXPECT_TRUE(stats->imports[0].foreign);
  EXPECT_EQ(stats->imports[0].cases_added, 4);
  EXPECT_EQ(nlohmann::json::parse(stats->imports[0].provenance)["runs"][0], "r1");
  EXPECT_EQ(stats->imports[1].provenance, "");  // that export carried none
  auto check = b.store->check();
  ASSERT_TRUE(check) << check.error().message;
  EXPECT_TRUE(check->ok()) << (check->problems.empty() ? "" : check->problems.front());
}

TEST_P(ExchangeTest, MetaValuesAreKeptAndTheStoresOwnKeysAreRefused) {
  auto a = temp_store("meta.db");
  ASSERT_TRUE(a.store->set_meta("starter:abc", "{\"origin\": \"x\"}"));
  ASSERT_TRUE(a.store->set_meta("starter:abd", "two"));
  ASSERT_TRUE(a.store->set_meta("starter:abd", "three"));  // replaced
  ASSERT_TRUE(a.store->set_meta("other", "1"));
  auto v = a.store->get_meta("starter:abd");
  ASSERT_TRUE(v && *v);
  EXPECT_EQ(**v, "three");
  auto none = a.store->get_meta("nope");
  ASSERT_TRUE(none);
  EXPECT_FALSE(*none);
  auto rows = a.store->meta_with_prefix("starter:");
  ASSERT_TRUE(rows);
  EXPECT_EQ(rows->size(), 2u);
  EXPECT_EQ(rows->begin()->first, "starter:abc");
  for (const char* k : {"instance", "created_at", "created_by", ""}) {
    auto st = a.store->set_meta(k, "x");
    ASSERT_FALSE(st) << k;
    EXPECT_EQ(st.error().kind, ErrorKind::usage);
  }
  auto instance = a.store->get_meta("instance");
  ASSERT_TRUE(instance && *instance);
  EXPECT_EQ(**instance, a.store->stats()->instance);  // untouched by the refused writes
}

TEST(Codec, ZstdFilesRoundTripAndDamageIsNamed) {
  std::string text;
  for (int i = 0; i < 5000; ++i) text += "{\"case\": " + std::to_string(i) + ", \"code\": \"kope_kernel\"},\n";
  auto z = zstd_compress_file(text);
  ASSERT_TRUE(z);
  EXPECT_TRUE(is_zstd_frame(*z));
  EXPECT_FALSE(is_zstd_frame(text));
  EXPECT_LT(z->size(), text.size() / 10);
  auto back = zstd_decompress_file(*z, "x.zst");
  ASSERT_TRUE(back) << back.error().message;
  EXPECT_EQ(*back, text);
  // Two frames one after the other (as `cat a.zst b.zst`) are one stream.
  auto z2 = zstd_compress_file("tail");
  ASSERT_TRUE(z2);
  auto both = zstd_decompress_file(*z + *z2, "x.zst");
  ASSERT_TRUE(both);
  EXPECT_EQ(*both, text + "tail");
  auto cut = zstd_decompress_file(z->substr(0, z->size() / 2), "cut.zst");
  ASSERT_FALSE(cut);
  EXPECT_EQ(cut.error().kind, ErrorKind::corrupt);
  EXPECT_NE(cut.error().message.find("cut.zst"), std::string::npos) << cut.error().message;
  auto big = zstd_decompress_file(*z, "big.zst", 100);
  ASSERT_FALSE(big);
}

TEST(Starter, ImportsOncePerContentAsForeignAndNamesItsOrigin) {
  auto src = temp_store("starter-src.db");
  populate(*src.store, "run-s");
  ExportOptions o;
  o.provenance = R"({"model": "test-model"})";
  std::string dump = export_text(*src.store, o);
  auto dir = util::TempDir::create("kope-starter-unit");
  ASSERT_TRUE(dir);
  auto file = dir->path() / "memory.json.zst";
  ASSERT_TRUE(write_export_file(file, dump));
  auto raw = util::read_file(file);
  ASSERT_TRUE(raw);
  EXPECT_TRUE(is_zstd_frame(*raw));
  auto text = read_export_file(file);
  ASSERT_TRUE(text);
  EXPECT_EQ(*text, dump);

  auto user = temp_store("starter-user.db");
  auto first = import_starter(*user.store, file);
  ASSERT_TRUE(first) << first.error().message;
  EXPECT_TRUE(first->imported);
  EXPECT_EQ(first->report.cases_added, 4);
  EXPECT_EQ(first->summary.correct_cases, 3);
  EXPECT_EQ(first->summary.solved_ops, (std::set<std::string>{"layernorm", "softmax"}));
  EXPECT_EQ(first->summary.provenance["model"], "test-model");
  auto second = import_starter(*user.store, file);
  ASSERT_TRUE(second);
  EXPECT_FALSE(second->imported);
  auto stats = user.store->stats();
  EXPECT_EQ(stats->cases, 4);
  EXPECT_EQ(stats->foreign_cases, 4);
  EXPECT_EQ(stats->imports.size(), 1u);
  auto origins = starter_origins(*user.store);
  ASSERT_TRUE(origins);
  EXPECT_EQ(*origins, std::set<std::string>{src.store->stats()->instance});
  // A changed file (a newer starter) is imported once more.
  ASSERT_TRUE(write_export_file(dir->path() / "plain.json", dump + "\n"));
  auto third = import_starter(*user.store, dir->path() / "plain.json");
  ASSERT_TRUE(third);
  EXPECT_TRUE(third->imported);
  EXPECT_EQ(third->report.cases_added, 0);  // the same cases: idempotent
  auto not_export = util::write_file_atomic(dir->path() / "bad.json", "{\"format\": \"other\"}");
  ASSERT_TRUE(not_export);
  auto bad = import_starter(*user.store, dir->path() / "bad.json");
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("bad.json"), std::string::npos);
}

}  // namespace
}  // namespace kope::memory
