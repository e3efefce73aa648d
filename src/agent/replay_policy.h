// agent/replay_policy.h — kernels from memory, re-verified and re-timed here (zero tokens).
//
// The candidates: correct, unquarantined kernels with this op's kernel signature and backend
// from this op's best cases, this op's foreign (imported) cases, and the best cases of related
// ops (the same signature among the known ops, or ops retrieval associates with this one);
// never one of this run's, one already tried, or code that already failed for this op on this
// target and toolchain (a timeout may be the machine's load and is retried). Related ops'
// kernels only for an op memory holds no kernel of its own for (agent/replay.h). Ordered: this
// op's own first, then native records (this target and toolchain), then the faster at its
// source, then the older case. Each iteration replays the first; none left ends the op
// ("replay_exhausted"), and so does (unless replay_all) a kernel correct here (plan.h).
#pragma once

#include <set>
#include <string>
#include <vector>

#include "agent/policy.h"

namespace kope::agent {

struct ReplayCandidate {
  memory::CaseRecord source;
  bool native = false;  // recorded on this target and toolchain
  // Recorded on a target whose features this one has (Target::runs_on): under --isa x86-64-v3
  // on an AVX-512 CPU, an AVX2 host's kernel, not an AVX-512 one that would not compile.
  bool runs_here = false;
  // How many ISA features the recorded target names (0 unless it runs here): of two kernels that
  // run here, the one written for the higher level (an AVX-512 host's over an AVX2 host's) is
  // tried first. Speeds recorded at different levels are not comparable (each level has its own
  // reference and library builds), so the level decides before the recorded speed does.
  size_t level = 0;
};

class ReplayPolicy : public CandidatePolicy {
 public:
  explicit ReplayPolicy(OpContext& ctx) : m_ctx(ctx) {}
  Result<Next> propose(int k, const Plan& plan) override;
  bool reflects() const override { return false; }

  // Every kernel the policy could replay now, best first.
  Result<std::vector<ReplayCandidate>> candidates();

 private:
  Result<std::set<std::string>> failed_here();  // code hashes
  Result<std::vector<memory::CaseRecord>> foreign_cases(int per_op);
  Result<std::set<std::string>> related_ops(const spec::SignatureShape& shape);

  OpContext& m_ctx;
};

}  // namespace kope::agent
