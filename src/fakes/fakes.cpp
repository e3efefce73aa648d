#include "fakes/fakes.h"

#include <algorithm>
#include <cmath>
#include <set>

#include <fmt/format.h>

#include "util/hash.h"
#include "util/strings.h"

namespace kope::fakes {

namespace {

std::optional<std::string> directive(std::string_view source, std::string_view key) {
  size_t pos = source.find(key);
  if (pos == std::string_view::npos) return std::nullopt;
  size_t start = pos + key.size();
  size_t end = source.find('\n', start);
  return std::string(util::trim(source.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start)));
}

// The fake model's own tokenizer for its reported usage: bytes / 4, deliberately not kope's
// estimate, so the agent's calibration has a difference to learn.
int64_t tokens_of(std::string_view s) { return static_cast<int64_t>((s.size() + 3) / 4); }

}  // namespace

// --- FakeEvaluator ---------------------------------------------------------------------------

Result<eval::EvalResult> FakeEvaluator::evaluate(const spec::OpSpec& op, std::string_view source,
                                                 const eval::EvalOptions& options) {
  size_t seen_before = 0;
  {
    std::lock_guard lock(m_mutex);
    seen_before = static_cast<size_t>(std::count(m_sources.begin(), m_sources.end(), source));
    m_sources.emplace_back(source);
  }
  eval::EvalResult r;
  r.op = op.name;
  r.target = m_config.target;
  r.toolchain = m_config.toolchain;
  r.code_hash = util::sha256_hex(source);
  r.seed = options.seed.value_or(42);
  r.wall_seconds = 0.001;
  auto verdict_text = directive(source, "fake-verdict:");
  eval::Verdict verdict = eval::Verdict::correct;
  if (verdict_text) {
    auto v = eval::parse_verdict(*verdict_text);
    if (!v) return fail(ErrorKind::internal, "fake evaluator: unknown verdict '{}'", *verdict_text);
    verdict = *v;
  } else if (source.find("kope_kernel") == std::string_view::npos) {
    verdict = eval::Verdict::compile_error;
  }
  r.verdict = verdict;
  r.message = directive(source, "fake-message:").value_or(
      verdict == eval::Verdict::correct ? "correct on every case" : std::string(eval::verdict_name(verdict)));
  if (verdict == eval::Verdict::compile_error) r.diagnostics = "candidate.cpp:3:1: error: expected ';'";
  for (const auto& c : op.cases) {
    eval::CaseCheck check;
    check.case_index = c.index;
    check.label = op.case_label(c);
    check.ok = verdict == eval::Verdict::correct;
    if (verdict == eval::Verdict::wrong_result && c.index == 0) check.first_mismatch = "y[0]: got 1, expected 2";
    if (verdict == eval::Verdict::wrong_result && c.index > 0) check.ok = true;
    if (verdict == eval::Verdict::compile_error) break;
    r.cases.push_back(check);
  }
  if (verdict != eval::Verdict::correct || !options.time) return r;
  // fake-time-us and fake-contention: lists, one value per evaluation of this source (the last
  // one repeats).
  auto nth_value = [&](std::string_view key, double fallback) {
    auto s = directive(source, key);
    if (!s) return fallback;
    auto parts = util::split(*s, ',');
    return parts.empty() ? fallback : std::stod(std::string(util::trim(parts[std::min(seen_before, parts.size() - 1)])));
  };
  double t = nth_value("fake-time-us:", m_config.reference_us);
  double contention = nth_value("fake-contention:", 0);
  // The outside load beside the timing: by default enough for waits that disturb to be other
  // work's doing; `fake-outside-load: 0` makes them the kernel's own (then nothing is disturbed).
  double outside = nth_value("fake-outside-load:", eval::contention_disturbed(contention) ? std::max(contention, eval::k_outside_load) : 0.0);
  double log_ref = 0, log_lib = 0;
  int n = 0, n_lib = 0;
  for (const auto* c : op.timed_cases()) {
    eval::CaseTiming ct;
    ct.case_index = c->index;
    ct.label = op.case_label(*c);
    ct.median_us = t;
    ct.ci95_us = t * 0.01;
    ct.samples_us = {t, t, t};
    ct.calls_per_batch = 1;
    ct.reference_us = m_config.reference_us;
    ct.library_us = m_config.library_us;
    ct.roofline_us = m_config.roofline_us;
    ct.fraction_of_roofline = m_config.roofline_us / t;
    ct.floor_us = m_config.floor_us;
    ct.contention = contention;
    ct.outside_load = outside;
    ct.disturbed = eval::contention_disturbed(contention) && eval::outside_load_seen(outside);
    log_ref += std::log(m_config.reference_us / t);
    ++n;
    if (m_config.library_us) {
      log_lib += std::log(*m_config.library_us / t);
      ++n_lib;
    }
    r.timing.push_back(ct);
  }
  if (n > 0) {
    r.speedup_vs_reference = std::exp(log_ref / n);
    r.fraction_of_roofline = m_config.roofline_us / t;
  }
  if (n_lib > 0) r.speedup_vs_library = std::exp(log_lib / n_lib);
  if (options.incumbent_source && n > 0) {
    // The comparison: the ratio of the two fake times, known to ±1%.
    double inc_t = m_config.reference_us;
    if (auto s = directive(*options.incumbent_source, "fake-time-us:")) inc_t = std::stod(std::string(util::split(*s, ',').front()));
    eval::IncumbentComparison c;
    c.ratio = inc_t / t;
    c.lower = c.ratio / 1.01;
    c.upper = c.ratio * 1.01;
    c.alpha = options.decision_alpha;
    c.margin = options.incumbent_margin;
    c.decision = eval::classify_ratio_interval(c.lower, *c.upper, c.margin);
    c.full_timing = c.decision == eval::IncumbentDecision::faster;
    c.contention = contention;
    c.disturbed = eval::contention_disturbed(contention) && eval::outside_load_seen(outside);
    c.outside_load = outside;
    for (const auto& ct : r.timing) {
      eval::CaseComparison cc;
      cc.case_index = ct.case_index;
      cc.label = ct.label;
      cc.ratio = c.ratio;
      cc.lower = c.lower;
      cc.upper = c.upper;
      cc.pairs = cc.pairs_total = 12;
      cc.contention = contention;
      cc.candidate_us = t;
      cc.incumbent_us = inc_t;
      cc.candidate_contention = contention;
      cc.outside_load = outside;
      c.cases.push_back(cc);
      c.pairs += cc.pairs_total;
    }
    r.incumbent = c;
  }
  return r;
}

