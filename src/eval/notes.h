// eval/notes.h — the sentences an evaluation adds to a result's diagnostics.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace kope::eval {

// Collects notes in the order they are added and renders them one per line. Not thread-safe.
class Notes {
 public:
  void add(std::string note) { m_notes.push_back(std::move(note)); }

  // The notes, one per line ("" when there are none). An empty note adds an empty line only
  // after another note, as the diagnostics have always read.
  std::string text() const {
    std::string t;
    for (const std::string& n : m_notes) t += (t.empty() ? "" : "\n") + n;
    return t;
  }

  // The notes followed by the kernel's output (a failure's diagnostics).
  std::string text_with_output(const std::string& output) const {
    std::string t = text();
    return t.empty() ? output : t + (output.empty() ? "" : "\n" + output);
  }

 private:
  std::vector<std::string> m_notes;
};

}  // namespace kope::eval
