#include "context/context.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <optional>
#include <queue>
#include <random>

namespace kope::context {

namespace {

// Hashed word trigrams of a text, sorted and unique, capped for speed.
std::vector<uint32_t> shingles(std::string_view text) {
  std::vector<uint32_t> words;
  uint32_t h = 2166136261u;
  bool in_word = false;
  for (char ch : text) {
    auto c = static_cast<unsigned char>(ch);
    if (std::isalnum(c) || c == '_') {
      h = (h ^ static_cast<uint32_t>(std::tolower(c))) * 16777619u;
      in_word = true;
    } else if (in_word) {
      words.push_back(h);
      h = 2166136261u;
      in_word = false;
    }
  }
  if (in_word) words.push_back(h);
  std::vector<uint32_t> out;
  if (words.size() < 3) {
    out = words;
  } else {
    out.reserve(words.size() - 2);
    for (size_t i = 0; i + 2 < words.size(); ++i) {
      out.push_back((words[i] * 31u + words[i + 1]) * 31u + words[i + 2]);
    }
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  // Keep a bottom-k sketch: the k smallest hashes estimate Jaccard well for large texts.
  constexpr size_t k_max = 256;
  if (out.size() > k_max) out.resize(k_max);
  return out;
}

double jaccard(const std::vector<uint32_t>& a, const std::vector<uint32_t>& b) {
  if (a.empty() && b.empty()) return 1.0;
  if (a.empty() || b.empty()) return 0.0;
  size_t i = 0, j = 0, inter = 0;
  while (i < a.size() && j < b.size()) {
    if (a[i] == b[j]) {
      ++inter;
      ++i;
      ++j;
    } else if (a[i] < b[j]) {
      ++i;
    } else {
      ++j;
    }
  }
  return static_cast<double>(inter) / static_cast<double>(a.size() + b.size() - inter);
}

int64_t sum_tokens(const std::vector<Item>& items) {
  int64_t t = 0;
  for (const auto& it : items) t += it.tokens;
  return t;
}

// "learned value +0.31": the admission reason of an item that paid off before.
std::string fmt_learned(double v) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "learned value %+.2f", v);
  return buf;
}

constexpr size_t k_shortlist = 2048;

// Greedy selection by (value − λ·max similarity to what is chosen) per token, lazily
// re-evaluated: a penalty only grows as more is chosen, so a stale bound is an upper bound.
// Each candidate remembers its largest similarity so far and how many chosen items it has been
// compared with, so a re-evaluation only compares it with the items chosen since.
// Returns which candidates were taken.
std::vector<bool> greedy(const std::vector<Item>& candidates, int64_t budget, double lambda, std::vector<Item>& chosen,
                         std::vector<std::vector<uint32_t>>& chosen_sketches, int64_t& used, double floor_per_token = 0) {
  struct Entry {
    double bound;
    size_t index;
    size_t evaluated_at;  // chosen_sketches.size() when bound was computed
    bool operator<(const Entry& o) const { return bound < o.bound || (bound == o.bound && index > o.index); }
  };
  std::vector<std::vector<uint32_t>> sketches(candidates.size());
  std::vector<double> max_sim(candidates.size(), 0.0);
  std::vector<size_t> compared(candidates.size(), 0);
  std::vector<bool> taken(candidates.size(), false);
  auto gain = [&](size_t i) {
    if (lambda != 0) {
      for (size_t j = compared[i]; j < chosen_sketches.size(); ++j) {
        max_sim[i] = std::max(max_sim[i], jaccard(sketches[i], chosen_sketches[j]));
      }
    }
    compared[i] = chosen_sketches.size();
    double adjusted = candidates[i].value - lambda * max_sim[i] * std::max(candidates[i].value, 0.0);
    return adjusted / static_cast<double>(std::max<int64_t>(1, candidates[i].tokens));
  };
  // Only the k_shortlist best by value per token compete: with thousands of candidates the
  // penalty comparisons dominate, and items far down that ranking are not picked in practice.
  std::vector<size_t> order;
  order.reserve(candidates.size());
  for (size_t i = 0; i < candidates.size(); ++i) {
    if (candidates[i].tokens <= budget - used) order.push_back(i);  // others can never fit
  }
  if (order.size() > k_shortlist) {
    auto density = [&](size_t i) { return candidates[i].value / static_cast<double>(std::max<int64_t>(1, candidates[i].tokens)); };
    std::nth_element(order.begin(), order.begin() + k_shortlist, order.end(),
                     [&](size_t a, size_t b) { return density(a) > density(b) || (density(a) == density(b) && a < b); });
    order.resize(k_shortlist);
  }
  std::vector<Entry> entries;
  entries.reserve(order.size());
  for (size_t i : order) {
    sketches[i] = shingles(candidates[i].text);
    entries.push_back({gain(i), i, chosen_sketches.size()});
  }
  std::priority_queue<Entry> heap(std::less<Entry>(), std::move(entries));
  while (!heap.empty() && used < budget) {
    Entry top = heap.top();
    heap.pop();
    const Item& item = candidates[top.index];
    if (used + item.tokens > budget) continue;  // may still fit something smaller
    if (top.evaluated_at != chosen_sketches.size()) {
      heap.push({gain(top.index), top.index, chosen_sketches.size()});
      continue;
    }
    if (top.bound <= 0 || top.bound < floor_per_token) break;  // nothing left adds enough value
    chosen.push_back(item);
    chosen_sketches.push_back(sketches[top.index]);
    taken[top.index] = true;
    used += item.tokens;
  }
  return taken;
}

void add_dropped(const std::vector<Item>& candidates, const std::vector<bool>& taken, std::vector<std::string>& dropped) {
  for (size_t i = 0; i < candidates.size(); ++i) {
    if (!taken[i]) dropped.push_back(candidates[i].id);
  }
}

// The cold tier: every cold item competes for the base cap; what is left of the items with a
// positive learned value competes again for the room the grown cap adds.
void select_cold(const std::vector<Item>& cold, const Budget& budget, int64_t knowledge_budget, int64_t warm_used,
                 double lambda, std::vector<Item>& chosen, std::vector<std::vector<uint32_t>>& sketches,
                 std::vector<std::string>& dropped, int64_t& used) {
  auto share = [&](double cap) {
    int64_t t = static_cast<int64_t>(std::floor(cap * static_cast<double>(knowledge_budget)));
    return std::min(t, knowledge_budget - warm_used);
  };
  int64_t base_cap = share(budget.cold_cap);
  int64_t grown_cap = std::max(base_cap, share(budget.cold_cap_learned));
  std::vector<bool> taken = greedy(cold, base_cap, lambda, chosen, sketches, used);
  std::vector<Item> learned;
  std::vector<size_t> index;
  for (size_t i = 0; i < cold.size(); ++i) {
    if (!taken[i] && cold[i].learned > 0) {
      learned.push_back(cold[i]);
      index.push_back(i);
    }
  }
  if (!learned.empty() && grown_cap > used) {
    std::vector<bool> again = greedy(learned, grown_cap, lambda, chosen, sketches, used);
    for (size_t j = 0; j < again.size(); ++j) taken[index[j]] = taken[index[j]] || again[j];
  }
  add_dropped(cold, taken, dropped);
}

// Active selection under a stage budget: the eligible items (a positive learned value or an
// exact key) greedily, then the one exploration slot for the best other item that still fits.
void select_budgeted(const std::vector<Item>& warm, const std::vector<Item>& cold, const Budget& budget, double lambda,
                     Selection& sel, int64_t& warm_used, int64_t& cold_used) {
  const int64_t cap = std::min(budget.memory_cap, sel.knowledge_budget);
  const double floor_per_token = budget.value_floor / 1000.0;
  std::vector<Item> eligible, others;
  for (const auto* list : {&warm, &cold}) {
    for (const auto& it : *list) {
      Item copy = it;
      if (it.learned > 0) {
        copy.admitted_for = fmt_learned(it.learned);
        eligible.push_back(std::move(copy));
      } else if (it.exact_key) {
        copy.admitted_for = "exact key";
        eligible.push_back(std::move(copy));
      } else {
        copy.admitted_for = "exploration slot";
        others.push_back(std::move(copy));
      }
    }
  }
  std::vector<std::vector<uint32_t>> sketches;
  int64_t used = 0;
  size_t first = sel.chosen.size();
  std::vector<bool> taken = greedy(eligible, cap, lambda, sel.chosen, sketches, used, floor_per_token);
  add_dropped(eligible, taken, sel.dropped);
  // The exploration slot: the one best other item by value per token (after the redundancy
  // penalty) that fits and clears the floor.
  std::optional<size_t> pick;
  double best = 0;
  for (size_t i = 0; i < others.size(); ++i) {
    const Item& it = others[i];
    if (it.tokens > cap - used) continue;
    std::vector<uint32_t> sketch = shingles(it.text);
    double sim = 0;
    for (const auto& c : sketches) sim = std::max(sim, jaccard(sketch, c));
    double gain = (it.value - lambda * sim * std::max(it.value, 0.0)) / static_cast<double>(std::max<int64_t>(1, it.tokens));
    if (gain > 0 && gain >= floor_per_token && (!pick || gain > best)) {
      best = gain;
      pick = i;
    }
  }
  for (size_t i = 0; i < others.size(); ++i) {
    if (pick && i == *pick) {
      sel.chosen.push_back(others[i]);
      used += others[i].tokens;
    } else {
      sel.dropped.push_back(others[i].id);
    }
  }
  for (size_t i = first; i < sel.chosen.size(); ++i) {
    (sel.chosen[i].tier == Tier::warm ? warm_used : cold_used) += sel.chosen[i].tokens;
  }
}

// The random control: candidates in a seeded random order, each taken while the total stays
// within 5% above `target`, until it reaches 5% below it.
void select_random(const std::vector<Item>& warm, const std::vector<Item>& cold, const Budget& budget, Selection& sel,
                   int64_t& warm_used, int64_t& cold_used) {
  std::vector<const Item*> pool;
  for (const auto* list : {&warm, &cold}) {
    for (const auto& it : *list) pool.push_back(&it);
  }
  std::mt19937_64 rng(budget.random_seed);
  std::shuffle(pool.begin(), pool.end(), rng);
  const int64_t target = budget.random_tokens;
  const int64_t high = target + target / 20, low = target - target / 20;
  int64_t used = 0;
  for (const Item* it : pool) {
    if (used < low && used + it->tokens <= high) {
      Item copy = *it;
      copy.admitted_for = "random control";
      (copy.tier == Tier::warm ? warm_used : cold_used) += copy.tokens;
      used += copy.tokens;
      sel.chosen.push_back(std::move(copy));
    } else {
      sel.dropped.push_back(it->id);
    }
  }
}

}  // namespace

