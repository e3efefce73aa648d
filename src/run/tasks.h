// run/tasks.h — a run whose operators ran as task runs elsewhere (`kope run --executor slurm`,
// docs/design.md §11): RUN_DIR/tasks/<i>/ is an ordinary run directory over some of the run's
// operators, and the run's own figures are those of every task's operators together.
#pragma once

#include <filesystem>
#include <vector>

#include <nlohmann/json.hpp>

#include "kope/error.h"

namespace kope::run {

// The task run directories under `run_dir`/tasks (numbered folders), in index order; empty
// when the run has none.
std::vector<std::filesystem::path> task_dirs(const std::filesystem::path& run_dir);

// Every task's operator events (the events naming an "op"), task after task, with the run-
// directory files they name (an attempt's code_file, an answer's answer_file) made relative to
// `run_dir`, so that the run's reports find them, and "seq" renumbered 1, 2, ... in that order
// (each task numbers its own log from 1). A task without an event log (not started)
// contributes nothing. Fails with corrupt as read_events does, naming the task's log.
Result<std::vector<nlohmann::json>> task_op_events(const std::filesystem::path& run_dir);

}  // namespace kope::run
