// tools/kope/cli.h — how command groups plug into the kope executable.
//
// Each group (ops, hw, eval, memory, llm, run, report, ...) lives in its own cmd_<group>.cpp
// and adds its subcommands to the app. A subcommand's callback stores the action to run in
// `action`; main() runs it after parsing and turns a returned Error into a one-line message
// and an exit code (2 for usage/config errors).
#pragma once

#include <functional>

#include <CLI/CLI.hpp>

#include "kope/error.h"

namespace kope::cli {

// The action of the chosen subcommand: returns the process exit code, or an Error.
using Action = std::function<Result<int>()>;

void register_ops(CLI::App& app, Action& action);
void register_hw(CLI::App& app, Action& action);
void register_report(CLI::App& app, Action& action);
void register_llm(CLI::App& app, Action& action);
void register_memory(CLI::App& app, Action& action);
void register_eval(CLI::App& app, Action& action);  // `kope eval` and `kope bench`
void register_run(CLI::App& app, Action& action);
void register_backends(CLI::App& app, Action& action);
void register_transfer(CLI::App& app, Action& action);
void register_ablate(CLI::App& app, Action& action);  // `kope ablate`, the context ablation
void register_prompts(CLI::App& app, Action& action);  // `kope prompts check`
void register_mcp(CLI::App& app, Action& action);      // `kope mcp`, the MCP server

// Prints to stdout; used by every command so output can be captured in tests.
void print(std::string_view text);

}  // namespace kope::cli
