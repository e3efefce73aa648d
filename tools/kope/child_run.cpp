#include "child_run.h"

#include <fmt/format.h>

#include "util/fs.h"
#include "util/strings.h"
#include "util/subprocess.h"

namespace kope::cli {

namespace fs = std::filesystem;
using nlohmann::json;

fs::path self_exe() {
  std::error_code ec;
  fs::path p = fs::read_symlink("/proc/self/exe", ec);
  return ec ? fs::path("kope") : p;
}

Status run_kope_child(const std::vector<std::string>& args, const fs::path& log) {
  util::RunOptions ro;
  ro.spawn.argv = {self_exe().string()};
  ro.spawn.argv.insert(ro.spawn.argv.end(), args.begin(), args.end());
  ro.stdout_cap = 4 << 20;
  ro.stderr_cap = 4 << 20;
  KOPE_ASSIGN(util::RunResult r, util::run(ro));
  std::string before;
  if (auto old = util::read_file(log)) before = *old;  // a resumed experiment keeps the earlier output
  KOPE_TRY(util::write_file_atomic(log, before + fmt::format("$ {}\n{}{}", util::join(ro.spawn.argv, " "), r.out, r.err)));
  if (!r.status.success()) {
    return fail(ErrorKind::io, "`kope {}` {}; its output is in {}:\n{}", util::join(args, " "), r.status.describe(),
                log.string(), util::truncate_text(r.err, 1500, 12));
  }
  return {};
}

Result<json> read_results(const fs::path& run_dir) {
  KOPE_ASSIGN(std::string text, util::read_file(run_dir / "results.json"));
  try {
    return json::parse(text);
  } catch (const json::exception& e) {
    return fail(ErrorKind::corrupt, "{}: {}", (run_dir / "results.json").string(), e.what());
  }
}

void add_child_run_options(CLI::App* cmd, ChildRunOptions& o, const ChildRunHelp& help) {
  cmd->add_option("--iterations", o.iterations, "Iterations per op, every " + help.each)->default_val(4);
  cmd->add_option("--dir", o.dir, help.dir);
  cmd->add_option("--seed", o.seed, "Seed of every " + help.each)->default_val(1);
  cmd->add_option("--llm", o.llm, "Model profile (default: the configured one)");
  cmd->add_option("--policy", o.policy, "llm or replay (as for kope run)");
  cmd->add_option("--suite", o.suite, "Operator suite (as for kope run)");
  cmd->add_option("--run-arg", o.run_args, "An extra argument for every `kope run` (repeatable, e.g. --run-arg=--eval-ci --run-arg=0.2)")
      ->allow_extra_args(false);
  cmd->add_flag("!--no-holdout", o.holdout, help.no_holdout);
  cmd->add_flag("--json", o.json_out, help.json);
}

}  // namespace kope::cli
