#include "agent/replay_policy.h"

#include <algorithm>
#include <map>
#include <set>

#include <fmt/format.h>

#include "agent/replay.h"
#include "hw/isa.h"
#include "util/hash.h"

namespace kope::agent {

namespace {

// Cases `filter` finds; an empty list where the store cannot filter cases (unavailable).
Result<std::vector<memory::CaseRecord>> cases_if_any(memory::Store& store, const memory::CaseFilter& filter) {
  auto found = store.cases(filter);
  if (!found && found.error().kind != ErrorKind::unavailable) return std::unexpected(std::move(found).error());
  return found ? std::move(*found) : std::vector<memory::CaseRecord>{};
}

// Best first: this op's own kernels, then native records, then those recorded on a target this
// one runs, the higher ISA level first, then the faster at its source, then the older case.
void order_candidates(std::vector<ReplayCandidate>& out, const spec::OpSpec& op) {
  std::stable_sort(out.begin(), out.end(), [&](const ReplayCandidate& a, const ReplayCandidate& b) {
    bool a_same = replay_same_op(a.source.task, op), b_same = replay_same_op(b.source.task, op);
    if (a_same != b_same) return a_same;
    if (a.native != b.native) return a.native;
    if (a.runs_here != b.runs_here) return a.runs_here;
    if (a.level != b.level) return a.level > b.level;
    double sa = a.source.speedup_vs_reference.value_or(0), sb = b.source.speedup_vs_reference.value_or(0);
    if (sa != sb) return sa > sb;
    return a.source.id < b.source.id;
  });
}

}  // namespace

Result<std::set<std::string>> ReplayPolicy::failed_here() {
  // Code that already failed for this op here, on this target and toolchain, is not tried again
  // (a timeout may be the machine's load and is retried).
  memory::CaseFilter mine;
  mine.op = m_ctx.op.name;
  mine.target = m_ctx.env.evaluator->target().str();
  mine.toolchain = m_ctx.env.evaluator->toolchain_id();
  mine.foreign_origin = false;
  mine.limit = 1000;
  KOPE_ASSIGN(auto native, cases_if_any(*m_ctx.env.store, mine));
  std::set<std::string> failed;
  for (const auto& c : native) {
    if (c.verdict != eval::Verdict::correct && c.verdict != eval::Verdict::timeout && !c.code_hash.empty()) failed.insert(c.code_hash);
  }
  return failed;
}

Result<std::vector<memory::CaseRecord>> ReplayPolicy::foreign_cases(int per_op) {
  // Kernels of this op imported as foreign (the starter experience, another machine's export)
  // are never best cases, but they may be replayed: the replay re-verifies and re-times them
  // here, and only that native record is evidence. (A foreign kernel of another op is not
  // tried: it is neither evidence nor likely to compute this op.)
  memory::CaseFilter f;
  f.op = m_ctx.op.name;
  f.verdict = eval::Verdict::correct;
  f.foreign_origin = true;
  f.quarantined = false;
  f.with_code = true;
  f.limit = per_op * 4;
  return cases_if_any(*m_ctx.env.store, f);
}

Result<std::set<std::string>> ReplayPolicy::related_ops(const spec::SignatureShape& shape) {
  const spec::OpSpec& op = m_ctx.op;
  std::set<std::string> related;
  for (const auto* o : m_ctx.env.known_ops) {
    if (o->name != op.name && spec::same_parameters(spec::signature_shape(*o), shape)) related.insert(o->name);
  }
  // Best kernels the memory associates with this op (other ops with the same ABI, other machines).
  memory::RetrievalQuery q;
  q.task = task_info(op);
  q.target = m_ctx.env.evaluator->target().str();
  q.toolchain = m_ctx.env.evaluator->toolchain_id();
  q.backend = m_ctx.env.evaluator->backend();
  q.limit = 40;
  q.holdout = m_ctx.env.holdout;
  KOPE_ASSIGN(auto items, m_ctx.env.store->retrieve(q));
  for (const auto& it : items) {
    if (it.kind != memory::RetrievedItem::Kind::best_kernel || !it.id.starts_with("case:")) continue;
    if (!it.op.empty() && it.op != op.name) related.insert(it.op);
  }
  return related;
}

Result<std::vector<ReplayCandidate>> ReplayPolicy::candidates() {
  const OpEnvironment& env = m_ctx.env;
  const spec::OpSpec& op = m_ctx.op;
  spec::SignatureShape shape = spec::signature_shape(op);
  Target here_target = env.evaluator->target();
  std::string here = here_target.str();
  std::string toolchain = env.evaluator->toolchain_id();
  std::set<std::string> tried;
  for (const auto& a : m_ctx.state.attempts) tried.insert(a.code_hash);
  int per_op = std::max(3, m_ctx.cfg.replay_limit * 2);
  KOPE_ASSIGN(std::set<std::string> failed, failed_here());
  std::map<std::string, ReplayCandidate> by_code;
  bool has_own = false;  // memory holds a verified kernel of this op itself (tried or not)
  auto consider = [&](const memory::CaseRecord& c) {
    if (c.verdict != eval::Verdict::correct || c.quarantined || c.code.empty() || c.run_id == env.run_id) return;
    if (env.holdout.excludes(c.task.op, c.task.spec_hash, c.run_id)) return;  // contamination guard
    // A kernel in another backend's language (C++ on OpenCL) cannot be replayed here.
    if (!c.toolchain.backend.empty() && c.toolchain.backend != env.evaluator->backend()) return;
    if (!spec::same_parameters(memory::task_shape(c.task), shape)) return;
    has_own = has_own || replay_same_op(c.task, op);
    std::string h = util::sha256_hex(c.code);
    if (tried.contains(h) || failed.contains(h)) return;
    auto source_target = Target::parse(c.hardware.target);
    ReplayCandidate cand{c, c.hardware.target == here && c.toolchain.id == toolchain,
                         source_target && target_runs_on(*source_target, here_target)};
    if (cand.runs_here) cand.level = source_target->features.size();
    auto it = by_code.find(h);
    // Prefer the native record of a kernel, then the faster one.
    if (it == by_code.end() || (cand.native && !it->second.native) ||
        (cand.native == it->second.native &&
         cand.source.speedup_vs_reference.value_or(0) > it->second.source.speedup_vs_reference.value_or(0))) {
      by_code[h] = cand;
    }
  };
  KOPE_ASSIGN(auto own, env.store->best_cases(op.name, "", per_op));
  for (const auto& c : own) consider(c);
  KOPE_ASSIGN(auto foreign, foreign_cases(per_op));
  for (const auto& c : foreign) consider(c);
  // Another op's kernel (same parameter types) is tried only for an op memory holds no kernel
  // of its own for: it rarely computes this op, and an op with its own kernels would spend its
  // few replay attempts on failures (relu's kernel on softmax).
  std::set<std::string> related;
  if (!has_own) {
    KOPE_ASSIGN(related, related_ops(shape));
  }
  for (const auto& name : related) {
    KOPE_ASSIGN(auto cases, env.store->best_cases(name, "", per_op));
    for (const auto& c : cases) consider(c);
  }
  std::vector<ReplayCandidate> out;
  for (auto& [h, c] : by_code) out.push_back(std::move(c));
  order_candidates(out, op);
  return out;
}

Result<Next> ReplayPolicy::propose(int k, const Plan& plan) {
  KOPE_ASSIGN(auto found, candidates());
  // Nothing left to try: the op ends with its incumbent (one that trails the library) or none.
  if (found.empty()) return Next{std::nullopt, OpEnd::finished, m_ctx.state.incumbent() ? "replay_verified" : "replay_exhausted"};
  const memory::CaseRecord& src = found.front().source;
  Proposal p;
  Attempt& a = p.attempt;
  a.iteration = k;
  a.policy = Policy::replay;
  a.stage = plan.stage;
  a.parent_case_id = src.id;
  a.source_case_id = src.id;
  a.header_found = true;
  a.optimisation = fmt::format("replay of case {} ({} on {}): {}", src.id, src.task.op, src.hardware.target, src.optimisation);
  if (a.optimisation.size() > 200) a.optimisation = a.optimisation.substr(0, 197) + "...";
  a.code = src.code;
  return Next{std::move(p), OpEnd::finished, ""};
}

}  // namespace kope::agent