FakeEvaluator::FakeEvaluator(Config c) : m_config(std::move(c)) {
  if (m_config.hardware) {
    m_hw = *m_config.hardware;
  } else {
    m_hw.target = target();
  }
}

Target FakeEvaluator::target() const {
  auto t = Target::parse(m_config.target);
  return t ? *t : Target{};
}

int FakeEvaluator::calls() const {
  std::lock_guard lock(m_mutex);
  return static_cast<int>(m_sources.size());
}

std::vector<std::string> FakeEvaluator::sources() const {
  std::lock_guard lock(m_mutex);
  return m_sources;
}

// --- InMemoryStore ---------------------------------------------------------------------------

Result<memory::CaseAssessment> InMemoryStore::assess_locked(const memory::CaseRecord& c) const {
  std::optional<int64_t> parent_id = c.parent_id;
  if (!parent_id && !c.parent_key.empty()) {
    auto it = m_by_key.find(c.parent_key);
    if (it == m_by_key.end()) return fail(ErrorKind::not_found, "record_case: parent case '{}' does not exist", c.parent_key);
    parent_id = it->second;
  }
  if (!parent_id) return memory::assess_case(c, nullptr);
  if (*parent_id < 1 || *parent_id > static_cast<int64_t>(m_cases.size())) {
    return fail(ErrorKind::not_found, "record_case: parent case {} does not exist", *parent_id);
  }
  const memory::CaseRecord& p = m_cases[static_cast<size_t>(*parent_id - 1)];
  memory::ParentFacts facts{p.verdict, p.speedup_vs_reference, p.error_signature};
  return memory::assess_case(c, &facts);
}

