#include "run/tasks.h"

#include <algorithm>
#include <string>

#include "run/events.h"

namespace kope::run {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// `file` (relative to the task's directory) relative to the run's directory.
void rebase(json& holder, const char* key, const fs::path& task_rel) {
  if (!holder.is_object() || !holder.contains(key) || !holder[key].is_string()) return;
  fs::path p = holder[key].get<std::string>();
  if (p.empty() || p.is_absolute()) return;
  holder[key] = (task_rel / p).string();
}

}  // namespace

std::vector<fs::path> task_dirs(const fs::path& run_dir) {
  std::vector<std::pair<int, fs::path>> found;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(run_dir / "tasks", ec)) {
    std::string name = e.path().filename().string();
    if (!e.is_directory() || name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    found.emplace_back(std::stoi(name), e.path());
  }
  std::sort(found.begin(), found.end());
  std::vector<fs::path> dirs;
  for (auto& [index, dir] : found) dirs.push_back(std::move(dir));
  return dirs;
}

Result<std::vector<json>> task_op_events(const fs::path& run_dir) {
  std::vector<json> merged;
  std::error_code ec;
  for (const auto& dir : task_dirs(run_dir)) {
    fs::path log = dir / "events.jsonl";
    if (!fs::exists(log, ec)) continue;
    KOPE_ASSIGN(auto events, read_events(log));
    fs::path rel = fs::relative(dir, run_dir);
    for (auto& e : events) {
      if (!e.contains("op") || !e["op"].is_string()) continue;
      rebase(e, "answer_file", rel);
      if (e.contains("attempt")) rebase(e["attempt"], "code_file", rel);
      e["seq"] = static_cast<int64_t>(merged.size()) + 1;
      merged.push_back(std::move(e));
    }
  }
  return merged;
}

}  // namespace kope::run
