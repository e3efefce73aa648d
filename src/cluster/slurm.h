// cluster/slurm.h — the Slurm commands kope uses, one function each: submit a job array
// (`sbatch --array`), ask how its tasks stand (`squeue`, then `sacct` where the cluster keeps
// accounting), cancel it or one task (`scancel`). Each runs the command with an argv array and
// a time limit and turns its failure into an Error that quotes what Slurm said; the parsers are
// separate functions so they are tested without a cluster. Thread-compatible; no state.
#pragma once

#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kope/error.h"

namespace kope::cluster {

// How one array task stands in the scheduler.
struct TaskState {
  std::string state;   // Slurm's name: PENDING, RUNNING, COMPLETED, FAILED, CANCELLED, TIMEOUT, ...
  std::string reason;  // squeue's reason (None, Resources, NonZeroExitCode, ...); "" from sacct
};

// True for the states a task never leaves (it has ended, successfully or not).
bool is_final_state(std::string_view state);

// A job array to submit: every task runs `script`, which reads SLURM_ARRAY_TASK_ID.
struct ArrayJob {
  std::filesystem::path script;
  std::vector<int> indices;            // the array's task indices (not necessarily contiguous)
  std::string name;                    // --job-name
  std::string output;                  // --output pattern (%A: the array's job id, %a: the index)
  std::filesystem::path chdir;         // the tasks' working directory
  std::string partition;               // "" = the cluster's default partition
  bool exclusive = true;               // a whole node per task (timing needs it)
  std::vector<std::string> extra_args; // more sbatch options, as given (--slurm-args)
};

// "0-2,5,7-8" for {0, 1, 2, 5, 7, 8} (sorted, duplicates dropped).
std::string index_list(std::vector<int> indices);

// The sbatch command line that submits `job` (--parsable, so that it prints the job id).
std::vector<std::string> sbatch_argv(const ArrayJob& job);

// Splits `text` into words as a POSIX shell would (blanks separate; '...' and "..." quote;
// backslash escapes), without expanding anything. Fails with usage on an unterminated quote.
Result<std::vector<std::string>> split_shell_words(std::string_view text);

// Submits `job`; returns the array's job id. Fails with unavailable when sbatch cannot be run,
// with io quoting sbatch's message when it refuses the job.
Result<std::string> submit_array(const ArrayJob& job);

// The tasks of array `job_id` in `squeue --array --format=%i|%T|%r` lines ("12_3|RUNNING|None"),
// by index; lines of other jobs and malformed lines are skipped.
std::map<int, TaskState> parse_squeue(std::string_view text, std::string_view job_id);

// The tasks of array `job_id` in `sacct --parsable2 --format=JobID,State` lines
// ("12_3|CANCELLED by 0"; job steps such as "12_3.batch" are skipped), by index.
std::map<int, TaskState> parse_sacct(std::string_view text, std::string_view job_id);

// How the tasks of array `job_id` stand: squeue's view, completed by sacct for tasks that have
// left the queue when the cluster keeps accounting. A task Slurm no longer knows is absent.
// Fails with unavailable when squeue cannot be run, with io quoting squeue when it fails.
Result<std::map<int, TaskState>> query_array(const std::string& job_id);

// Cancels array `job_id` (every task), or only its task `index`. Fails with io quoting scancel.
Status cancel_array(const std::string& job_id, std::optional<int> index = std::nullopt);

}  // namespace kope::cluster