Result<memory::CaseAssessment> InMemoryStore::assess_attempt(const memory::CaseRecord& c) {
  std::lock_guard lock(m_mutex);
  return assess_locked(c);
}

Result<memory::RecordedCase> InMemoryStore::record_attempt(const memory::CaseRecord& c) {
  std::lock_guard lock(m_mutex);
  ++m_record_calls;
  auto recorded = [](const memory::CaseRecord& r) {
    return memory::RecordedCase{r.id, {r.ratio, r.outcome, r.error_signature, r.quarantine_reason}};
  };
  if (!c.natural_key.empty()) {
    auto it = m_by_key.find(c.natural_key);
    if (it != m_by_key.end()) return recorded(m_cases[static_cast<size_t>(it->second - 1)]);
  }
  KOPE_ASSIGN(memory::CaseAssessment assessed, assess_locked(c));
  memory::CaseRecord rec = c;
  rec.id = static_cast<int64_t>(m_cases.size()) + 1;
  rec.ratio = assessed.ratio;
  rec.outcome = assessed.outcome;
  rec.error_signature = assessed.error_signature;
  rec.quarantine_reason = assessed.quarantine_reason;
  rec.quarantined = !assessed.quarantine_reason.empty();
  rec.quarantine_status = rec.quarantined ? memory::QuarantineStatus::quarantined : memory::QuarantineStatus::none;
  if (!rec.code.empty()) rec.code_hash = util::sha256_hex(rec.code);
  rec.created_at = "2026-01-01T00:00:00Z";
  m_cases.push_back(rec);
  if (!rec.natural_key.empty()) m_by_key[rec.natural_key] = rec.id;
  return recorded(rec);
}

Result<std::optional<memory::CaseRecord>> InMemoryStore::get_case(int64_t id) {
  std::lock_guard lock(m_mutex);
  if (id < 1 || id > static_cast<int64_t>(m_cases.size())) return std::optional<memory::CaseRecord>{};
  return std::optional<memory::CaseRecord>{m_cases[static_cast<size_t>(id - 1)]};
}

Result<std::optional<memory::CaseRecord>> InMemoryStore::find_case(const std::string& natural_key) {
  std::lock_guard lock(m_mutex);
  auto it = m_by_key.find(natural_key);
  if (it == m_by_key.end()) return std::optional<memory::CaseRecord>{};
  return std::optional<memory::CaseRecord>{m_cases[static_cast<size_t>(it->second - 1)]};
}

Result<std::vector<memory::CaseRecord>> InMemoryStore::best_cases(const std::string& op, const std::string& target, int limit) {
  std::lock_guard lock(m_mutex);
  std::vector<memory::CaseRecord> out;
  for (const auto& c : m_cases) {
    if (c.task.op == op && c.verdict == eval::Verdict::correct && !c.quarantined && (target.empty() || c.hardware.target == target)) {
      out.push_back(c);
    }
  }
  std::stable_sort(out.begin(), out.end(), [](const auto& a, const auto& b) {
    return a.speedup_vs_reference.value_or(0) > b.speedup_vs_reference.value_or(0);
  });
  if (limit >= 0 && out.size() > static_cast<size_t>(limit)) out.resize(static_cast<size_t>(limit));
  return out;
}

Result<std::string> InMemoryStore::apply(const memory::LessonDelta& d) {
  std::lock_guard lock(m_mutex);
  using Op = memory::LessonDelta::Op;
  auto find = [&](const std::string& id) -> memory::Lesson* {
    for (auto& l : m_lessons) {
      if (l.id == id) return &l;
    }
    return nullptr;
  };
  std::string id = d.lesson_id;
  if (d.op == Op::add) {
    if (d.lesson.title.empty() || d.lesson.text.empty()) return fail(ErrorKind::usage, "a lesson needs a title and a text");
    memory::Lesson l = d.lesson;
    l.id = fmt::format("L{:04x}{:04x}", m_lessons.size() + 1, util::fnv1a64(l.title) & 0xffff);
    l.status = memory::LessonStatus::active;
    if (d.source_case) l.source_cases.push_back(*d.source_case);
    id = l.id;
    m_lessons.push_back(std::move(l));
  } else {
    memory::Lesson* l = find(d.lesson_id);
    if (!l) return fail(ErrorKind::not_found, "no lesson '{}'", d.lesson_id);
    switch (d.op) {
      case Op::edit:
        if (!d.lesson.title.empty()) l->title = d.lesson.title;
        if (!d.lesson.text.empty()) l->text = d.lesson.text;
        break;
      case Op::upvote: ++l->helpful; break;
      case Op::downvote: ++l->harmful; break;
      case Op::deprecate: l->status = memory::LessonStatus::deprecated; break;
      case Op::merge: l->status = memory::LessonStatus::merged; break;
      case Op::add: break;
    }
  }
  m_deltas.push_back(d);
  return id;
}

