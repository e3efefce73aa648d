// tools/kope/child_run.h — experiments made of ordinary `kope run`s (`kope transfer`, `kope
// ablate`): each run a child process of this executable, its output kept in a log file.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "kope/error.h"

namespace kope::cli {

// What every `kope run` of an experiment shares, and the experiment's own directory and output.
struct ChildRunOptions {
  int iterations = 4;
  std::string llm, policy, suite;
  std::string dir;
  uint64_t seed = 1;
  std::vector<std::string> run_args;  // passed to every `kope run` (--eval-ci 0.2 ...)
  bool holdout = true;                // every `kope run --holdout` (--no-holdout turns it off)
  bool json_out = false;
};

// The help texts that differ between experiments; `each` names one of its runs ("phase").
struct ChildRunHelp {
  std::string each;
  std::string dir;
  std::string json;
  std::string no_holdout;
};

// Registers --iterations, --llm, --policy, --dir, --seed, --suite, --run-arg, --no-holdout and
// --json on an experiment's subcommand.
void add_child_run_options(CLI::App* cmd, ChildRunOptions& o, const ChildRunHelp& help);

// This executable (/proc/self/exe), else "kope" from $PATH.
std::filesystem::path self_exe();

// Runs `kope ARGS...` to completion and appends the command line and its output to `log`. The
// child dies with this process (PR_SET_PDEATHSIG), so an experiment killed midway leaves no run
// behind holding its run directory's lock. Fails naming the log when the child fails.
Status run_kope_child(const std::vector<std::string>& args, const std::filesystem::path& log);

// The results.json of a run directory. Fails with io when missing, corrupt when malformed.
Result<nlohmann::json> read_results(const std::filesystem::path& run_dir);

}  // namespace kope::cli
