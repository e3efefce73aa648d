// context/context.h — Active Context Management (docs/design.md §5).
//
// Every iteration the prompt is rebuilt from three admission tiers:
//   hot   — the op spec, the incumbent, the latest feedback, the target: always admitted;
//   warm  — items retrieved from memory for this state (successes, failure modes, fixes);
//   cold  — general notes, other categories, older digests.
// The cold tier is small: `cold_cap` of B_k for any cold item, growing to `cold_cap_learned`
// only for items whose learned value (the memory's credit for this stage) is positive, so what
// has not yet paid for itself stays a small share of the prompt.
// Memory items compete for the knowledge budget B_k = max(0, W − S − G − R) (window, system
// prompt, generation allowance, recency reserve; the reserve is at least the hot tier's size).
// In `active` mode warm then cold fill B_k, each under a cap, chosen greedily by value per token
// with a redundancy penalty (among the 2048 best candidates by value per token per tier, which
// bounds the cost when retrieval returns tens of thousands of items). `passive` admits every relevant item in retrieval order up to the
// window (the paper's baseline). `none` admits no memory at all. All functions are pure and
// thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kope::context {

// random: the ablation's control, random memory items at the token count active admits for
// the same prompt (it separates which tokens from how many).
enum class Mode { active, passive, none, random };
std::string_view mode_name(Mode m);
std::optional<Mode> parse_mode(std::string_view s);

enum class Tier { hot, warm, cold };
std::string_view tier_name(Tier t);

// The window arithmetic for one call.
struct Budget {
  int64_t window = 128000;          // W: the model's context window
  int64_t system_prompt = 0;        // S
  int64_t generation = 8192;        // G: tokens reserved for the answer
  int64_t recency_reserve = 4096;   // R: minimum room kept for the hot tier
  double warm_cap = 0.75;           // share of B_k warm items may take
  double cold_cap = 0.03;           // share of B_k any cold items may take
  double cold_cap_learned = 0.15;   // share the cold tier may grow to with items of positive learned value
  // The stage's fixed memory ceiling (docs/design.md §5): the tokens of memory one prompt's tail
  // may carry in active mode, B_k staying the ceiling above it. 0: the caps above apply (B_k
  // shared by warm_cap and the cold caps), as before stage budgets existed.
  int64_t memory_cap = 0;
  // The stages' ceilings (tokens of memory in a draft, repair and refine prompt's tail) from
  // which the prompt assembly sets memory_cap, and the op pack's (agent/forms.h).
  int64_t memory_draft = 1500, memory_repair = 400, memory_refine = 500;
  // Active filling stops when the best remaining item brings less value per 1000 tokens.
  double value_floor = 0.25;
  // random mode: the token count to match (what active admits for the same prompt) and the seed.
  int64_t random_tokens = 0;
  uint64_t random_seed = 0;

  // B_k for a hot tier of `hot_tokens`: max(0, W − S − G − max(R, hot_tokens)).
  int64_t knowledge(int64_t hot_tokens) const;
};

// One thing that may go into the prompt.
struct Item {
  std::string id;        // "case:12", "lesson:L0001", "spec", ...
  Tier tier = Tier::warm;
  std::string section;   // where the template puts it: "feasibility", "speed", "failures", ...
  std::string text;
  int64_t tokens = 0;    // estimated; filled by the caller (TokenEstimator)
  double value = 0;      // retrieval score or learned value; higher is better
  bool foreign = false;  // from another target/toolchain: feasibility only
  double learned = 0;    // learned value for this stage (memory credit); > 0 may use the grown cold cap
  // Why the item is a candidate, for the prompt's admission record: the score parts (relevance,
  // learned, similarity, ...) and a short reason ("same op", "general note for conv", ...).
  std::map<std::string, double> parts;
  std::string reason;
  std::string category;  // the op category the item is about ("" for general items)
  // An exact key to this state: the same error signature as the failure being repaired, or the
  // same op category and bottleneck. With a positive `learned` value it is the reason an item
  // may enter an active prompt under a stage budget; any other item competes only for the one
  // exploration slot.
  bool exact_key = false;
  // Filled by select(): why the item was admitted ("learned value", "exact key", "exploration
  // slot", "random control", ...; "" in the modes that admit without reasons).
  std::string admitted_for;
};

struct Selection {
  std::vector<Item> chosen;                 // hot first, then warm, then cold, in rank order
  std::vector<std::string> dropped;         // ids of candidates left out
  std::map<std::string, int64_t> tier_tokens;  // "hot", "warm", "cold" -> tokens admitted
  int64_t knowledge_budget = 0;             // B_k
  int64_t total_tokens = 0;                 // S + every chosen item
  bool hot_overflow = false;                // the hot tier alone exceeds W − S − G
};

// Chooses the prompt's items. `hot` is always admitted; `warm` and `cold` are candidates
// (their order is the retrieval order, used by passive mode).
// active with a stage budget (Budget::memory_cap > 0): one pool under min(memory_cap, B_k); an
// item is eligible only for a reason it records in `admitted_for`: a positive learned value, or
// an exact key; besides them the one exploration slot takes the best other item (what has no
// learned value yet gets one only by being shown). Filling is greedy by value per token with the
// redundancy penalty and stops below Budget::value_floor. random: items in a seeded random order
// until Budget::random_tokens is reached (within 10%), whatever their value.
Selection select(const std::vector<Item>& hot, const std::vector<Item>& warm,
                 const std::vector<Item>& cold, const Budget& budget, Mode mode,
                 double redundancy_weight = 0.5);

// Approximate similarity of two texts in [0, 1] (Jaccard over hashed word trigrams).
double text_similarity(std::string_view a, std::string_view b);

// kope's one token estimate of a text before any calibration: a heuristic after BPE tokenizers
// (cl100k/o200k-like): a letter run costs one token plus one per further 5 letters (a leading
// space merges into it), digits group by three, punctuation is mostly one token per character
// with common pairs merged, runs of spaces (indentation) one token per 4, newlines one token
// each, and a non-ASCII code point about one token (CJK). Every estimate in kope is this one
// (memory items, the model clients' accounting) or TokenEstimator's calibrated form of it.
int64_t estimate_tokens(std::string_view text);

// Estimates the prompt's tokens: estimate_tokens times a scale learned from the provider's
// reported usage (the model's own tokenizer). Plain value; not thread-safe (the agent shares one
// behind a mutex and snapshots it per prompt).
class TokenEstimator {
 public:
  static constexpr double k_min_scale = 0.25, k_max_scale = 4.0;

  // An estimator with `scale` (clamped to [k_min_scale, k_max_scale]); 1 is the uncalibrated rule.
  explicit TokenEstimator(double scale = 1.0);
  // Tokens for `text` at the current scale: ceil(estimate_tokens(text) x scale), at least 1 for
  // non-empty text.
  int64_t estimate(std::string_view text) const;
  // After a call: the prompt's estimate and what the provider reported. Moves the scale toward
  // reported/estimated (exponential moving average) and clamps it to a sane range.
  void calibrate(int64_t estimated, int64_t reported);
  double scale() const { return m_scale; }

 private:
  double m_scale = 1.0;
};

}  // namespace kope::context