Result<std::vector<memory::Lesson>> InMemoryStore::lessons(const memory::LessonScope& f) {
  std::lock_guard lock(m_mutex);
  std::vector<memory::Lesson> out;
  for (const auto& l : m_lessons) {
    // As Store::lessons: an empty field on either side matches anything.
    auto fits = [](const std::string& want, const std::string& have) { return want.empty() || have.empty() || want == have; };
    if (l.status != memory::LessonStatus::active) continue;
    if (!fits(f.category, l.scope.category) || !fits(f.backend, l.scope.backend) || !fits(f.target, l.scope.target) ||
        !fits(f.toolchain, l.scope.toolchain)) {
      continue;
    }
    out.push_back(l);
  }
  return out;
}

namespace {

// What a retrieved case is made of, as the store reads it from the record (no lineage signals).
memory::RetrievedCase case_facts(const memory::CaseRecord& c) {
  memory::RetrievedCase k;
  k.stage = c.stage;
  k.verdict = c.verdict;
  k.outcome = c.outcome;
  k.ratio = c.ratio;
  k.speedup_ref = c.speedup_vs_reference;
  k.parent_id = c.parent_id;
  k.optimisation = c.optimisation;
  k.error_signature = c.error_signature;
  k.backend = c.toolchain.backend;
  return k;
}

}  // namespace

