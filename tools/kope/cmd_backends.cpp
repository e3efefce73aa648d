// `kope backends`: which kinds of kernel this machine can judge, and why the others cannot.
#include <nlohmann/json.hpp>

#include "cli.h"
#include "eval/registry.h"
#include "kope/eval.h"
#include "kope/hw.h"

namespace kope::cli {

std::string backends_json(const std::vector<eval::BackendInfo>& list) {
  nlohmann::json a = nlohmann::json::array();
  for (const auto& b : list) {
    a.push_back({{"name", b.name},
                 {"language", b.language},
                 {"target", b.target},
                 {"built", b.built},
                 {"can_compile", b.can_compile},
                 {"usable", b.usable},
                 {"toolchain", b.toolchain},
                 {"detail", b.detail}});
  }
  return a.dump(2);
}

std::string backends_text(const std::vector<eval::BackendInfo>& list) {
  std::string out = fmt::format("{:<8} {:<7} {:<9} {:<18} {}\n", "backend", "usable", "compiles", "target", "detail");
  for (const auto& b : list) {
    out += fmt::format("{:<8} {:<7} {:<9} {:<18} {}\n", b.name, b.usable ? "yes" : "no", b.can_compile ? "yes" : "no", b.target, b.detail);
  }
  return out;
}

void register_backends(CLI::App& app, Action& action) {
  auto* cmd = app.add_subcommand("backends", fmt::format("List the kernel backends ({}): usable here, and why not", eval::backend_names()));
  auto json = std::make_shared<bool>(false);
  cmd->add_flag("--json", *json, "Print JSON");
  cmd->callback([&action, json] {
    action = [json]() -> Result<int> {
      // Static facts are enough: the backends' probes measure nothing.
      auto list = eval::list_backends(describe_host());
      print(*json ? backends_json(list) + "\n" : backends_text(list));
      return 0;
    };
  });
}

}  // namespace kope::cli
