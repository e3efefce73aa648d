// Shared set-up for the evaluator's integration tests: a private scratch root, a planted secret,
// a listener that must never be reached, evaluators with test-sized limits, and the check that
// the machine is intact after a hostile kernel ran.
#pragma once

#include <filesystem>
#include <map>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

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
eval::EvaluatorOptions test_options(bool inspect = true);
eval::EvalOptions test_eval_options(bool time);

// Evaluators shared by the tests of this process.
eval::Evaluator& evaluator(bool inspect = true);

spec::OpSpec test_op(const std::string& name);  // from tests/ops

// One kernel of a test corpus (tests/adversarial/corpus, tests/opencl/corpus, tests/cuda/corpus):
// its name (the file's stem) and the `// key: value` header lines it opens with (expect, op,
// time, message, ...).
struct CorpusEntry {
  std::string name;
  fs::path path;
  std::map<std::string, std::string> headers;
};
// Test names and failure messages show the file, not the struct's bytes.
inline void PrintTo(const CorpusEntry& e, std::ostream* os) { *os << e.path.filename().string(); }

// The corpus files of `dir` with this extension (".cpp", ".cl", ".cu"), sorted by name.
std::vector<CorpusEntry> read_corpus(const fs::path& dir, const std::string& extension);

// Empty string when the machine is intact after an evaluation: no process of ours left, no
// scratch directory left, nothing written outside scratch, the secret untouched, no connection.
std::string machine_damage();

}  // namespace kope::testing
