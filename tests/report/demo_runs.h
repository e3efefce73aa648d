// tests/report/demo_runs.h — real run directories for report tests, written by the agent's own
// Run (agent/run.h) with its fakes (fakes/fakes.h): a scripted model whose answers get better
// with the context mode (none < passive < active), a fake evaluator with per-operator library
// baselines, and the real SQLite memory (one database the runs share, as consecutive runs on a
// machine do). Everything in the directories (config.json, events.jsonl, candidates,
// transcripts, results.json) is what `kope run` writes; only the kernels, timings and model are
// fakes. Deterministic.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace kope::report::testing {

struct DemoRun {
  std::string mode;  // none, passive, active
  std::filesystem::path dir;
};

// Writes one run per mode under `root` (root/<mode>) over a dozen suite operators of several
// categories and levels, `iterations` attempts each, recording into the memory database
// demo_memory(root). Fails the current test on errors.
std::vector<DemoRun> make_demo_runs(const std::filesystem::path& root,
                                    const std::vector<std::string>& modes, int iterations = 6);

// The memory database make_demo_runs() writes.
std::filesystem::path demo_memory(const std::filesystem::path& root);

}  // namespace kope::report::testing
