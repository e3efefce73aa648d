// agent/progress.h — showing a run's progress on the console.
//
// `live` (a terminal): one line per op in flight (iteration, stage, what it is doing, best
// speedup, tokens) and a run total, redrawn in place; finished ops and notes scroll above.
// `plain` (a pipe or file): one log line per attempt and per finished op.
// `quiet`: nothing. Thread-safe.
#pragma once

#include <chrono>
#include <cstdio>
#include <map>
#include <mutex>
#include <string>

#include "agent/loop.h"

namespace kope::agent {

class ConsoleProgress : public ProgressSink {
 public:
  enum class Style { live, plain, quiet };
  ConsoleProgress(Style style, std::FILE* out, int total_ops);

  void op_started(const std::string& op) override;
  void phase(const std::string& op, int iteration, memory::Stage stage, std::string_view what) override;
  void attempt_done(const std::string& op, const Attempt& a, double best_speedup, int64_t tokens) override;
  void op_resumed(const std::string& op, int attempts, double best_speedup, int64_t tokens) override;
  void best_changed(const std::string& op, double best_speedup) override;
  void op_finished(const std::string& op, const std::string& stop_reason) override;
  void note(const std::string& op, std::string_view line) override;
  // Counts ops a resumed run had already finished.
  void already_done(int done, int solved);
  // Prints a line above the live block (or plainly).
  void message(std::string_view line);
  // Removes the live block; call before printing the final summary.
  void finish();

 private:
  struct OpLine {
    int iteration = 0;
    std::string stage;
    std::string what;
    double best = 0;
    int64_t tokens = 0;
    int attempts = 0;
  };
  void redraw_locked();
  void clear_locked();
  void emit_locked(std::string_view line);
  std::string op_line(const std::string& name, const OpLine& l) const;

  Style m_style;
  std::FILE* m_out;
  int m_total;
  int m_done = 0;
  int m_solved = 0;
  int64_t m_tokens_finished = 0;
  std::map<std::string, OpLine> m_active;
  int m_drawn = 0;
  std::chrono::steady_clock::time_point m_start;
  std::mutex m_mutex;
};

// live when `fd` is a terminal and TERM is not "dumb", else plain.
ConsoleProgress::Style default_progress_style(int fd);

}  // namespace kope::agent
