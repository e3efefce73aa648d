#include "agent/memory_items.h"

#include <algorithm>
#include <cctype>
#include <map>

#include <fmt/format.h>

#include "context/context.h"
#include "eval/registry.h"
#include "util/strings.h"

namespace kope::agent {

namespace {

using memory::CaseLineage;
using memory::RetrievedCase;
using memory::RetrievedItem;
using memory::RetrievedLesson;

// The whole lines of `text` that fit in `max_bytes` (none of a line is shown unless all of it
// is), with a last line saying how many were left out.
std::string whole_lines(std::string_view text, size_t max_bytes) {
  text = util::trim(text);
  if (text.size() <= max_bytes) return std::string(text);
  size_t end = 0;
  for (;;) {
    size_t nl = text.find('\n', end);
    if (nl == std::string_view::npos || nl + 1 > max_bytes) break;
    end = nl + 1;
  }
  size_t left = static_cast<size_t>(std::count(text.begin() + static_cast<std::ptrdiff_t>(end), text.end(), '\n')) + 1;
  return fmt::format("{}({} more line{} of the journal not shown)", text.substr(0, end), left, left == 1 ? "" : "s");
}

// The first line of `s` within `max` bytes, shortened at a clause or word (never mid-word). A
// description an older kope stored cut mid-word ("micro-k...") is shortened the same way.
std::string short_line(std::string_view s, size_t max) {
  std::string_view first = s.substr(0, s.find('\n'));
  for (std::string_view mark : {std::string_view("..."), std::string_view("\xE2\x80\xA6")}) {
    if (first.size() > mark.size() + 1 && first.ends_with(mark) &&
        std::isalnum(static_cast<unsigned char>(first[first.size() - mark.size() - 1]))) {
      first.remove_suffix(mark.size());
      return util::shorten_at_clause(first, std::min(max, first.size() - 1));
    }
  }
  return util::shorten_at_clause(first, max);
}

// The Markdown code-fence language of a backend's kernels ("cpp" for one kope does not know).
std::string fence_of(const std::string& backend) {
  static const std::map<std::string, std::string> fences = eval::backend_code_fences();
  auto it = fences.find(backend);
  return it == fences.end() ? "cpp" : it->second;
}

// How a case stands to the query's incumbent, in words ("" when it does not).
std::string lineage_words(const RetrievedCase& k) {
  switch (k.lineage) {
    case CaseLineage::none: return "";
    case CaseLineage::incumbent: return "the incumbent";
    case CaseLineage::ancestor: return fmt::format("ancestor {} of the incumbent", k.ancestor);
    case CaseLineage::tried_from: return "tried from the incumbent";
    case CaseLineage::sibling_branch: return "a sibling branch of the incumbent";
  }
  return "";
}

}  // namespace

std::optional<std::string> noisy_evidence(const RetrievedLesson& l) {
  if (l.kind != memory::LessonKind::strategy && l.kind != memory::LessonKind::recipe) return std::nullopt;
  if (!l.evidence_spread || l.evidence_cases == 0) return std::nullopt;
  bool loose = *l.evidence_spread > k_noisy_evidence_spread;
  bool disturbed = 2 * l.evidence_disturbed > 1;
  if (!loose && !disturbed) return std::nullopt;
  std::string how = fmt::format("learned from timings to ±{:.0f}%", 100 * *l.evidence_spread);
  if (disturbed) how += fmt::format(", {:.0f}% of them disturbed by other load", 100 * l.evidence_disturbed);
  return how + " (under load): not evidence of speed on a quiet machine";
}

bool other_kind_of_work(double a, double b, double balance) {
  if (!(a > 0) || !(b > 0) || !(balance > 0)) return false;
  if ((a < balance) == (b < balance)) return false;
  return std::max(a, b) >= k_other_work_factor * std::min(a, b);
}

bool lesson_from_other_work(const RetrievedLesson& l, double intensity, double balance) {
  if (l.source_intensity.empty()) return false;
  return std::all_of(l.source_intensity.begin(), l.source_intensity.end(),
                     [&](double ai) { return other_kind_of_work(ai, intensity, balance); });
}

namespace {

std::string lesson_text(const RetrievedItem& item, const RetrievedLesson& l) {
  std::string scope = l.scope.category.empty() ? "any op" : l.scope.category;
  if (!l.scope.backend.empty()) scope += "/" + l.scope.backend;
  if (!l.scope.target.empty()) scope += " on " + l.scope.target;
  std::string text = fmt::format("[lesson {} · {} · {}{}] {}{}{}", l.id, memory::lesson_kind_name(l.kind), scope,
                                 item.foreign ? " · not confirmed on this machine: feasibility only" : "", l.title,
                                 l.text.empty() ? "" : ": ", l.text);
  if (l.kind == memory::LessonKind::fix && !l.error_signature.empty()) text += fmt::format(" (fixes: {})", l.error_signature);
  if (auto noisy = noisy_evidence(l)) text += " [" + *noisy + "]";
  return text;
}

// A best kernel: its header, change, lineage, whether it is the incumbent, and its source.
std::string kernel_text(const RetrievedItem& item, const RetrievedCase& k) {
  std::string text = fmt::format("[best kernel · {} ({}{}) on {} · {:.2f}x vs reference · case {}]\nchange: {}\n", item.op,
                                 item.category, k.similar_op ? ", a similar op" : "", item.target, k.speedup_ref.value_or(0),
                                 item.case_id, short_line(k.optimisation, 1000));
  if (std::string lineage = lineage_words(k); !lineage.empty()) text += "lineage: " + lineage + "\n";
  if (k.other_incumbent) {
    // The fastest by recorded timings, taken at other times and loads; the incumbent is decided
    // side by side, so the two may differ and the reader must know which is which.
    text += fmt::format("not the incumbent (case {}): it was not promoted (a candidate replaces the incumbent when timed "
                        "beside it, and a quarantined win waits for re-verification)\n", *k.other_incumbent);
  }
  if (!k.code) return text;
  if (k.code->size() > k_item_kernel_bytes) {
    return text + fmt::format("(its source, {} bytes, is too long to show whole)\n", k.code->size());
  }
  text += "```" + fence_of(k.backend) + "\n" + *k.code;
  if (!k.code->empty() && k.code->back() != '\n') text += '\n';
  return text + "```\n";
}

// A fix (the failed case, the case that fixed it) or a case summary, then its journal.
std::string case_text(const RetrievedItem& item, const RetrievedCase& k) {
  std::string where = item.foreign ? fmt::format("{} (other hardware or toolchain: shows what compiles and passes "
                                                 "there, not what is fast here)", item.target)
                                   : item.target;
  std::string text;
  if (item.failed_case) {
    std::string failed_msg = short_line(k.failed_message, 200);
    text = fmt::format("[fix · case {} -> case {} · {} on {}]\nerror: {}\n{}fixed by: {}\n", *item.failed_case, item.case_id,
                       item.op, where, k.failed_signature.value_or("?"),
                       failed_msg.empty() ? "" : "message: " + failed_msg + "\n", short_line(k.optimisation, 1000));
  } else {
    std::string result(eval::verdict_name(k.verdict));
    if (k.verdict == eval::Verdict::correct && !item.foreign) {
      result += fmt::format(" · {} r={:.2f}", memory::outcome_name(k.outcome), k.ratio);
      if (k.speedup_ref) result += fmt::format(" · {:.2f}x vs reference", *k.speedup_ref);
      if (item.quarantined) result += " · QUARANTINED: awaiting re-verification, not evidence";
    }
    text = fmt::format("[case {} · {} on {} · {} · {}]\n", item.case_id, item.op, where, memory::stage_name(k.stage), result);
    if (std::string lineage = lineage_words(k); !lineage.empty()) text += "lineage: " + lineage + "\n";
    if (k.parent_id) text += fmt::format("began from: case {}\n", *k.parent_id);
    if (!k.optimisation.empty()) text += "change: " + short_line(k.optimisation, 1000) + "\n";
    if (k.verdict != eval::Verdict::correct && !k.error_signature.empty()) text += "error: " + k.error_signature + "\n";
  }
  if (!k.journal.empty()) text += "journal: " + whole_lines(k.journal, k_item_journal_bytes) + "\n";
  return text;
}

}  // namespace

std::string render_item(const RetrievedItem& item) {
  if (item.kind == RetrievedItem::Kind::lesson) return item.lesson ? lesson_text(item, *item.lesson) : std::string();
  if (!item.kase) return "";
  return item.kind == RetrievedItem::Kind::best_kernel ? kernel_text(item, *item.kase) : case_text(item, *item.kase);
}

int64_t item_tokens(const RetrievedItem& item) { return context::estimate_tokens(render_item(item)); }

}  // namespace kope::agent
