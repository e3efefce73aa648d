#include "util/subprocess.h"

#include "util/fs.h"

#include <signal.h>

#include <gtest/gtest.h>

namespace kope::util {
namespace {

RunOptions sh(const std::string& script) {
  RunOptions o;
  o.spawn.argv = {"/bin/sh", "-c", script};
  o.timeout = std::chrono::seconds(20);
  return o;
}

TEST(Subprocess, CapturesStdoutAndStderrSeparately) {
  auto r = run(sh("echo out; echo err >&2; exit 3"));
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_TRUE(r->status.exited);
  EXPECT_EQ(r->status.code, 3);
  EXPECT_EQ(r->out, "out\n");
  EXPECT_EQ(r->err, "err\n");
  EXPECT_FALSE(r->timed_out);
}

TEST(Subprocess, StdinIsDevNull) {
  auto r = run(sh("cat; echo done"));
  ASSERT_TRUE(r);
  EXPECT_EQ(r->out, "done\n");
}

TEST(Subprocess, NamesTheSignal) {
  auto r = run(sh("kill -SEGV $$"));
  ASSERT_TRUE(r);
  EXPECT_FALSE(r->status.exited);
  EXPECT_EQ(r->status.signal, SIGSEGV);
  EXPECT_NE(r->status.describe().find("SIGSEGV"), std::string::npos);
}

TEST(Subprocess, TimeoutKillsTheWholeGroup) {
  auto o = sh("sleep 30 & sleep 30; echo never");
  o.timeout = std::chrono::milliseconds(300);
  auto r = run(o);
  ASSERT_TRUE(r);
  EXPECT_TRUE(r->timed_out);
  EXPECT_LT(r->wall_seconds, 5.0);
  EXPECT_EQ(r->out, "");
}

TEST(Subprocess, ExitDoesNotWaitForBackgroundChildrenHoldingPipes) {
  auto r = run(sh("(sleep 30) & echo quick"));
  ASSERT_TRUE(r);
  EXPECT_EQ(r->out, "quick\n");
  EXPECT_LT(r->wall_seconds, 5.0);
}

TEST(Subprocess, OutputIsCappedAndCounted) {
  auto o = sh("head -c 200000 /dev/zero");
  o.stdout_cap = 1000;
  auto r = run(o);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->out.size(), 1000u);
  EXPECT_EQ(r->out_bytes, 200000u);
  EXPECT_TRUE(r->output_capped);
}

TEST(Subprocess, FloodIsKilledWhenAsked) {
  auto o = sh("yes");
  o.stdout_cap = 4096;
  o.kill_on_output_cap = true;
  auto r = run(o);
  ASSERT_TRUE(r);
  EXPECT_TRUE(r->output_capped);
  EXPECT_FALSE(r->status.exited);
}

TEST(Subprocess, CpuLimitStopsABusyLoop) {
  auto o = sh("while :; do :; done");
  o.spawn.limits.cpu_seconds = 1;
  auto r = run(o);
  ASSERT_TRUE(r);
  EXPECT_FALSE(r->status.exited);
  EXPECT_TRUE(r->status.signal == SIGXCPU || r->status.signal == SIGKILL);
}

TEST(Subprocess, FileSizeLimit) {
  auto dir = TempDir::create("kope-test-");
  ASSERT_TRUE(dir);
  auto o = sh("head -c 100000 /dev/zero > big");
  o.spawn.cwd = dir->path();
  o.spawn.limits.file_size_bytes = 4096;
  auto r = run(o);
  ASSERT_TRUE(r);
  EXPECT_FALSE(r->status.success());
}

TEST(Subprocess, MissingProgramIsAnError) {
  RunOptions o;
  o.spawn.argv = {"/nonexistent/program"};
  auto r = run(o);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("/nonexistent/program"), std::string::npos);
}

TEST(Subprocess, EnvironmentIsReplacedWhenGiven) {
  auto o = sh("echo \"[$KOPE_X][$HOME]\"");
  o.spawn.env = std::vector<std::string>{"KOPE_X=1"};
  auto r = run(o);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->out, "[1][]\n");
}

TEST(Subprocess, DoesNotLeakParentDescriptors) {
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);  // not close-on-exec on purpose
  auto r = run(sh(fmt::format("test -e /proc/self/fd/{} && echo leaked || echo closed", fds[1])));
  ::close(fds[0]);
  ::close(fds[1]);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->out, "closed\n");
}

}  // namespace
}  // namespace kope::util
