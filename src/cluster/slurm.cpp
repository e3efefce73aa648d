#include "cluster/slurm.h"

#include <algorithm>
#include <chrono>

#include <fmt/format.h>

#include "util/strings.h"
#include "util/subprocess.h"

namespace kope::cluster {

namespace {

// A Slurm command that takes longer than this is treated as failed (a controller that does not
// answer); the commands themselves answer in well under a second.
constexpr std::chrono::seconds k_command_timeout{60};

struct CommandOutput {
  bool ok = false;
  std::string out;
  std::string problem;  // why it failed, with what the command said
};

// Runs a Slurm command. Fails only when it cannot be started at all.
Result<CommandOutput> run_slurm(const std::vector<std::string>& argv) {
  util::RunOptions ro;
  ro.spawn.argv = argv;
  ro.timeout = k_command_timeout;
  auto r = util::run(ro);
  if (!r) {
    return fail(ErrorKind::unavailable, "cannot run {} ({}); is Slurm's client installed and on PATH?", argv[0],
                r.error().message);
  }
  CommandOutput c;
  c.ok = r->status.success() && !r->timed_out;
  c.out = std::move(r->out);
  if (!c.ok) {
    std::string said(util::trim(r->err.empty() ? std::string_view(c.out) : std::string_view(r->err)));
    c.problem = fmt::format("`{}` {}{}", util::join(argv, " "), r->timed_out ? "timed out" : r->status.describe(),
                            said.empty() ? "" : ": " + util::truncate_text(said, 1000, 8));
  }
  return c;
}

// The index of "JOB_INDEX" when JOB is `job_id`.
std::optional<int> task_index(std::string_view id, std::string_view job_id) {
  if (id.size() <= job_id.size() + 1 || !id.starts_with(job_id) || id[job_id.size()] != '_') return std::nullopt;
  std::string_view digits = id.substr(job_id.size() + 1);
  if (digits.find_first_not_of("0123456789") != std::string_view::npos || digits.size() > 9) return std::nullopt;
  return std::stoi(std::string(digits));
}

// "JOB_INDEX|STATE[|REASON]" lines (squeue's and sacct's formats) of array `job_id`, by index. A
// state is its first word (sacct says "CANCELLED by 0"); "JOB_INDEX.batch" (a job step) has no
// index and is skipped, as are other jobs' lines and malformed ones.
std::map<int, TaskState> parse_task_lines(std::string_view text, std::string_view job_id) {
  std::map<int, TaskState> tasks;
  for (const auto& line : util::split(text, '\n')) {
    auto fields = util::split(util::trim(line), '|');
    if (fields.size() < 2) continue;
    auto index = task_index(fields[0], job_id);
    if (!index) continue;
    tasks[*index] = {fields[1].substr(0, fields[1].find(' ')), fields.size() > 2 ? fields[2] : ""};
  }
  return tasks;
}

}  // namespace

bool is_final_state(std::string_view state) {
  static const char* const k_final[] = {"COMPLETED", "FAILED",        "CANCELLED", "TIMEOUT",  "NODE_FAIL", "PREEMPTED",
                                        "BOOT_FAIL", "OUT_OF_MEMORY", "DEADLINE",  "REVOKED", "SPECIAL_EXIT"};
  return std::find(std::begin(k_final), std::end(k_final), state) != std::end(k_final);
}

std::string index_list(std::vector<int> indices) {
  std::sort(indices.begin(), indices.end());
  indices.erase(std::unique(indices.begin(), indices.end()), indices.end());
  std::vector<std::string> ranges;
  for (size_t i = 0; i < indices.size();) {
    size_t j = i;
    while (j + 1 < indices.size() && indices[j + 1] == indices[j] + 1) ++j;
    ranges.push_back(j == i ? std::to_string(indices[i]) : fmt::format("{}-{}", indices[i], indices[j]));
    i = j + 1;
  }
  return util::join(ranges, ",");
}

std::vector<std::string> sbatch_argv(const ArrayJob& job) {
  std::vector<std::string> a = {"sbatch", "--parsable", "--array=" + index_list(job.indices), "--job-name=" + job.name,
                                "--output=" + job.output, "--chdir=" + job.chdir.string()};
  if (job.exclusive) a.emplace_back("--exclusive");
  if (!job.partition.empty()) a.push_back("--partition=" + job.partition);
  a.insert(a.end(), job.extra_args.begin(), job.extra_args.end());  // after ours, so that they override
  a.push_back(job.script.string());
  return a;
}

Result<std::vector<std::string>> split_shell_words(std::string_view text) {
  std::vector<std::string> words;
  std::string word;
  bool in_word = false;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (c == ' ' || c == '\t' || c == '\n') {
      if (in_word) words.push_back(std::move(word));
      word.clear();
      in_word = false;
      continue;
    }
    in_word = true;
    if (c == '\\' && i + 1 < text.size()) {
      word += text[++i];
    } else if (c == '\'' || c == '"') {
      size_t end = text.find(c, i + 1);
      if (end == std::string_view::npos) {
        return fail(ErrorKind::usage, "unterminated {} quote in \"{}\"", c == '\'' ? "single" : "double", text);
      }
      word += text.substr(i + 1, end - i - 1);
      i = end;
    } else {
      word += c;
    }
  }
  if (in_word) words.push_back(std::move(word));
  return words;
}

