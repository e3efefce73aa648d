// agent/recorder.h — an attempt's way into the run's record: the journal, the event log, memory.
//
// journal() writes the attempt's journal (strategy, change, status, numbers, the incumbent
// decision, the reading) that the memory keeps with the case. Recorder::add logs the finished
// attempt ("attempt"), appends it to the op's state and records the case the judge built and
// assessed for it (AssessedCase: built once, assessed once); Recorder::record records an attempt
// an earlier process logged but did not record (a resumed run). Recording writes the memory case
// (natural key "<run id>/<op>/<k>", so repeating it after a crash is idempotent), logs the
// prompt's retrieval and credits the reward to the memory items the prompt used (model attempts
// only), then logs "recorded" with the case id.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "agent/op_context.h"

namespace kope::agent {

// The memory's view of one attempt, made once when the judge decides it (Judge::decide): the
// case to record, as case_record() built it and with the r the store computed, and what the
// store computed for it (Store::assess_attempt). The recorder adds the code, the journal and
// the wall time when it records the case.
struct AssessedCase {
  memory::CaseRecord record;
  memory::CaseAssessment assessment;
};

class Recorder {
 public:
  explicit Recorder(OpContext& ctx) : m_ctx(ctx) {}

  // Logs `a` and records `assessed`, its case. Fails when the event log or the memory cannot
  // be written.
  Status add(Attempt a, AssessedCase assessed);
  // Records `a`, an attempt of the op's state that the memory does not hold yet (logged by a
  // process that died before recording it), building its case. Fails as add().
  Status record(const Attempt& a);

 private:
  // Completes `c`, the case of `a`, with its code, journal and wall time, records it, logs the
  // retrieval, credits the prompt's items and logs "recorded" with the case's id and the error
  // signature memory computed for it.
  Status write(const Attempt& a, memory::CaseRecord c);

  OpContext& m_ctx;
};

// The memory's record of `a` without its code, journal and wall time (what Store::assess_attempt
// needs); the recorder adds them.
memory::CaseRecord case_record(const OpContext& ctx, const Attempt& a);
// `a`'s timings as the memory records them.
std::vector<memory::CaseTimingRecord> case_timings(const Attempt& a);

// The journal of `a`, which follows the attempts already in `state`.
std::string journal(const Attempt& a, const OpState& state, const spec::OpSpec& op);

// "1.23x", or "-" without a value.
std::string format_ratio(std::optional<double> v);

}  // namespace kope::agent
