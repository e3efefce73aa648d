#include "agent/replay.h"

namespace kope::agent {

bool replay_same_op(const memory::TaskInfo& task, const spec::OpSpec& op) {
  return task.op == op.name || (!task.spec_hash.empty() && task.spec_hash == op.spec_hash);
}

std::optional<std::string> replay_stop_reason(const LoopConfig& config, const OpState& state) {
  if (config.policy != Policy::replay || config.replay_all) return std::nullopt;
  const run::Attempt* best = state.incumbent();
  if (best == nullptr) return std::nullopt;
  // Well below the library here: the op's next kernel may not be. Speeds recorded elsewhere
  // (another run's load, another library build, one thread or two) rank the candidates, and
  // only the time here says which is faster.
  if (best->speedup_vs_library && *best->speedup_vs_library < k_replay_library_floor) return std::nullopt;
  // Nor does a kernel slower here than the plain reference, however it compares with a library
  // that is slower still.
  if (!keeps_up_with_reference(*best)) return std::nullopt;
  return "replay_verified";
}

}  // namespace kope::agent
