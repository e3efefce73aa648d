#include "util/fs.h"

#include <gtest/gtest.h>

#include "util/hash.h"
#include "util/strings.h"

namespace kope::util {
namespace {

TEST(Fs, AtomicWriteReplacesContent) {
  auto dir = TempDir::create("kope-test-");
  ASSERT_TRUE(dir);
  auto p = dir->path() / "sub" / "f.txt";
  ASSERT_TRUE(write_file_atomic(p, "one"));
  ASSERT_TRUE(write_file_atomic(p, "two"));
  auto r = read_file(p);
  ASSERT_TRUE(r);
  EXPECT_EQ(*r, "two");
  // No temporaries left behind.
  int n = 0;
  for (auto& e : fs::directory_iterator(p.parent_path())) {
    (void)e;
    ++n;
  }
  EXPECT_EQ(n, 1);
}

TEST(Fs, ReadMissingFileNamesIt) {
  auto r = read_file("/nonexistent/kope/file");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().kind, ErrorKind::not_found);
  EXPECT_NE(r.error().message.find("/nonexistent/kope/file"), std::string::npos);
}

TEST(Fs, TempDirIsRemoved) {
  fs::path p;
  {
    auto dir = TempDir::create("kope-test-");
    ASSERT_TRUE(dir);
    p = dir->path();
    ASSERT_TRUE(write_file_atomic(p / "x", "y"));
    EXPECT_TRUE(fs::exists(p));
  }
  EXPECT_FALSE(fs::exists(p));
}

TEST(Hash, Sha256KnownVectors) {
  EXPECT_EQ(sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST(Strings, TruncateMarksTheCut) {
  EXPECT_EQ(truncate_text("abc", 10), "abc");
  auto t = truncate_text("line1\nline2\nline3\n", 100, 1);
  EXPECT_NE(t.find("line1"), std::string::npos);
  EXPECT_EQ(t.find("line2"), std::string::npos);
  EXPECT_NE(t.find("more bytes cut"), std::string::npos);
}

TEST(Strings, Glob) {
  EXPECT_TRUE(glob_match("*norm*", "layernorm"));
  EXPECT_FALSE(glob_match("soft?ax", "softmax2"));
  EXPECT_TRUE(glob_match("soft?ax", "softmax"));
}

}  // namespace
}  // namespace kope::util

namespace kope::util {
namespace {

TEST(Fs, ShareFilesAreFoundInTheShareDirOrItsShareKopeFolder) {
  auto dir = TempDir::create("kope-share-");
  ASSERT_TRUE(dir);
  ::setenv("KOPE_SHARE_DIR", dir->path().c_str(), 1);
  EXPECT_EQ(share_dir(), dir->path());
  EXPECT_FALSE(find_share_file("starter/memory.json.zst"));
  // The source tree's layout: data files installed into <prefix>/share/kope live in share/kope/.
  ASSERT_TRUE(write_file_atomic(dir->path() / "share/kope/starter/memory.json.zst", "x"));
  EXPECT_EQ(find_share_file("starter/memory.json.zst"), dir->path() / "share/kope/starter/memory.json.zst");
  // The installed layout wins: <share>/starter/...
  ASSERT_TRUE(write_file_atomic(dir->path() / "starter/memory.json.zst", "y"));
  EXPECT_EQ(find_share_file("starter/memory.json.zst"), dir->path() / "starter/memory.json.zst");
  ::unsetenv("KOPE_SHARE_DIR");
  EXPECT_NE(share_dir(), dir->path());
}

}  // namespace
}  // namespace kope::util