std::string_view mode_name(Mode m) {
  switch (m) {
    case Mode::active: return "active";
    case Mode::passive: return "passive";
    case Mode::none: return "none";
    case Mode::random: return "random";
  }
  return "?";
}

std::optional<Mode> parse_mode(std::string_view s) {
  if (s == "active") return Mode::active;
  if (s == "passive") return Mode::passive;
  if (s == "none") return Mode::none;
  if (s == "random") return Mode::random;
  return std::nullopt;
}

std::string_view tier_name(Tier t) {
  switch (t) {
    case Tier::hot: return "hot";
    case Tier::warm: return "warm";
    case Tier::cold: return "cold";
  }
  return "?";
}

int64_t Budget::knowledge(int64_t hot_tokens) const {
  return std::max<int64_t>(0, window - system_prompt - generation - std::max(recency_reserve, hot_tokens));
}

double text_similarity(std::string_view a, std::string_view b) { return jaccard(shingles(a), shingles(b)); }

Selection select(const std::vector<Item>& hot, const std::vector<Item>& warm, const std::vector<Item>& cold,
                 const Budget& budget, Mode mode, double redundancy_weight) {
  Selection sel;
  int64_t hot_tokens = sum_tokens(hot);
  int64_t room = budget.window - budget.system_prompt - budget.generation;  // for hot + knowledge
  sel.hot_overflow = hot_tokens > room;
  sel.knowledge_budget = budget.knowledge(hot_tokens);
  sel.chosen = hot;
  int64_t warm_used = 0, cold_used = 0;

  if (mode == Mode::passive) {
    // Everything relevant, in retrieval order, up to the window.
    int64_t left = std::max<int64_t>(0, room - hot_tokens);
    for (const auto* list : {&warm, &cold}) {
      for (const auto& it : *list) {
        if (it.tokens <= left) {
          sel.chosen.push_back(it);
          left -= it.tokens;
          (list == &warm ? warm_used : cold_used) += it.tokens;
        } else {
          sel.dropped.push_back(it.id);
        }
      }
    }
  } else if (mode == Mode::active && budget.memory_cap > 0) {
    select_budgeted(warm, cold, budget, redundancy_weight, sel, warm_used, cold_used);
  } else if (mode == Mode::random) {
    select_random(warm, cold, budget, sel, warm_used, cold_used);
  } else if (mode == Mode::active) {
    std::vector<std::vector<uint32_t>> sketches;
    int64_t warm_cap = static_cast<int64_t>(std::floor(budget.warm_cap * static_cast<double>(sel.knowledge_budget)));
    add_dropped(warm, greedy(warm, warm_cap, redundancy_weight, sel.chosen, sketches, warm_used), sel.dropped);
    select_cold(cold, budget, sel.knowledge_budget, warm_used, redundancy_weight, sel.chosen, sketches, sel.dropped,
                cold_used);
  } else {
    for (const auto* list : {&warm, &cold}) {
      for (const auto& it : *list) sel.dropped.push_back(it.id);
    }
  }
  sel.tier_tokens["hot"] = hot_tokens;
  sel.tier_tokens["warm"] = warm_used;
  sel.tier_tokens["cold"] = cold_used;
  sel.total_tokens = budget.system_prompt + hot_tokens + warm_used + cold_used;
  return sel;
}

