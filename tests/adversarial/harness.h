// Shared set-up for the evaluator's integration tests: a private scratch root, a planted secret,
// a listener that must never be reached, evaluators with test-sized limits, and the check that
// the machine is intact after a hostile kernel ran.
#pragma once

#include <filesystem>
#include <memory>
#include <string>

#include "kope/eval.h"
#include "kope/hw.h"
#include "kope/spec.h"

namespace kope::testing {

namespace fs = std::filesystem;

// The per-process environment: TMPDIR is a fresh directory (sandbox scratch lives there),
// $KOPE_DATA_DIR/memory.db holds a secret, a TCP listener on 127.0.0.1 counts connections.
struct AdversarialWorld {
  fs::path tmp_root;
  fs::path secret_path;
  std::string secret;
  int port = 0;
};
const AdversarialWorld& world();

// Connections the listener accepted so far (must stay 0).
int listener_connections();

// A hardware profile of this host whose peaks are so high that no honest kernel is anywhere
// near the floor (tests that need a real floor build their own).
HardwareProfile test_profile();

// Evaluator options sized for tests: short timeouts, small memory allowance, short timing.
eval::CpuEvaluatorOptions test_options(bool inspect = true);
eval::EvalOptions test_eval_options(bool time);

// Evaluators shared by the tests of this process.
eval::Evaluator& evaluator(bool inspect = true);

spec::OpSpec test_op(const std::string& name);  // from tests/ops

// Empty string when the machine is intact after an evaluation: no process of ours left, no
// scratch directory left, nothing written outside scratch, the secret untouched, no connection.
std::string machine_damage();

}  // namespace kope::testing
