// tools/kope/child_run.h — experiments made of ordinary `kope run`s (`kope transfer`, `kope
// ablate`): each run a child process of this executable, its output kept in a log file.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kope/error.h"

namespace kope::cli {

// This executable (/proc/self/exe), else "kope" from $PATH.
std::filesystem::path self_exe();

// Runs `kope ARGS...` to completion and appends the command line and its output to `log`. The
// child dies with this process (PR_SET_PDEATHSIG), so an experiment killed midway leaves no run
// behind holding its run directory's lock. Fails naming the log when the child fails.
Status run_kope_child(const std::vector<std::string>& args, const std::filesystem::path& log);

// The results.json of a run directory. Fails with io when missing, corrupt when malformed.
Result<nlohmann::json> read_results(const std::filesystem::path& run_dir);

}  // namespace kope::cli
