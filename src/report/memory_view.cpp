#include "report/memory_view.h"

#include <fmt/format.h>

#include "kope/memory.h"
#include "util/strings.h"

namespace kope::report {

namespace {

std::string scope_words(const memory::LessonScope& s) {
  std::vector<std::string> parts;
  for (const std::string* p : {&s.category, &s.backend, &s.target, &s.toolchain}) {
    if (!p->empty()) parts.push_back(*p);
  }
  return parts.empty() ? "any" : util::join(parts, " · ");
}

}  // namespace

Result<MemoryOverview> load_memory_overview(const std::filesystem::path& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) {
    return fail(ErrorKind::not_found, "{}: no memory database here (a report never creates one)",
                path.string());
  }
  KOPE_ASSIGN(auto store, memory::open_store(path));
  KOPE_ASSIGN(memory::Stats stats, store->stats());
  MemoryOverview m;
  m.path = path.string();
  m.tasks = stats.tasks;
  m.cases = stats.cases;
  m.lessons = stats.lessons;
  m.targets = stats.targets;
  m.bytes = stats.bytes;
  m.by_verdict = stats.by_verdict;
  m.by_outcome = stats.by_outcome;

  memory::LessonFilter lf;
  lf.limit = 0;  // every lesson, whatever its status
  KOPE_ASSIGN(auto lessons, store->find_lessons(lf));
  for (const auto& l : lessons) {
    MemoryLesson x;
    x.id = l.id;
    x.kind = std::string(memory::lesson_kind_name(l.kind));
    x.status = std::string(memory::lesson_status_name(l.status));
    x.title = l.title;
    x.text = l.text;
    x.scope = scope_words(l.scope);
    x.helpful = l.helpful;
    x.harmful = l.harmful;
    x.value = l.value;
    x.source_cases = l.source_cases.size();
    m.all_lessons.push_back(std::move(x));
  }

  memory::CaseFilter cf;
  cf.quarantined = true;  // quarantined or refuted
  cf.limit = 0;
  KOPE_ASSIGN(auto cases, store->cases(cf));
  for (const auto& c : cases) {
    MemoryCase q;
    q.id = c.id;
    q.op = c.task.op;
    q.target = c.hardware.target;
    q.run_id = c.run_id;
    q.optimisation = c.optimisation;
    q.speedup_vs_reference = c.speedup_vs_reference;
    q.fraction_of_roofline = c.fraction_of_roofline;
    q.status = memory::quarantine_status_name(c.quarantine_status == memory::QuarantineStatus::none
                                                  ? memory::QuarantineStatus::quarantined
                                                  : c.quarantine_status);
    q.reason = c.quarantine_reason;
    q.created_at = c.created_at;
    m.quarantined.push_back(std::move(q));
  }
  return m;
}

}  // namespace kope::report
