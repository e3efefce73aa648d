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

}  // namespace kope::cli