Result<std::vector<memory::RetrievedItem>> InMemoryStore::retrieve(const memory::RetrievalQuery& q) {
  std::lock_guard lock(m_mutex);
  std::vector<memory::RetrievedItem> items;
  std::string stage(memory::stage_name(q.stage));
  for (const auto& l : m_lessons) {
    if (l.status != memory::LessonStatus::active) continue;
    memory::RetrievedItem it;
    it.kind = memory::RetrievedItem::Kind::lesson;
    it.id = "lesson:" + l.id;
    it.lesson = memory::retrieved_lesson(l);
    std::vector<std::vector<memory::CaseTimingRecord>> source_timings;
    std::set<std::string> source_ops;
    for (int64_t id : l.source_cases) {
      if (id < 1 || id > static_cast<int64_t>(m_cases.size())) continue;
      const memory::CaseRecord& c = m_cases[static_cast<size_t>(id - 1)];
      if (c.verdict == eval::Verdict::correct) source_timings.push_back(c.timings);
      if (c.task.arithmetic_intensity > 0 && source_ops.insert(c.task.op).second) {
        it.lesson->source_intensity.push_back(c.task.arithmetic_intensity);
      }
    }
    memory::set_lesson_evidence(*it.lesson, source_timings);
    double cat = l.scope.category.empty() ? 0.3 : (l.scope.category == q.task.category ? 1.0 : 0.1);
    double sig = (!q.last_error_signature.empty() && l.error_signature == q.last_error_signature) ? 0.5 : 0.0;
    auto v = l.value.find(stage);
    double value = v == l.value.end() ? 0.0 : v->second;
    it.score = cat + sig + 0.5 * value + 0.05 * (l.helpful - l.harmful);
    it.score_parts = {{"similarity", cat}, {"signature", sig}, {"value", value}};
    it.foreign = !l.scope.target.empty() && l.scope.target != q.target;
    it.target = l.scope.target;
    it.category = l.scope.category;
    it.learned = value;
    items.push_back(std::move(it));
  }
  // The best correct case per op, and recent failures of this op.
  std::map<std::string, const memory::CaseRecord*> best;
  for (const auto& c : m_cases) {
    if (c.verdict != eval::Verdict::correct || c.quarantined) continue;
    if (q.holdout.excludes(c.task.op, c.task.spec_hash, c.run_id)) continue;
    auto& b = best[c.task.op + "|" + c.hardware.target];
    if (!b || c.speedup_vs_reference.value_or(0) > b->speedup_vs_reference.value_or(0)) b = &c;
  }
  for (const auto& [key, c] : best) {
    double sim = c->task.op == q.task.op ? 1.0 : (c->task.category == q.task.category ? 0.6 : 0.1);
    memory::RetrievedItem it;
    it.kind = memory::RetrievedItem::Kind::best_kernel;
    it.id = fmt::format("case:{}", c->id);
    it.case_id = c->id;
    it.kase = case_facts(*c);
    it.kase->code = c->code;
    it.foreign = c->hardware.target != q.target || c->toolchain.id != q.toolchain;
    it.score = sim + 0.1 * m_case_values[c->id];
    it.score_parts = {{"similarity", sim}};
    it.target = c->hardware.target;
    it.op = c->task.op;
    it.category = c->task.category;
    // The fake knows no intensities: structurally close means the same op or category.
    it.structurally_close = c->task.op == q.task.op || c->task.category == q.task.category;
    it.learned = m_case_values[c->id];
    items.push_back(std::move(it));
  }
  for (const auto& c : m_cases) {
    if (c.verdict == eval::Verdict::correct || c.task.op != q.task.op) continue;
    if (q.holdout.excludes(c.task.op, c.task.spec_hash, c.run_id)) continue;
    memory::RetrievedItem it;
    it.kind = memory::RetrievedItem::Kind::case_summary;
    it.id = fmt::format("case:{}", c.id);
    it.case_id = c.id;
    it.error_signature = c.error_signature;
    it.kase = case_facts(c);
    it.kase->journal = c.journal;
    it.foreign = c.hardware.target != q.target;
    it.score = 0.4;
    it.target = c.hardware.target;
    it.op = c.task.op;
    it.category = c.task.category;
    it.structurally_close = true;
    items.push_back(std::move(it));
  }
  std::stable_sort(items.begin(), items.end(), [](const auto& a, const auto& b) { return a.score > b.score; });
  if (q.limit >= 0 && items.size() > static_cast<size_t>(q.limit)) items.resize(static_cast<size_t>(q.limit));
  return items;
}

Status InMemoryStore::log_retrieval(const memory::RetrievalLogEntry& entry) {
  std::lock_guard lock(m_mutex);
  for (auto& e : m_log) {
    if (e.prompt_id == entry.prompt_id) {
      e = entry;
      return {};
    }
  }
  m_log.push_back(entry);
  return {};
}

Status InMemoryStore::credit(const std::string& prompt_id, double reward) {
  std::lock_guard lock(m_mutex);
  if (m_credited.contains(prompt_id)) return {};  // one outcome per prompt
  const memory::RetrievalLogEntry* entry = nullptr;
  for (const auto& e : m_log) {
    if (e.prompt_id == prompt_id) entry = &e;
  }
  if (!entry) return fail(ErrorKind::not_found, "credit: no retrieval logged for prompt '{}'", prompt_id);
  m_credited[prompt_id] = reward;
  std::string stage(memory::stage_name(entry->stage));
  for (const auto& [id, score] : entry->items) {
    if (id.starts_with("lesson:")) {
      for (auto& l : m_lessons) {
        if ("lesson:" + l.id == id) {
          double& v = l.value[stage];
          v += 0.3 * (reward - v);
        }
      }
    } else if (id.starts_with("case:")) {
      double& v = m_case_values[std::stoll(id.substr(5))];
      v += 0.3 * (reward - v);
    }
  }
  return {};
}