int64_t estimate_tokens(std::string_view text) {
  int64_t tokens = 0;
  size_t i = 0;
  const size_t n = text.size();
  auto is_alpha = [](unsigned char c) { return std::isalpha(c) != 0 || c == '_'; };
  while (i < n) {
    auto c = static_cast<unsigned char>(text[i]);
    if (c >= 0x80) {
      // One code point: skip its continuation bytes.
      ++i;
      while (i < n && (static_cast<unsigned char>(text[i]) & 0xC0) == 0x80) ++i;
      ++tokens;
    } else if (is_alpha(c)) {
      size_t start = i;
      while (i < n && is_alpha(static_cast<unsigned char>(text[i]))) ++i;
      tokens += 1 + static_cast<int64_t>((i - start - 1) / 5);
    } else if (std::isdigit(c) != 0) {
      size_t start = i;
      while (i < n && std::isdigit(static_cast<unsigned char>(text[i])) != 0) ++i;
      tokens += static_cast<int64_t>((i - start + 2) / 3);
    } else if (c == ' ') {
      size_t start = i;
      while (i < n && text[i] == ' ') ++i;
      size_t run = i - start;
      // One space before a word merges into it; longer runs are indentation tokens.
      if (run > 1) tokens += static_cast<int64_t>((run - 1 + 3) / 4);
    } else if (c == '\n' || c == '\r' || c == '\t') {
      ++tokens;
      ++i;
      while (i < n && (text[i] == '\n' || text[i] == '\r')) ++i;
    } else {
      // Punctuation: pairs such as "==", "->", "::", "//", "();" often merge.
      size_t start = i;
      while (i < n && std::ispunct(static_cast<unsigned char>(text[i])) != 0) ++i;
      tokens += static_cast<int64_t>((i - start + 1) / 2);
    }
  }
  return tokens;
}

TokenEstimator::TokenEstimator(double scale) : m_scale(std::clamp(scale, k_min_scale, k_max_scale)) {}

int64_t TokenEstimator::estimate(std::string_view text) const {
  if (text.empty()) return 0;
  const double base = static_cast<double>(estimate_tokens(text));
  return std::max<int64_t>(1, static_cast<int64_t>(std::ceil(base * m_scale)));
}

void TokenEstimator::calibrate(int64_t estimated, int64_t reported) {
  if (estimated <= 0 || reported <= 0) return;
  double observed = m_scale * static_cast<double>(reported) / static_cast<double>(estimated);
  m_scale = std::clamp(0.7 * m_scale + 0.3 * observed, k_min_scale, k_max_scale);
}

}  // namespace kope::context
