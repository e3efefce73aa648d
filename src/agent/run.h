// agent/run.h — a run: a selection of ops, each driven by the loop, in a run directory.
//
// The run directory (its files' formats are src/run/'s) holds:
//   config.json     the resolved configuration (run/config.h: ops with their folders and spec
//                   hashes, loop settings, budgets, model profile without secrets, seed, target,
//                   toolchain)
//   events.jsonl    the durable event log (run/events.h); resume rebuilds everything from it
//                   (run/op_state.h)
//   candidates/     every candidate source (<op>/<k>.cpp) and raw model answer (<k>.answer.md)
//   transcripts/    every model exchange (<op>/<k>-<stage>.md, reflect-<key>.md)
//   results.json    the figures (run/results.h), rewritten after every finished op and at the end
//   .lock           flock-ed by the process driving the run, for the Run's whole life; holds
//                   its pid, so that a second process is refused at once with the holder named
// Ops run `jobs` at a time on
// threads; the model client, evaluator and store are shared (each is thread-safe; the evaluator
// serialises timing itself). Cancelling (the flag in RunServices, set by Ctrl-C) stops every op
// after its current step; the run can then be resumed with Run::open + execute.
#pragma once

#include <atomic>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "agent/loop.h"
#include "agent/prompt.h"
#include "run/config.h"
#include "run/op_state.h"
#include "run/results.h"

namespace kope::agent {

namespace fs = std::filesystem;

using run::RunConfig;
using run::compute_results;
using run::op_result;
using run::results_summary;
using run::config_from_json;
using run::config_to_json;
using run::loop_config_from_json;
using run::loop_config_to_json;
using run::new_run_id;

struct RunServices {
  eval::Evaluator* evaluator = nullptr;
  memory::Store* store = nullptr;
  llm::LlmClient* llm = nullptr;             // null with the replay policy
  const HardwareGuide* guide = nullptr;      // null: describe_hardware_guide(evaluator->backend())
  const PromptLibrary* prompts = nullptr;
  ProgressSink* progress = nullptr;          // may be null
  std::atomic<bool>* cancel = nullptr;       // may be null
  std::vector<spec::OpSpec> known_ops;       // the suite: categories and signatures of other ops
};

struct RunReport {
  nlohmann::json results;
  bool complete = false;          // every op finished
  bool cancelled = false;
  std::vector<std::string> errors;  // "op: message" for ops that stopped on an error or an unavailable model
  fs::path results_path;
};

class Run {
 public:
  // Creates `dir` (which must not hold a run yet), locks it, writes config.json (ops filled from
  // `ops`) and opens the event log. Fails with usage when another process holds the lock (the
  // message names the directory and the holder's pid) or when `dir` already holds a run.
  static Result<std::unique_ptr<Run>> create(RunConfig config, std::vector<spec::OpSpec> ops, const fs::path& dir);
  // Opens an existing run for resuming: reads config.json, reloads each op from its folder
  // (fails with config when a spec changed since: its hash differs), rebuilds op states from
  // the event log. Fails with usage when another process holds the run's lock (naming the
  // directory and the holder's pid).
  static Result<std::unique_ptr<Run>> open(const fs::path& dir);
  ~Run();

  const RunConfig& config() const { return m_config; }
  const std::vector<spec::OpSpec>& ops() const { return m_ops; }
  const fs::path& dir() const { return m_dir; }
  const std::map<std::string, OpState>& states() const { return m_states; }
  bool resumed() const { return m_resumed; }

  // Changes how many ops run at once (not what is computed); saved in config.json.
  Status set_jobs(int jobs);
  // Records the target and toolchain the run is evaluated with; saved in config.json.
  Status set_machine(const std::string& target, const std::string& toolchain);

  // Drives every unfinished op. Thread-safe services are shared by `config().jobs` threads.
  // Fails only when the run directory cannot be written; op-level failures are in the report.
  Result<RunReport> execute(RunServices& services);

  // For a run whose ops ran as task runs under dir()/tasks/ (run/tasks.h; `kope run --executor
  // slurm`): every op's state rebuilt from the tasks' event logs, the target and toolchain taken
  // from the tasks' config.json (distinct ones joined by ","), results.json written (complete
  // when every op is done) and run_finished or run_stopped logged (`cancelled` as given). Fails
  // when a task's event log is damaged or the run directory cannot be written.
  Result<RunReport> collect_tasks(bool cancelled);

  // Logs the run's start, the one writer of run_started (run_resumed when the run was opened
  // to resume): its id and op count; a run in this process adds its jobs, a coordinator of task
  // runs its `executor` ("slurm") and task count. Fails with io when the log cannot be written.
  Status log_started(const std::string& executor = {}, std::optional<int64_t> tasks = {});
  // Appends an event of the run itself (no "op": the operators' states ignore it) to its log.
  Status log(const run::Event& event) { return m_events->append(event); }

  // results.json's content for the current states.
  nlohmann::json results(bool complete) const;

 private:
  Run() = default;
  Status write_results(bool complete);
  // The run's end: `report` filled (complete, cancelled, results), results.json written, and
  // run_finished or run_stopped logged with `end`'s detail (its complete and cancelled set here).
  Status finish(RunReport& report, bool complete, bool cancelled, run::RunEndedEvent end);

  RunConfig m_config;
  std::vector<spec::OpSpec> m_ops;
  fs::path m_dir;
  std::unique_ptr<EventLog> m_events;
  std::map<std::string, OpState> m_states;
  bool m_resumed = false;
  int m_lock_fd = -1;
  mutable std::mutex m_mutex;  // guards m_states' map shape and results writing
};

}  // namespace kope::agent
