#include "agent/progress.h"

#include <cstdio>

#include <gtest/gtest.h>

namespace kope::agent {
namespace {

std::string contents(std::FILE* f) {
  std::fflush(f);
  std::rewind(f);
  std::string s;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) s.append(buf, n);
  return s;
}

Attempt attempt(int k, eval::Verdict verdict, double speedup) {
  Attempt a;
  a.iteration = k;
  a.stage = k == 1 ? memory::Stage::draft : memory::Stage::refine;
  a.verdict = verdict;
  a.message = "expected ';'";
  if (speedup > 0) {
    a.speedup_vs_reference = speedup;
    a.improved = true;
  }
  return a;
}

TEST(Progress, PlainLogLines) {
  std::FILE* f = std::tmpfile();
  ConsoleProgress p(ConsoleProgress::Style::plain, f, 2);
  p.op_started("softmax");
  p.phase("softmax", 1, memory::Stage::draft, "waiting for the model");
  p.attempt_done("softmax", attempt(1, eval::Verdict::compile_error, 0), 0, 1200);
  p.attempt_done("softmax", attempt(2, eval::Verdict::correct, 2.5), 2.5, 2400);
  p.op_finished("softmax", "iterations");
  std::string out = contents(f);
  EXPECT_NE(out.find("[softmax] started"), std::string::npos);
  EXPECT_NE(out.find("[softmax] attempt 1 (draft): compile_error: expected ';' — best -, 1.2k tokens"), std::string::npos) << out;
  EXPECT_NE(out.find("attempt 2 (refine): correct, 2.50x vs reference (new incumbent) — best 2.50x"), std::string::npos) << out;
  EXPECT_NE(out.find("[softmax] done: solved, best 2.50x vs reference after 2 attempts, 2.4k tokens (stop: iterations)"),
            std::string::npos)
      << out;
  EXPECT_EQ(out.find("\x1b["), std::string::npos);  // no terminal codes in plain mode
  std::fclose(f);
}

// A resumed run restores an op's attempts; when the op then ends without a new one (its stop
// rule already holds), its line still says how it stands.
TEST(Progress, AResumedOpEndsWithTheAttemptsItWasRestoredWith) {
  std::FILE* f = std::tmpfile();
  ConsoleProgress p(ConsoleProgress::Style::plain, f, 2);
  p.op_started("gelu");
  p.op_resumed("gelu", 3, 4.25, 9000);
  p.op_finished("gelu", "library");
  p.op_started("relu");
  p.op_resumed("relu", 1, 0, 1500);
  p.op_finished("relu", "iterations");
  std::string out = contents(f);
  EXPECT_NE(out.find("[gelu] resumed after 3 attempts: best 4.25x, 9.0k tokens"), std::string::npos) << out;
  EXPECT_NE(out.find("[gelu] done: solved, best 4.25x vs reference after 3 attempts, 9.0k tokens (stop: library)"), std::string::npos) << out;
  EXPECT_NE(out.find("[relu] done: not solved after 1 attempts, 1.5k tokens (stop: iterations)"), std::string::npos) << out;
  std::fclose(f);
}

// A quarantined win that its re-verification confirms at the op's end becomes the incumbent
// without a new attempt: the op's last line says it is solved.
TEST(Progress, AWinConfirmedAtTheEndMakesTheOpSolved) {
  std::FILE* f = std::tmpfile();
  ConsoleProgress p(ConsoleProgress::Style::plain, f, 1);
  p.op_started("mul");
  Attempt held = attempt(1, eval::Verdict::correct, 2.29);
  held.improved = false;  // quarantined: no incumbent yet
  p.attempt_done("mul", held, 0, 0);
  p.best_changed("mul", 2.38);
  p.op_finished("mul", "iterations");
  std::string out = contents(f);
  EXPECT_NE(out.find("[mul] done: solved, best 2.38x vs reference after 1 attempts"), std::string::npos) << out;
  std::fclose(f);
}

TEST(Progress, LiveRedrawsInPlaceAndQuietPrintsNothing) {
  std::FILE* f = std::tmpfile();
  ConsoleProgress live(ConsoleProgress::Style::live, f, 3);
  live.op_started("a");
  live.op_started("b");
  live.phase("a", 2, memory::Stage::repair, "evaluating");
  live.attempt_done("b", attempt(1, eval::Verdict::correct, 1.5), 1.5, 900);
  live.finish();
  std::string out = contents(f);
  EXPECT_NE(out.find("\x1b["), std::string::npos);  // cursor movement
  EXPECT_NE(out.find("evaluating"), std::string::npos);
  EXPECT_NE(out.find("kope run: 0/3 ops done"), std::string::npos);
  std::fclose(f);

  std::FILE* q = std::tmpfile();
  ConsoleProgress quiet(ConsoleProgress::Style::quiet, q, 1);
  quiet.op_started("a");
  quiet.attempt_done("a", attempt(1, eval::Verdict::correct, 1.5), 1.5, 900);
  quiet.op_finished("a", "iterations");
  quiet.message("hello");
  EXPECT_EQ(contents(q), "");
  std::fclose(q);
}

}  // namespace
}  // namespace kope::agent
