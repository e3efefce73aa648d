#include "spec/scaffold.h"

#include <unistd.h>

#include <gtest/gtest.h>

#include "util/fs.h"

namespace kope::spec {
namespace {

namespace fs = std::filesystem;

fs::path fresh_dir(const char* name) {
  fs::path dir = fs::temp_directory_path() / fmt::format("kope-scaffold-{}-{}", name, ::getpid());
  fs::remove_all(dir);
  return dir;
}

TEST(Scaffold, TheNewFolderLoadsAndItsReferenceHasTheSignature) {
  fs::path root = fresh_dir("ok");
  auto dir = create_op_folder(root, "my_op", "elementwise");
  ASSERT_TRUE(dir) << dir.error().message;
  EXPECT_EQ(*dir, root / "elementwise" / "my_op");
  auto op = load_op(*dir);
  ASSERT_TRUE(op) << op.error().message;
  EXPECT_EQ(op->name, "my_op");
  EXPECT_EQ(op->category, "elementwise");
  EXPECT_GE(op->cases.size(), 10u);
  EXPECT_EQ(op->timed_case_count(), 3);
  auto ref = util::read_file(op->reference_path);
  ASSERT_TRUE(ref);
  std::string sig = render_signature(*op);
  EXPECT_NE(ref->find(sig.substr(0, sig.size() - 1) + " {"), std::string::npos) << *ref;
  // Nothing is overwritten.
  auto again = create_op_folder(root, "my_op", "elementwise");
  ASSERT_FALSE(again);
  EXPECT_NE(again.error().message.find("exists already"), std::string::npos);
  fs::remove_all(root);
}

TEST(Scaffold, BadNamesAreRejectedBeforeAnythingIsWritten) {
  fs::path root = fresh_dir("bad");
  auto bad_name = create_op_folder(root, "my op", "elementwise");
  ASSERT_FALSE(bad_name);
  EXPECT_NE(bad_name.error().message.find("op name 'my op'"), std::string::npos) << bad_name.error().message;
  auto bad_category = create_op_folder(root, "x", "Element Wise");
  ASSERT_FALSE(bad_category);
  EXPECT_NE(bad_category.error().message.find("category 'Element Wise'"), std::string::npos) << bad_category.error().message;
  EXPECT_FALSE(fs::exists(root));
}

}  // namespace
}  // namespace kope::spec