Result<std::vector<memory::CaseRecord>> InMemoryStore::cases(const memory::CaseFilter& f) {
  std::lock_guard lock(m_mutex);
  auto fits = [](const std::string& want, const std::string& have) { return want.empty() || want == have; };
  std::vector<memory::CaseRecord> out;
  for (auto it = m_cases.rbegin(); it != m_cases.rend(); ++it) {  // newest first
    const memory::CaseRecord& c = *it;
    if (f.limit > 0 && out.size() >= static_cast<size_t>(f.limit)) break;
    if (f.before_id > 0 && c.id >= f.before_id) continue;
    if (!fits(f.op, c.task.op) || !fits(f.target, c.hardware.target) || !fits(f.toolchain, c.toolchain.id) ||
        !fits(f.run_id, c.run_id) || (f.verdict && *f.verdict != c.verdict) || !fits(f.error_signature, c.error_signature) ||
        !fits(f.spec_hash, c.task.spec_hash) || (!f.not_run_id.empty() && c.run_id == f.not_run_id)) {
      continue;
    }
    if ((f.stage && *f.stage != c.stage) || (f.outcome && *f.outcome != c.outcome) ||
        (f.quarantined && *f.quarantined != c.quarantined) || (f.foreign_origin && *f.foreign_origin != c.foreign_origin)) {
      continue;
    }
    out.push_back(c);
    if (!f.with_code) out.back().code.clear();
  }
  return out;
}

std::vector<memory::CaseRecord> InMemoryStore::all_cases() const {
  std::lock_guard lock(m_mutex);
  return m_cases;
}

std::vector<memory::LessonDelta> InMemoryStore::deltas() const {
  std::lock_guard lock(m_mutex);
  return m_deltas;
}

std::vector<memory::RetrievalLogEntry> InMemoryStore::retrieval_log() const {
  std::lock_guard lock(m_mutex);
  return m_log;
}

std::map<std::string, double> InMemoryStore::credited() const {
  std::lock_guard lock(m_mutex);
  return m_credited;
}

double InMemoryStore::case_value(int64_t id) const {
  std::lock_guard lock(m_mutex);
  auto it = m_case_values.find(id);
  return it == m_case_values.end() ? 0.0 : it->second;
}

int InMemoryStore::record_calls() const {
  std::lock_guard lock(m_mutex);
  return m_record_calls;
}

Status InMemoryStore::verify_case(int64_t id, bool confirmed, const std::string& note) {
  std::lock_guard lock(m_mutex);
  if (id < 1 || id > static_cast<int64_t>(m_cases.size())) return fail(ErrorKind::not_found, "case {} does not exist", id);
  memory::CaseRecord& c = m_cases[static_cast<size_t>(id - 1)];
  if (!memory::quarantine_holds_back(c.quarantine_status)) {
    return fail(ErrorKind::usage, "case {} is not quarantined ({})", id,
                c.quarantine_status == memory::QuarantineStatus::none ? "never was" : "already verified");
  }
  if (c.quarantine_status == memory::QuarantineStatus::refuted && confirmed) {
    return fail(ErrorKind::usage, "case {} was refuted by an earlier re-verification; record a new case instead", id);
  }
  c.quarantine_status = confirmed ? memory::QuarantineStatus::verified : memory::QuarantineStatus::refuted;
  c.quarantined = !confirmed;
  m_review_notes[id] = note;
  return {};
}

std::map<int64_t, std::string> InMemoryStore::review_notes() const {
  std::lock_guard lock(m_mutex);
  return m_review_notes;
}

// --- ScriptedLlm -----------------------------------------------------------------------------

llm::LlmResult<llm::ChatResponse> ScriptedLlm::chat(const std::vector<llm::Message>& messages, const llm::ChatParams& params) {
  {
    std::lock_guard lock(m_mutex);
    m_calls.push_back({messages, params});
  }
  return m_handler(messages, params);
}

std::vector<ScriptedLlm::Call> ScriptedLlm::calls() const {
  std::lock_guard lock(m_mutex);
  return m_calls;
}

llm::ChatResponse fake_response(const std::vector<llm::Message>& messages, std::string text) {
  llm::ChatResponse r;
  int64_t prompt = 0;
  for (const auto& m : messages) prompt += tokens_of(m.content);
  r.usage.prompt_tokens = prompt;
  r.usage.completion_tokens = tokens_of(text);
  r.text = std::move(text);
  r.finish_reason = "stop";
  r.model = "fake";
  return r;
}

}  // namespace kope::fakes
