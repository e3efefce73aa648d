#include "agent/progress.h"

#include <sys/ioctl.h>
#include <unistd.h>

#include <fmt/format.h>

#include "agent/prompt.h"
#include "util/fs.h"

namespace kope::agent {

namespace {

std::string tokens_text(int64_t t) {
  if (t >= 1000000) return fmt::format("{:.2f}M", static_cast<double>(t) / 1e6);
  if (t >= 1000) return fmt::format("{:.1f}k", static_cast<double>(t) / 1e3);
  return fmt::format("{}", t);
}

std::string elapsed_text(double s) {
  int total = static_cast<int>(s);
  return total >= 3600 ? fmt::format("{}h{:02}m", total / 3600, total / 60 % 60) : fmt::format("{}m{:02}s", total / 60, total % 60);
}

size_t terminal_width(std::FILE* f) {
  winsize ws{};
  if (ioctl(fileno(f), TIOCGWINSZ, &ws) == 0 && ws.ws_col > 20) return ws.ws_col;
  return 100;
}

}  // namespace

ConsoleProgress::Style default_progress_style(int fd) {
  auto term = util::get_env("TERM");
  if (isatty(fd) && (!term || *term != "dumb")) return ConsoleProgress::Style::live;
  return ConsoleProgress::Style::plain;
}

ConsoleProgress::ConsoleProgress(Style style, std::FILE* out, int total_ops)
    : m_style(style), m_out(out), m_total(total_ops), m_start(std::chrono::steady_clock::now()) {}

std::string ConsoleProgress::op_line(const std::string& name, const OpLine& l) const {
  std::string best = l.best > 0 ? fmt::format("{:.2f}x", l.best) : "-";
  return fmt::format("  {:<22} #{:<2} {:<6} {:<22} best {:<7} {} tok", name.substr(0, 22), l.iteration, l.stage,
                     l.what.substr(0, 22), best, tokens_text(l.tokens));
}

void ConsoleProgress::clear_locked() {
  if (m_style != Style::live || m_drawn == 0) return;
  std::fprintf(m_out, "\x1b[%dF", m_drawn);
  for (int i = 0; i < m_drawn; ++i) std::fputs("\x1b[2K\n", m_out);
  std::fprintf(m_out, "\x1b[%dF", m_drawn);
  m_drawn = 0;
}

void ConsoleProgress::redraw_locked() {
  if (m_style != Style::live) return;
  clear_locked();
  size_t width = terminal_width(m_out) - 1;
  int64_t tokens = m_tokens_finished;
  for (const auto& [name, l] : m_active) {
    std::string line = op_line(name, l);
    if (line.size() > width) line.resize(width);
    std::fprintf(m_out, "%s\n", line.c_str());
    tokens += l.tokens;
    ++m_drawn;
  }
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - m_start).count();
  std::string total = fmt::format("kope run: {}/{} ops done, {} solved, {} in flight, {} tokens, {}", m_done, m_total, m_solved,
                                  m_active.size(), tokens_text(tokens), elapsed_text(secs));
  if (total.size() > width) total.resize(width);
  std::fprintf(m_out, "%s\n", total.c_str());
  ++m_drawn;
  std::fflush(m_out);
}

void ConsoleProgress::emit_locked(std::string_view line) {
  if (m_style == Style::quiet) return;
  clear_locked();
  std::fprintf(m_out, "%.*s\n", static_cast<int>(line.size()), line.data());
  redraw_locked();
  std::fflush(m_out);
}

void ConsoleProgress::op_started(const std::string& op) {
  std::lock_guard lock(m_mutex);
  m_active[op];
  if (m_style == Style::plain) emit_locked(fmt::format("[{}] started", op));
  redraw_locked();
}

void ConsoleProgress::phase(const std::string& op, int iteration, memory::Stage stage, std::string_view what) {
  std::lock_guard lock(m_mutex);
  auto& l = m_active[op];
  l.iteration = iteration;
  l.stage = std::string(memory::stage_name(stage));
  l.what = std::string(what);
  redraw_locked();
}

void ConsoleProgress::attempt_done(const std::string& op, const Attempt& a, double best_speedup, int64_t tokens) {
  std::lock_guard lock(m_mutex);
  auto& l = m_active[op];
  l.best = best_speedup;
  l.tokens = tokens;
  l.attempts = a.iteration;
  l.what = eval::verdict_name(a.verdict);
  if (m_style == Style::plain) {
    emit_locked(fmt::format("[{}] attempt {} ({}): {} — best {}, {} tokens", op, a.iteration, memory::stage_name(a.stage),
                            describe_outcome(a), best_speedup > 0 ? fmt::format("{:.2f}x", best_speedup) : "-",
                            tokens_text(tokens)));
  } else {
    redraw_locked();
  }
}

void ConsoleProgress::op_resumed(const std::string& op, int attempts, double best_speedup, int64_t tokens) {
  std::lock_guard lock(m_mutex);
  auto& l = m_active[op];
  l.best = best_speedup;
  l.tokens = tokens;
  l.attempts = attempts;
  if (m_style == Style::plain) {
    emit_locked(fmt::format("[{}] resumed after {} attempts: best {}, {} tokens", op, attempts,
                            best_speedup > 0 ? fmt::format("{:.2f}x", best_speedup) : "-", tokens_text(tokens)));
  } else {
    redraw_locked();
  }
}

void ConsoleProgress::best_changed(const std::string& op, double best_speedup) {
  std::lock_guard lock(m_mutex);
  m_active[op].best = best_speedup;
  if (m_style == Style::live) redraw_locked();
}

void ConsoleProgress::op_finished(const std::string& op, const std::string& stop_reason) {
  std::lock_guard lock(m_mutex);
  OpLine l = m_active[op];
  m_active.erase(op);
  bool finished = stop_reason != "cancelled" && stop_reason != "llm_unavailable";
  if (finished) {
    ++m_done;
    if (l.best > 0) ++m_solved;
  }
  m_tokens_finished += l.tokens;
  std::string line = l.best > 0 ? fmt::format("[{}] {}: solved, best {:.2f}x vs reference after {} attempts, {} tokens (stop: {})",
                                              op, finished ? "done" : "stopped", l.best, l.attempts, tokens_text(l.tokens), stop_reason)
                                : fmt::format("[{}] {}: not solved after {} attempts, {} tokens (stop: {})", op,
                                              finished ? "done" : "stopped", l.attempts, tokens_text(l.tokens), stop_reason);
  emit_locked(line);
}

void ConsoleProgress::note(const std::string& op, std::string_view line) {
  std::lock_guard lock(m_mutex);
  emit_locked(fmt::format("[{}] {}", op, line));
}

void ConsoleProgress::already_done(int done, int solved) {
  std::lock_guard lock(m_mutex);
  m_done += done;
  m_solved += solved;
}

void ConsoleProgress::message(std::string_view line) {
  std::lock_guard lock(m_mutex);
  emit_locked(line);
}

void ConsoleProgress::finish() {
  std::lock_guard lock(m_mutex);
  clear_locked();
  std::fflush(m_out);
}

}  // namespace kope::agent