Result<std::string> submit_array(const ArrayJob& job) {
  if (job.indices.empty()) return fail(ErrorKind::usage, "a job array needs at least one task");
  KOPE_ASSIGN(CommandOutput c, run_slurm(sbatch_argv(job)));
  if (!c.ok) return fail(ErrorKind::io, "Slurm refused the job array: {}", c.problem);
  // --parsable prints "JOBID" or "JOBID;CLUSTER".
  std::string id(util::trim(std::string_view(c.out).substr(0, c.out.find(';'))));
  if (id.empty() || id.find_first_not_of("0123456789") != std::string::npos) {
    return fail(ErrorKind::io, "sbatch printed no job id (it printed \"{}\")", c.out);
  }
  return id;
}

std::map<int, TaskState> parse_squeue(std::string_view text, std::string_view job_id) {
  return parse_task_lines(text, job_id);
}

std::map<int, TaskState> parse_sacct(std::string_view text, std::string_view job_id) {
  return parse_task_lines(text, job_id);
}

Result<std::map<int, TaskState>> query_array(const std::string& job_id) {
  KOPE_ASSIGN(CommandOutput q, run_slurm({"squeue", "--noheader", "--array", "--states=all", "--jobs=" + job_id,
                                          "--format=%i|%T|%r"}));
  std::map<int, TaskState> tasks;
  if (q.ok) {
    tasks = parse_squeue(q.out, job_id);
  } else if (q.problem.find("Invalid job id") == std::string::npos) {  // a job that left the queue is no error
    return fail(ErrorKind::io, "cannot ask Slurm about job {}: {}", job_id, q.problem);
  }
  // Tasks that have left the queue: accounting remembers them, where the cluster keeps it (a
  // cluster without it says so and fails; the caller then judges by the task's run directory).
  auto acct = run_slurm({"sacct", "--noheader", "--parsable2", "--jobs=" + job_id, "--format=JobID,State"});
  if (acct && acct->ok) {
    for (auto& [index, st] : parse_sacct(acct->out, job_id)) tasks.try_emplace(index, std::move(st));
  }
  return tasks;
}

Status cancel_array(const std::string& job_id, std::optional<int> index) {
  std::string target = index ? fmt::format("{}_{}", job_id, *index) : job_id;
  KOPE_ASSIGN(CommandOutput c, run_slurm({"scancel", target}));
  if (!c.ok) return fail(ErrorKind::io, "cannot cancel Slurm job {}: {}", target, c.problem);
  return {};
}

}  // namespace kope::cluster
