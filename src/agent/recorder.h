// agent/recorder.h — an attempt's way into the run's record: the journal, the event log, memory.
//
// journal() writes the attempt's journal (strategy, change, status, numbers, the incumbent
// decision, the reading) that the memory keeps with the case. Recorder::add logs the finished
// attempt ("attempt"), appends it to the op's state and records it; Recorder::record writes
// the memory case (natural key "<run id>/<op>/<k>", so repeating it after a crash is
// idempotent), logs the prompt's retrieval and credits the reward to the memory items the
// prompt used (model attempts only), then logs "recorded" with the case id.
#pragma once

#include <optional>
#include <string>

#include "agent/op_context.h"

namespace kope::agent {

class Recorder {
 public:
  explicit Recorder(OpContext& ctx) : m_ctx(ctx) {}

  // Fails when the event log or the memory cannot be written.
  Status add(Attempt a);
  Status record(const Attempt& a);

 private:
  OpContext& m_ctx;
};

// The memory's record of `a` without its code and journal (what Store::assess_attempt needs);
// Recorder::record adds them.
memory::CaseRecord case_record(const OpContext& ctx, const Attempt& a);

// The journal of `a`, which follows the attempts already in `state`.
std::string journal(const Attempt& a, const OpState& state, const spec::OpSpec& op);

// "1.23x", or "-" without a value.
std::string format_ratio(std::optional<double> v);

}  // namespace kope::agent
