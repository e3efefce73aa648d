#include "agent/template.h"

#include <gtest/gtest.h>

namespace kope::agent {
namespace {

TEST(Template, SubstitutesAndDropsEmptySections) {
  std::string t = "Hello {{name}}!\n{{#extra}}\nExtra: {{extra}}\n{{/extra}}\n{{^extra}}\nno extra\n{{/extra}}\nend\n";
  auto a = render_template(t, {{"name", "kope"}, {"extra", ""}});
  ASSERT_TRUE(a) << a.error().message;
  EXPECT_EQ(*a, "Hello kope!\nno extra\nend\n");
  auto b = render_template(t, {{"name", "kope"}, {"extra", "yes"}});
  ASSERT_TRUE(b);
  EXPECT_EQ(*b, "Hello kope!\nExtra: yes\nend\n");
}

TEST(Template, CommentsAndInlineSections) {
  auto a = render_template("{{! note }}\na{{#x}}[{{x}}]{{/x}}b\n", {{"x", "1"}});
  ASSERT_TRUE(a);
  EXPECT_EQ(*a, "a[1]b\n");
}

TEST(Template, NestedSections) {
  auto a = render_template("{{#a}}A{{#b}}B{{/b}}{{/a}}", {{"a", "1"}, {"b", ""}});
  ASSERT_TRUE(a);
  EXPECT_EQ(*a, "A");
}

TEST(Template, ValuesAreVerbatim) {
  auto a = render_template("{{v}}", {{"v", "{{not a tag}} & <b>"}});
  ASSERT_TRUE(a);
  EXPECT_EQ(*a, "{{not a tag}} & <b>");
}

TEST(Template, ErrorsNameTheLine) {
  auto unknown = render_template("line one\n{{missing}}\n", {}, "t.md");
  ASSERT_FALSE(unknown);
  EXPECT_NE(unknown.error().message.find("t.md:2"), std::string::npos) << unknown.error().message;
  EXPECT_NE(unknown.error().message.find("missing"), std::string::npos);
  auto unclosed = check_template("{{#a}}\nx\n", "u.md");
  ASSERT_FALSE(unclosed);
  EXPECT_NE(unclosed.error().message.find("never closed"), std::string::npos);
  auto mismatched = check_template("{{#a}}{{/b}}", "m.md");
  ASSERT_FALSE(mismatched);
  EXPECT_NE(mismatched.error().message.find("closes section 'a'"), std::string::npos);
  EXPECT_FALSE(check_template("{{bad name}}"));
  EXPECT_FALSE(check_template("{{open"));
  EXPECT_TRUE(check_template("{{#a}}{{b}}{{/a}}"));
}

}  // namespace
}  // namespace kope::agent
