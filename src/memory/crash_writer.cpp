// kope_memory_crash_writer <db> <first index>: a test helper that writes to the memory as fast
// as it can (cases, batches, retries, lessons, retrieval log and credit) and prints
// "ack <natural key> <id>" only after each write has returned (committed). The crash test kills
// it with SIGKILL at random moments and checks that every acknowledged case survived exactly once.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include <fmt/format.h>

#include "kope/memory.h"
#include "kope/verdict.h"

namespace {

using namespace kope::memory;
namespace eval = kope::eval;

void say(const std::string& line) {
  std::string s = line + "\n";
  size_t off = 0;
  while (off < s.size()) {
    ssize_t n = ::write(1, s.data() + off, s.size() - off);
    if (n <= 0) std::_Exit(3);
    off += static_cast<size_t>(n);
  }
}

CaseRecord make(const std::string& key, int64_t i, std::optional<int64_t> parent) {
  CaseRecord c;
  c.natural_key = key;
  c.run_id = fmt::format("crash-run-{}", i / 50);
  c.task.op = (i % 3 == 0) ? "softmax" : "layernorm";
  c.task.spec_hash = "h-" + c.task.op;
  c.task.category = "normalization";
  c.task.signature = "extern \"C\" void kope_kernel(const float* x, float* y, int64_t N, int64_t D)";
  c.hardware.target = (i % 4 == 0) ? "cuda-sm90" : "x86_64-avx2-fma";
  c.hardware.cpu_model = "crash cpu";
  c.toolchain.id = "g++-12";
  c.toolchain.backend = "cpu";
  c.parent_id = parent;
  c.stage = parent ? Stage::refine : Stage::draft;
  c.optimisation = fmt::format("variant {}", i % 17);
  c.code = fmt::format("// kernel {}\nextern \"C\" void kope_kernel() {{ /* {} */ }}\n", i % 40, i % 40);
  if (i % 5 == 2) {
    c.verdict = eval::Verdict::compile_error;
    c.diagnostics = fmt::format("candidate.cpp:{}:3: error: 'v{}' was not declared in this scope", i % 90, i);
  } else {
    c.verdict = eval::Verdict::correct;
    c.speedup_vs_reference = 1.0 + static_cast<double>(i % 29) / 10.0;
  }
  c.journal = fmt::format("attempt {}: tried variant {}, reading: {}", i, i % 17, eval::verdict_name(c.verdict));
  return c;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s <db> <first index>\n", argv[0]);
    return 2;
  }
  auto store = open_store(argv[1]);
  if (!store) {
    std::fprintf(stderr, "open: %s\n", store.error().message.c_str());
    return 1;
  }
  Database& s = **store;
  int64_t first = std::atoll(argv[2]);
  std::optional<int64_t> parent;
  std::string last_key;
  int64_t last_id = 0;
  for (int64_t i = first;; ++i) {
    say(fmt::format("try {}", i));
    if (i % 7 == 3) {
      std::vector<CaseRecord> batch;
      for (int k = 0; k < 3; ++k) {
        CaseRecord c = make(fmt::format("crash/{}/{}", i, k), i + k, std::nullopt);
        if (k > 0) c.parent_key = fmt::format("crash/{}/0", i);
        batch.push_back(std::move(c));
      }
      auto ids = s.record_cases(batch);
      if (!ids) {
        std::fprintf(stderr, "batch: %s\n", ids.error().message.c_str());
        return 1;
      }
      for (int k = 0; k < 3; ++k) say(fmt::format("ack crash/{}/{} {}", i, k, (*ids)[static_cast<size_t>(k)]));
      continue;
    }
    if (i % 5 == 0) parent.reset();
    std::string key = fmt::format("crash/{}", i);
    auto id = s.record_case(make(key, i, parent));
    if (!id) {
      std::fprintf(stderr, "record: %s\n", id.error().message.c_str());
      return 1;
    }
    say(fmt::format("ack {} {}", key, *id));
    parent = *id;
    if (i % 9 == 4 && !last_key.empty()) {  // a retried write must return the same id
      auto again = s.record_case(make(last_key, i, std::nullopt));
      if (!again || *again != last_id) {
        std::fprintf(stderr, "retry of %s gave a different id\n", last_key.c_str());
        return 1;
      }
      say(fmt::format("ack {} {}", last_key, *again));
    }
    last_key = key;
    last_id = *id;
    if (i % 11 == 5) {
      LessonDelta d;
      d.lesson.kind = LessonKind::strategy;
      d.lesson.title = fmt::format("lesson about variant {}", i % 4);
      d.lesson.text = fmt::format("variant {} tends to help normalization ops", i % 4);
      d.lesson.scope.category = "normalization";
      d.source_case = *id;
      auto lid = s.apply(d);
      if (!lid) {
        std::fprintf(stderr, "lesson: %s\n", lid.error().message.c_str());
        return 1;
      }
      RetrievalLogEntry e;
      e.prompt_id = fmt::format("prompt-{}", i);
      e.case_id = *id;
      e.stage = Stage::refine;
      e.items = {{"lesson:" + *lid, 0.5}, {fmt::format("case:{}", *id), 0.3}};
      if (!s.log_retrieval(e) || !s.credit(e.prompt_id, (i % 2) ? 0.3 : -0.2)) {
        std::fprintf(stderr, "retrieval log or credit failed\n");
        return 1;
      }
    }
  }
}
