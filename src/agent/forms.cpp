#include "agent/forms.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <random>

#include <fmt/format.h>

#include "agent/memory_items.h"
#include "util/diff.h"
#include "util/strings.h"

namespace kope::agent {

namespace {

std::string item_line(const context::Item& it) { return "- " + it.text + "\n"; }

int64_t item_tokens(const SharedEstimator& estimator, const context::Item& it) { return estimator.estimate(item_line(it)); }

// A change description as one line, shortened at a clause or word boundary within `max` bytes.
std::string short_change(std::string_view s, size_t max = 240) {
  std::string line;
  for (char c : s) line += (c == '\n' || c == '\r') ? ' ' : c;
  return util::shorten_at_clause(util::trim(line), max);
}

// The bottleneck of an op of arithmetic intensity `ai` on a machine of `balance` ("" unknown).
std::string bottleneck_of(double ai, double balance) {
  if (balance <= 0 || ai <= 0) return "";
  return ai < balance ? "memory" : "compute";
}

// One hunk of a diff: its header and lines.
struct Hunk {
  std::vector<util::DiffLine> lines;
  int changed = 0;
  size_t bytes = 0;
};

std::vector<Hunk> hunks_of(std::string_view before, std::string_view after, int context_lines) {
  util::DiffOptions opt;
  opt.context = context_lines;
  util::Diff d = util::line_diff(before, after, opt);
  std::vector<Hunk> out;
  for (const auto& l : d.lines) {
    if (l.kind == util::DiffLine::Kind::hunk || out.empty()) out.emplace_back();
    Hunk& h = out.back();
    h.lines.push_back(l);
    h.bytes += l.text.size() + 2;
    if (l.kind == util::DiffLine::Kind::added || l.kind == util::DiffLine::Kind::removed) ++h.changed;
  }
  return out;
}

std::string hunk_text(const Hunk& h) {
  util::Diff d;
  d.lines = h.lines;
  return util::unified_text(d);
}

// What the retrieved item of a candidate is, for the rule "foreign only where no native item of
// the same kind exists".
std::string kind_of(const memory::RetrievedItem& r) {
  switch (r.kind) {
    case memory::RetrievedItem::Kind::lesson: return "lesson";
    case memory::RetrievedItem::Kind::best_kernel: return "kernel";
    case memory::RetrievedItem::Kind::case_summary: return r.failed_case ? "fix" : "case";
  }
  return "case";
}

bool is_pitfall(const memory::RetrievedItem& r) {
  return r.lesson && (r.lesson->kind == memory::LessonKind::pitfall || r.lesson->kind == memory::LessonKind::fix);
}

}  // namespace

std::string digest_text(std::string_view text) {
  std::string out;
  for (const auto& line : util::split(std::string(text), '\n')) {
    if (line.starts_with("```") || line.starts_with("journal:") || line.starts_with("lineage:")) break;
    if (line.empty()) continue;
    out += line + "\n";
  }
  return std::string(util::trim(out));
}

std::string diff_within(std::string_view before, std::string_view after, size_t max_bytes, int context_lines) {
  std::vector<Hunk> hunks = hunks_of(before, after, context_lines);
  std::string out;
  size_t shown = 0;
  for (const auto& h : hunks) {
    if (out.size() + h.bytes > max_bytes) break;
    out += hunk_text(h);
    ++shown;
  }
  if (shown == 0) return "";
  if (shown < hunks.size()) {
    size_t left = hunks.size() - shown;
    out += fmt::format("({} more hunk{} not shown)\n", left, left == 1 ? "" : "s");
  }
  return out;
}

Result<std::string> kernel_recipe(memory::Store& store, int64_t id, size_t max_steps) {
  std::vector<memory::CaseRecord> chain;
  std::optional<int64_t> cur = id;
  for (int guard = 0; cur && guard < 64; ++guard) {
    KOPE_ASSIGN(auto rec, store.get_case(*cur));
    if (!rec) break;
    cur = rec->parent_id;
    chain.push_back(std::move(*rec));
  }
  if (chain.empty()) return std::string();
  std::reverse(chain.begin(), chain.end());
  std::vector<const memory::CaseRecord*> steps;
  for (const auto& c : chain) {
    if (c.verdict == eval::Verdict::correct && c.speedup_vs_reference) steps.push_back(&c);
  }
  // A step timed mostly under outside load: its figure, and a ratio against it, are uncertain.
  auto under_load = [](const memory::CaseRecord& c) {
    int timed = 0, disturbed = 0;
    for (const auto& t : c.timings) {
      if (!(t.median_us > 0)) continue;
      ++timed;
      disturbed += t.disturbed ? 1 : 0;
    }
    return 2 * disturbed > timed;
  };
  std::string out;
  size_t first = steps.size() > max_steps ? steps.size() - max_steps : 0;
  if (first > 0) out += fmt::format("({} earlier step{} not shown)\n", first, first == 1 ? "" : "s");
  for (size_t i = first; i < steps.size(); ++i) {
    const memory::CaseRecord& c = *steps[i];
    std::string measured = i == 0 ? fmt::format("first correct kernel, {:.2f}x vs reference", *c.speedup_vs_reference)
                                  : fmt::format("{:.2f}x over step {}", *c.speedup_vs_reference / *steps[i - 1]->speedup_vs_reference, i);
    if (under_load(c) || (i > 0 && under_load(*steps[i - 1]))) measured += " (timed under outside load: uncertain)";
    out += fmt::format("{}. {} ({}) - {}\n", i + 1, short_change(c.optimisation), memory::stage_name(c.stage), measured);
  }
  return out;
}

std::string render_op_pack(const std::vector<context::Item>& items) {
  std::string out;
  for (const auto& it : items) out += item_line(it);
  return out;
}

OpPackChoice choose_op_pack(const KnowledgeCandidates& knowledge, const std::vector<memory::RetrievedItem>& retrieved,
                            const spec::OpSpec& op, const SharedEstimator& estimator, double intensity, double balance) {
  std::set<std::string> pitfalls, noisy;
  for (const auto& r : retrieved) {
    if (r.kind != memory::RetrievedItem::Kind::lesson) continue;
    if (is_pitfall(r)) pitfalls.insert(r.id);
    if (r.lesson && (noisy_evidence(*r.lesson) || lesson_from_other_work(*r.lesson, intensity, balance))) noisy.insert(r.id);
  }
  // Candidates: lessons only, native before foreign, by value.
  std::vector<const context::Item*> lessons;
  for (const auto* list : {&knowledge.warm, &knowledge.cold}) {
    for (const auto& it : *list) {
      if (!it.id.starts_with("lesson:")) continue;
      bool for_op = it.category == op.category || (it.category.empty() && it.learned > 0);
      if (!for_op || it.learned < 0) continue;  // another category's, or one that hurt here
      if (noisy.contains(it.id)) continue;       // learned under load, or on another kind of work
      lessons.push_back(&it);
    }
  }
  std::stable_sort(lessons.begin(), lessons.end(), [](const context::Item* a, const context::Item* b) {
    if (a->foreign != b->foreign) return !a->foreign;
    return a->value > b->value;
  });
  OpPackChoice pack;
  std::set<std::string> native_kinds;  // "lesson" / "pitfall" kinds a native lesson covers
  size_t n_lessons = 0, n_pitfalls = 0;
  int64_t used = 0;
  for (const context::Item* it : lessons) {
    bool pitfall = pitfalls.contains(it->id);
    std::string kind = pitfall ? "pitfall" : "lesson";
    if (it->foreign && native_kinds.contains(kind)) continue;
    if (pitfall ? n_pitfalls >= k_op_pack_pitfalls : n_lessons >= k_op_pack_lessons) continue;
    context::Item copy = *it;
    copy.section = "op_pack";
    copy.tokens = item_tokens(estimator, copy);
    if (used + copy.tokens > k_op_pack_tokens - k_op_pack_heading_tokens) continue;
    copy.admitted_for = it->learned > 0 ? fmt::format("learned value {:+.2f}", it->learned)
                                        : it->category == op.category ? "exact key (lesson for " + op.category + ")"
                                                                      : "lesson for any op";
    used += copy.tokens;
    (pitfall ? n_pitfalls : n_lessons) += 1;
    if (!it->foreign) native_kinds.insert(kind);
    pack.items.push_back(std::move(copy));
  }
  pack.text = render_op_pack(pack.items);
  return pack;
}

OpPackChoice random_op_pack(const KnowledgeCandidates& knowledge, int64_t tokens, uint64_t seed,
                            const SharedEstimator& estimator) {
  std::vector<const context::Item*> pool;
  for (const auto* list : {&knowledge.warm, &knowledge.cold}) {
    for (const auto& it : *list) pool.push_back(&it);
  }
  std::mt19937_64 rng(seed);
  std::shuffle(pool.begin(), pool.end(), rng);
  OpPackChoice pack;
  int64_t used = 0;
  for (const context::Item* it : pool) {
    if (used >= tokens - tokens / 20) break;
    context::Item copy = *it;
    copy.section = "op_pack";
    copy.tokens = item_tokens(estimator, copy);
    if (used + copy.tokens > tokens + tokens / 20) continue;
    copy.admitted_for = "random control";
    used += copy.tokens;
    pack.items.push_back(std::move(copy));
  }
  pack.text = render_op_pack(pack.items);
  return pack;
}

Result<KnowledgeCandidates> active_forms(memory::Store& store, const KnowledgeCandidates& knowledge,
                                         const std::vector<memory::RetrievedItem>& retrieved, const FormContext& fc,
                                         const SharedEstimator& estimator, const std::set<std::string>& exclude) {
  const spec::OpSpec& op = *fc.op;
  std::map<std::string, const memory::RetrievedItem*> by_id;
  for (const auto& r : retrieved) by_id.emplace(r.id, &r);
  // Which kinds native experience covers: foreign items of those kinds stay out.
  std::set<std::string> native;
  for (const auto* list : {&knowledge.warm, &knowledge.cold}) {
    for (const auto& it : *list) {
      auto r = by_id.find(it.id);
      if (r != by_id.end() && !r->second->foreign && !exclude.contains(it.id)) native.insert(kind_of(*r->second));
    }
  }
  KnowledgeCandidates out;
  out.scores = knowledge.scores;
  struct Ranked {
    context::Item item;
    double rank = 0;
  };
  std::vector<Ranked> exemplars, fixes, hunks;
  auto add = [&](context::Item it) {
    it.tokens = item_tokens(estimator, it);
    (it.tier == context::Tier::warm ? out.warm : out.cold).push_back(std::move(it));
  };
  for (const auto* list : {&knowledge.warm, &knowledge.cold}) {
    for (const auto& cand : *list) {
      if (exclude.contains(cand.id)) continue;
      auto found = by_id.find(cand.id);
      if (found == by_id.end()) {  // a general note
        add(cand);
        continue;
      }
      const memory::RetrievedItem& r = *found->second;
      std::string kind = kind_of(r);
      if (r.foreign && native.contains(kind)) continue;
      if (r.foreign && r.learned < 0) continue;  // experience from elsewhere that hurt here
      context::Item it = cand;
      const bool same_category = r.op == op.name || (!it.category.empty() && it.category == op.category);
      if (kind == "lesson") {
        if (r.lesson && noisy_evidence(*r.lesson)) continue;  // learned under load: not evidence of speed here
        if (r.lesson && lesson_from_other_work(*r.lesson, fc.intensity, fc.balance)) continue;
        const bool fix = r.lesson && r.lesson->kind == memory::LessonKind::fix;
        it.exact_key = (fix && !fc.error_signature.empty() && r.error_signature == fc.error_signature) ||
                       (!it.category.empty() && it.category == op.category);
        add(std::move(it));
        continue;
      }
      // Cases and kernels: read the case for its code, lineage and intensity.
      std::optional<memory::CaseRecord> rec;
      if (r.case_id > 0) {
        KOPE_ASSIGN(rec, store.get_case(r.case_id));
      }
      // Another op limited by something else (memory against arithmetic): its kernels and
      // changes do not transfer.
      if (rec && r.op != op.name && other_kind_of_work(rec->task.arithmetic_intensity, fc.intensity, fc.balance)) continue;
      std::string item_bottleneck = rec ? bottleneck_of(rec->task.arithmetic_intensity, fc.balance) : "";
      const bool same_bottleneck = !fc.bottleneck.empty() && item_bottleneck == fc.bottleneck;
      it.exact_key = same_category && (same_bottleneck || r.op == op.name);
      if (kind == "fix") it.exact_key = !fc.error_signature.empty() && r.error_signature == fc.error_signature;
      if (rec && !fc.incumbent_code.empty() && rec->code == fc.incumbent_code) continue;  // the incumbent, shown already
      const std::string digest = digest_text(cand.text);  // with the "(recorded on <target>, ...)" of a foreign item
      if (kind == "kernel" && fc.stage == memory::Stage::draft && same_category && rec && !r.foreign) {
        // The exemplar: whole when short, else its recipe.
        context::Item ex = it;
        ex.section = "exemplar";
        int64_t code_tokens = estimator.estimate(rec->code);
        if (code_tokens <= k_exemplar_whole_tokens) {
          ex.text = digest + "\n" + fence_code(rec->code, fc.lang);
        } else {
          KOPE_ASSIGN(std::string recipe, kernel_recipe(store, rec->id));
          ex.text = digest + fmt::format("\nIts source is long (about {} tokens); the changes that built it, as measured here:\n",
                                         code_tokens) + recipe;
        }
        ex.reason = "exemplar: " + it.reason;
        double rank = (r.op == op.name ? 2.0 : 0.0) + (same_bottleneck ? 1.0 : 0.0) + it.value;
        exemplars.push_back({std::move(ex), rank});
        continue;
      }
      // A fix of the same error: a fix link, or a correct kernel whose parent failed that way.
      std::optional<int64_t> failed_id = r.failed_case;
      if (!failed_id && rec && rec->verdict == eval::Verdict::correct) failed_id = rec->parent_id;
      if (fc.stage == memory::Stage::repair && !fc.error_signature.empty() && same_category && rec && failed_id) {
        KOPE_ASSIGN(auto failed, store.get_case(*failed_id));
        bool same_error = failed && failed->verdict != eval::Verdict::correct && failed->error_signature == fc.error_signature;
        std::string diff = same_error ? diff_within(failed->code, rec->code, 1100) : "";
        if (!diff.empty()) {
          context::Item fx = it;
          fx.section = "fix";
          fx.exact_key = true;
          fx.text = fmt::format("[fix · {} ({}) · case {} -> case {}]\nerror: {}\nfixed by: {}\nThe fix, as a diff of the failed kernel:\n```diff\n{}```",
                                rec->task.op, rec->task.category, failed->id, rec->id, failed->error_signature,
                                short_change(rec->optimisation), diff);
          fx.reason = "the same error fixed before: " + it.reason;
          fixes.push_back({std::move(fx), it.value});
          continue;
        }
      }
      if (kind == "case" && fc.stage == memory::Stage::refine && same_category && r.structurally_close && rec &&
          !r.foreign && !r.quarantined && rec->verdict == eval::Verdict::correct && rec->parent_id && rec->ratio >= 1.05) {
        KOPE_ASSIGN(auto parent, store.get_case(*rec->parent_id));
        if (parent && parent->verdict == eval::Verdict::correct) {
          // The hunk that changed most within the cap: the change, before -> after.
          std::vector<Hunk> hs = hunks_of(parent->code, rec->code, 2);
          const Hunk* best = nullptr;
          for (const auto& h : hs) {
            if (h.bytes <= 900 && (!best || h.changed > best->changed)) best = &h;
          }
          if (best) {
            context::Item hk = it;
            hk.section = "hunks";
            hk.text = fmt::format("[change that paid · {} ({}{}) · {:.2f}x over the kernel it changed, measured on this machine · case {}]\n"
                                  "change: {}\n```diff\n{}```{}",
                                  rec->task.op, rec->task.category, item_bottleneck.empty() ? "" : ", " + item_bottleneck + "-bound",
                                  rec->ratio, rec->id, short_change(rec->optimisation), hunk_text(*best),
                                  hs.size() > 1 ? fmt::format("\n({} other hunk{} of this change not shown)", hs.size() - 1,
                                                              hs.size() == 2 ? "" : "s")
                                                : "");
            hk.reason = "a change that paid on a close op: " + it.reason;
            double rank = (same_bottleneck ? 2.0 : 0.0) + std::log(rec->ratio) + it.value;
            hunks.push_back({std::move(hk), rank});
            continue;
          }
        }
      }
      // Everything else as a digest: what changed and how it ended, never code.
      it.text = digest;
      if (it.text.empty()) continue;
      add(std::move(it));
    }
  }
  auto keep_best = [&](std::vector<Ranked>& v, size_t n) {
    std::stable_sort(v.begin(), v.end(), [](const Ranked& a, const Ranked& b) { return a.rank > b.rank; });
    if (v.size() > n) v.resize(n);
    for (auto& x : v) add(std::move(x.item));
  };
  keep_best(exemplars, 1);
  keep_best(fixes, 1);
  keep_best(hunks, k_refine_hunks);
  return out;
}

}  // namespace kope::agent
