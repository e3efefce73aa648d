// agent/op_context.h — what the collaborators of one op's loop share.
//
// The loop (loop.cpp) and its collaborators (the policies, the model turn, the judge, the
// recorder, the reflector) each take an OpContext: the op, its state, the run's services, and
// the few conveniences every step needs (the event log, the run directory's files, progress,
// seeds, cancellation). A candidate's source travels with its attempt (run::Attempt::code), so
// the in-process path never reads back what it just wrote; only the sources of attempts an
// earlier process made (a resumed run) are read from the run directory. Not thread-safe: one
// op, one thread.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include "agent/loop.h"
#include "run/events.h"

namespace kope::agent {

class OpContext {
 public:
  OpContext(const OpEnvironment& env, const spec::OpSpec& op, OpState& state);

  const OpEnvironment& env;
  const LoopConfig& cfg;
  const spec::OpSpec& op;
  // The op's state, read-only: it changes only by emit() (run::apply).
  const OpState& state;
  const std::string op_dir;  // op_dir_name(op.name): candidates/<op_dir>/, transcripts/<op_dir>/

  // The user asked to stop, or another op hit an error the run cannot go on from.
  bool cancelled() const;
  // The memory's natural key of iteration k: "<run id>/<op>/<k>".
  std::string key(int k) const;
  // A seed derived from the run's seed for iteration k and a purpose (`salt`).
  uint64_t derived_seed(int k, std::string_view salt) const;
  // The data seed of every evaluation of this op's attempts in this process: the attempts are
  // judged on the same inputs (the evaluator then reuses them, eval/evaluator.cpp), derived
  // from the run's seed, else random. Re-verification draws its own.
  uint64_t data_seed() const { return m_data_seed; }
  void phase(int k, memory::Stage stage, std::string_view what) const;
  void note(std::string_view line) const;
  // Logs `e` with this op's name, then applies it to the op's state (run::apply): the only way
  // the loop and its collaborators change the state. Fails with io when the log cannot be
  // written (the state is then unchanged).
  Status emit(run::Event e) const;

  // Writes a file resume depends on (answers, candidate sources) atomically and fsynced;
  // returns `rel`, its path relative to the run directory.
  Result<std::string> write_run_file(const std::string& rel, std::string_view content) const;
  // Writes a transcript (for people: a crash may lose the last one, so it skips the fsyncs).
  Status write_transcript(const std::string& rel, std::string_view content) const;

  // The code fence language of the evaluator's backend.
  std::string lang() const;
  // The reference implementation's source (read once).
  Result<std::string> reference_source();
  const std::optional<std::string>& reference_loaded() const { return m_reference; }

  // The source of `a`: the one it carries when this process made it (Attempt::code), else read
  // from the run directory (an attempt of an earlier process, read back from the log). Fails
  // with not_found or io, naming the file, when it cannot be read; "" for an attempt without
  // code.
  Result<std::string> code_of(const Attempt& a) const;

  // The attempt of iteration k (1-based) and the memory case it was recorded as.
  const Attempt& attempt(int k) const { return state.attempts[static_cast<size_t>(k - 1)]; }
  std::optional<int64_t> case_id(int k) const;

  // The error signature the store computed when it recorded iteration k (for the next repair's
  // query; the "recorded" event carries it); nullopt for a correct attempt and for one a run
  // logged before the event carried it.
  std::optional<std::string> error_signature(int k) const;

 private:
  OpState& m_state;
  std::optional<std::string> m_reference;
  uint64_t m_data_seed;
};

}  // namespace kope::agent
