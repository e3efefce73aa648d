// tools/kope/run_slurm.h — `kope run --executor slurm`: the coordinator of a run whose operators
// run as a Slurm job array (docs/design.md §11, "Runs through Slurm").
//
// The coordinating run directory holds the run's config.json, its own events.jsonl (submissions
// and task ends), slurm.json (the tasks: which operators each runs, its job, its last state),
// slurm/array.sh (the batch script every array task runs) and tasks/<i>/, each an ordinary run
// directory that array task i fills with its `kope run` (Slurm's output in tasks/<i>/slurm-<job>.log).
// results.json and report.html merge the tasks (agent::Run::collect_tasks, run/tasks.h).
#pragma once

#include <atomic>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "agent/run.h"
#include "kope/error.h"

namespace kope::cli {

struct SlurmSettings {
  std::string partition;   // "" = the cluster's default partition
  std::string slurm_args;  // more sbatch options, split like a shell ("--time=2:00:00 --constraint=avx512")
  int chunk = 1;           // operators per array task
};

// What the coordinator needs from the `kope run` around it.
struct SlurmConsole {
  std::function<void(const std::string&)> say;  // a line of progress (the caller drops it under --quiet)
  const std::atomic<bool>* cancel = nullptr;     // Ctrl-C / SIGTERM: cancel the array (scancel)
};

// True when `run_dir` coordinates a run dispatched through Slurm (it holds slurm.json).
bool is_slurm_run(const std::filesystem::path& run_dir);

// Runs the operators of the new run `run` as a job array: `chunk` operators per task, each task
// `kope run TASK_ARGS --ops <its operators' folders> --run-dir RUN_DIR/tasks/<i>` on an
// exclusive node, from this process's working directory. Watches the tasks until every one has
// ended, printing each one's progress from its event log; Ctrl-C cancels the array and waits
// for its tasks to end. Returns the merged report, with an error per task whose run did not
// finish (its Slurm state and the tail of its log). Fails when Slurm refuses the job or cannot
// be asked about it, or the run directory cannot be written.
Result<agent::RunReport> dispatch_to_slurm(agent::Run& run, const SlurmSettings& settings,
                                           const std::vector<std::string>& task_args, const SlurmConsole& console);

// `kope run --resume` of such a run: tasks whose run finished are left alone, tasks still
// pending or running in Slurm are watched again, every other task is submitted again (one new
// array of their indices; a task that had started resumes its own run directory). Then as
// dispatch_to_slurm. Fails with corrupt when slurm.json is damaged.
Result<agent::RunReport> resume_on_slurm(agent::Run& run, const SlurmConsole& console);

}  // namespace kope::cli
