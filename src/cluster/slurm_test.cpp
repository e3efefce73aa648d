// The Slurm command lines kope builds and the parsers of what Slurm prints (no cluster needed;
// tests/e2e/slurm_e2e_test.cpp drives a real one).
#include "cluster/slurm.h"

#include <gtest/gtest.h>

namespace kope::cluster {
namespace {

TEST(Slurm, IndexListsCompressRunsOfIndices) {
  EXPECT_EQ(index_list({0, 1, 2}), "0-2");
  EXPECT_EQ(index_list({7, 5, 0, 1, 2, 8, 5}), "0-2,5,7-8");
  EXPECT_EQ(index_list({3}), "3");
  EXPECT_EQ(index_list({}), "");
}

TEST(Slurm, SbatchCommandAsksForAnExclusiveArrayAndPutsTheUsersOptionsLast) {
  ArrayJob job;
  job.script = "/runs/r/slurm/array.sh";
  job.indices = {0, 2};
  job.name = "kope-r";
  job.output = "/runs/r/tasks/%a/slurm-%A.log";
  job.chdir = "/home/u";
  job.partition = "gpu";
  job.extra_args = {"--time=01:00:00", "--constraint=avx512"};
  std::vector<std::string> want = {"sbatch", "--parsable", "--array=0,2", "--job-name=kope-r",
                                   "--output=/runs/r/tasks/%a/slurm-%A.log", "--chdir=/home/u", "--exclusive",
                                   "--partition=gpu", "--time=01:00:00", "--constraint=avx512", "/runs/r/slurm/array.sh"};
  EXPECT_EQ(sbatch_argv(job), want);
  job.partition.clear();
  job.exclusive = false;
  job.extra_args.clear();
  EXPECT_EQ(sbatch_argv(job).size(), want.size() - 4);
}

TEST(Slurm, SlurmArgsSplitLikeAShell) {
  auto w = split_shell_words("  --time=10 --comment='two words' \"--x=a b\" c\\ d ");
  ASSERT_TRUE(w) << w.error().message;
  EXPECT_EQ(*w, (std::vector<std::string>{"--time=10", "--comment=two words", "--x=a b", "c d"}));
  EXPECT_TRUE(split_shell_words("")->empty());
  auto bad = split_shell_words("--comment='open");
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().kind, ErrorKind::usage);
  EXPECT_NE(bad.error().message.find("unterminated single quote"), std::string::npos) << bad.error().message;
}

TEST(Slurm, SqueueLinesOfTheArrayGiveEachTasksStateAndReason) {
  auto tasks = parse_squeue("12_1|PENDING|Resources\n12_0|RUNNING|None\n  12_2|FAILED|NonZeroExitCode\n"
                            "120_3|RUNNING|None\n13_0|RUNNING|None\ngarbage\n12_x|RUNNING|None\n",
                            "12");
  ASSERT_EQ(tasks.size(), 3u);
  EXPECT_EQ(tasks[0].state, "RUNNING");
  EXPECT_EQ(tasks[1].state, "PENDING");
  EXPECT_EQ(tasks[1].reason, "Resources");
  EXPECT_EQ(tasks[2].state, "FAILED");
  EXPECT_EQ(tasks[2].reason, "NonZeroExitCode");
}

TEST(Slurm, SacctLinesSkipJobStepsAndKeepTheStatesFirstWord) {
  auto tasks = parse_sacct("12_0|COMPLETED\n12_0.batch|COMPLETED\n12_1|CANCELLED by 0\n12_1.batch|CANCELLED\n", "12");
  ASSERT_EQ(tasks.size(), 2u);
  EXPECT_EQ(tasks[0].state, "COMPLETED");
  EXPECT_EQ(tasks[1].state, "CANCELLED");
}

TEST(Slurm, FinalStatesAreTheOnesATaskNeverLeaves) {
  for (const char* s : {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY"}) {
    EXPECT_TRUE(is_final_state(s)) << s;
  }
  for (const char* s : {"PENDING", "RUNNING", "COMPLETING", "CONFIGURING", "REQUEUED", "SUSPENDED", ""}) {
    EXPECT_FALSE(is_final_state(s)) << s;
  }
}

}  // namespace
}  // namespace kope::cluster
