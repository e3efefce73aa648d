#include "report/table.h"

#include <gtest/gtest.h>

namespace kope::report {
namespace {

Table sample() {
  Table t;
  t.id = "demo";
  t.title = "Demo";
  t.caption = "Over the 2 operators of the test.";
  t.columns = {{"op", "operator", ColumnType::text, 0, true, ""},
               {"speedup", "vs ref", ColumnType::speedup, 2, true, "best speedup"},
               {"pass", "pass rate", ColumnType::percent, 1, true, ""},
               {"tokens", "tokens", ColumnType::integer, 0, true, ""},
               {"cost", "cost", ColumnType::usd, 4, false, ""},
               {"solved", "solved", ColumnType::boolean, 0, false, ""}};
  t.add({std::string("soft|max"), 2.4149, 0.7857, int64_t{1234567}, 0.0123, true});
  t.add({std::string("relu"), Value(), 1.0, int64_t{0}, Value(), false});
  return t;
}

TEST(Table, CellsAsPeopleReadThem) {
  Table t = sample();
  EXPECT_EQ(format_cell(t.rows[0][1], t.columns[1]), "2.41x");
  EXPECT_EQ(format_cell(t.rows[0][2], t.columns[2]), "78.6%");
  EXPECT_EQ(format_cell(t.rows[0][3], t.columns[3]), "1,234,567");
  EXPECT_EQ(format_cell(t.rows[0][4], t.columns[4]), "$0.0123");
  EXPECT_EQ(format_cell(t.rows[1][1], t.columns[1]), "-");
  EXPECT_EQ(format_cell(Value(0.0714286), Column{"d", "d", ColumnType::points, 1, true, ""}),
            "+7.1 pp");
  EXPECT_THROW(t.add({int64_t{1}}), std::logic_error);
}

TEST(Table, PrintersShareTheRecords) {
  Table t = sample();
  std::string console = print_console({t});
  EXPECT_NE(console.find("Demo\n  Over the 2 operators of the test.\n"), std::string::npos)
      << console;
  EXPECT_NE(console.find("2.41x"), std::string::npos);
  EXPECT_EQ(console.find("$0.0123"), std::string::npos);  // not a brief column
  std::string md = print_markdown({t});
  EXPECT_NE(md.find("| operator | vs ref | pass rate | tokens |\n| --- | ---: | ---: | ---: |\n"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("soft\\|max"), std::string::npos);
  std::string csv = print_csv(t);
  EXPECT_EQ(csv,
            "op,speedup,pass,tokens,cost,solved\nsoft|max,2.4149,0.7857,1234567,0.0123,true\nrelu,,"
            "1,0,,false\n");
  auto j = table_json(t);
  EXPECT_EQ(j["rows"][0]["speedup"], 2.4149);
  EXPECT_TRUE(j["rows"][1]["speedup"].is_null());
  EXPECT_EQ(j["columns"][1]["type"], "speedup");
  EXPECT_EQ(j["caption"], "Over the 2 operators of the test.");
}

}  // namespace
}  // namespace kope::report
