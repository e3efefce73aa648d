// tools/kope/cli_json.h — the objects some commands print with --json, as functions, so that
// `kope mcp`'s tools return exactly what the command line prints (docs/design.md, "The MCP
// surface"). Each fails as its command does.
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "kope/error.h"
#include "kope/spec.h"

namespace kope::cli {

// `kope ops list --json`: one element of its array.
nlohmann::json op_summary_json(const spec::OpSpec& op);
// `kope ops show OP --json`.
nlohmann::json op_json(const spec::OpSpec& op);

// `kope hw --json`: the hardware profile (measured once, then cached; `refresh` measures again)
// with what each kernel backend finds here.
Result<nlohmann::json> hardware_json(bool refresh);

// The options of `kope memory retrieve`.
struct RetrieveOptions {
  std::string op, target, toolchain, backend, stage = "draft", error, bottleneck, text;
  int limit = 20;
  int64_t incumbent = 0;
  // --admit: the prompt's admission for this state, as the agent's active mode makes it.
  bool admit = false;
  std::string suite;
  int64_t window = 128000;
  int64_t generation = 8192;
  std::string mode = "active";  // --admit: the context mode whose admission is shown
};

// `kope memory [--memory PATH] retrieve ... --json` (an array of items; with admit, the admission
// object). `memory` empty: the default store ($KOPE_MEMORY, else <data dir>/memory.db).
Result<nlohmann::json> memory_retrieve_json(const std::string& memory, const RetrieveOptions& o);

}  // namespace kope::cli
