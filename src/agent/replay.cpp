#include "agent/replay.h"

namespace kope::agent {

bool replay_same_op(const memory::TaskInfo& task, const spec::OpSpec& op) {
  return task.op == op.name || (!task.spec_hash.empty() && task.spec_hash == op.spec_hash);
}

std::optional<std::string> replay_stop_reason(const LoopConfig& config, const OpState& state) {
  if (config.policy != Policy::replay || config.replay_all) return std::nullopt;
  if (state.incumbent() != nullptr) return "replay_verified";
  return std::nullopt;
}

}  // namespace kope::agent
