// `kope prompts check RUN_DIR`: the prompts a run sent, checked against the rules of
// agent/prompt_check.h (cut items and descriptions, case indices without their dims, empty
// sections, lessons not shown whole, broken tables, repeated items, tier tokens that do not
// match the text).
#include <cstdio>
#include <memory>
#include <string>

#include "agent/prompt_check.h"
#include "cli.h"

namespace kope::cli {

void register_prompts(CLI::App& app, Action& action) {
  auto* group = app.add_subcommand("prompts", "Inspect the prompts of a run");
  group->require_subcommand(1);
  auto* check = group->add_subcommand("check", "Check every prompt of a run directory; exit 1 naming file and line of each finding");
  auto dir = std::make_shared<std::string>();
  auto json = std::make_shared<bool>(false);
  check->add_option("run_dir", *dir, "Run directory (holds events.jsonl and transcripts/)")->required();
  check->add_flag("--json", *json, "Print the findings as JSON");
  check->callback([&action, dir, json] {
    action = [dir, json]() -> Result<int> {
      KOPE_ASSIGN(agent::PromptCheckReport report, agent::check_run_prompts(*dir));
      print(*json ? report.to_json().dump(2) + "\n" : report.to_text());
      return report.ok() ? 0 : 1;
    };
  });
}

}  // namespace kope::cli
