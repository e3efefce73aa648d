// tools/kope/mcp_tools.h — kope's MCP tools and resources (`kope mcp`; docs/design.md, "The MCP
// surface").
//
// The tools are the command line's commands, with its --json objects as their results:
// list_ops, show_op and hardware call the commands' functions (cli_json.h); retrieve_experience
// is `kope memory retrieve --admit --json`; eval_kernel and bench_op run `kope eval --json` /
// `kope bench --json` as a child process of this executable, so a kernel is judged by exactly
// the evaluator and sandbox `kope eval` uses, and a cancelled call kills the child (and with it
// the sandboxed processes). record_attempt judges the source the same way and records the
// evaluator's verdict, never the caller's. start_run runs `kope run` as a child (as `kope
// ablate` does); run_status and run_report read its run directory.
#pragma once

#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "mcp/server.h"

namespace kope::cli {

struct McpSettings {
  std::string memory;        // --memory (empty: $KOPE_MEMORY, else <data dir>/memory.db)
  std::string suite;         // --suite (empty: the built-in ops/)
  double eval_max_seconds = 0;  // --eval-max-seconds: eval_kernel's default timing cap per case (0: kope eval's)
  double eval_ci = 0;           // --eval-ci: its default target CI (0: kope eval's)
  std::filesystem::path runs_dir;  // where start_run puts run directories (<data dir>/runs)
  // Whether a client may name files: the `memory` and `suite` arguments, an op folder or a run
  // directory by its path. Off for a server that remote clients reach (--allow-remote): they
  // get the server's memory, suite and runs, by name.
  bool path_arguments = true;
};

// The runs started through the server, and what the tools share. Destroying it stops those runs
// (they can be resumed with `kope run --resume DIR`). Thread-safe.
class McpKope {
 public:
  explicit McpKope(McpSettings settings);
  ~McpKope();
  McpKope(const McpKope&) = delete;
  McpKope& operator=(const McpKope&) = delete;

  std::vector<mcp::Tool> tools();
  mcp::ResourceSource resources();

  struct StartedRun;

 private:
  McpSettings m_settings;
  std::mutex m_mutex;
  std::map<std::string, std::shared_ptr<StartedRun>> m_runs;  // by run name (its directory's)

  friend struct McpTools;
};

}  // namespace kope::cli
