#include "context/context.h"

#include <chrono>
#include <set>

#include <gtest/gtest.h>

namespace kope::context {
namespace {

Item item(std::string id, Tier tier, int64_t tokens, double value, std::string text = "") {
  Item it;
  it.id = std::move(id);
  it.tier = tier;
  it.tokens = tokens;
  it.value = value;
  it.text = text.empty() ? "unique text for " + it.id + " with several distinct words " + it.id : std::move(text);
  return it;
}

std::set<std::string> ids(const Selection& s) {
  std::set<std::string> out;
  for (const auto& it : s.chosen) out.insert(it.id);
  return out;
}

TEST(Budget, KnowledgeBudgetFormula) {
  Budget b;
  b.window = 10000;
  b.system_prompt = 1000;
  b.generation = 2000;
  b.recency_reserve = 1500;
  EXPECT_EQ(b.knowledge(500), 10000 - 1000 - 2000 - 1500);   // reserve dominates
  EXPECT_EQ(b.knowledge(3000), 10000 - 1000 - 2000 - 3000);  // a big hot tier dominates
  EXPECT_EQ(b.knowledge(9000), 0);                           // never negative
}

TEST(Select, NoneAdmitsOnlyHot) {
  Budget b;
  auto s = select({item("spec", Tier::hot, 100, 0)}, {item("w", Tier::warm, 10, 5)}, {item("c", Tier::cold, 10, 5)}, b, Mode::none);
  EXPECT_EQ(ids(s), (std::set<std::string>{"spec"}));
  EXPECT_EQ(s.tier_tokens["warm"], 0);
  EXPECT_EQ(s.tier_tokens["cold"], 0);
  EXPECT_EQ(s.dropped.size(), 2u);
}

TEST(Select, ActiveRespectsCapsAndPrefersValuePerToken) {
  Budget b;
  b.window = 1000;
  b.system_prompt = 100;
  b.generation = 200;
  b.recency_reserve = 100;  // B_k = 1000 - 100 - 200 - 100 = 600; warm cap 450, cold cap 150
  b.cold_cap = 0.25;
  std::vector<Item> warm = {item("big", Tier::warm, 400, 4.0),    // 0.01 per token
                            item("a", Tier::warm, 100, 3.0),      // 0.03
                            item("b", Tier::warm, 200, 4.0),      // 0.02
                            item("c", Tier::warm, 150, 1.5)};     // 0.01
  std::vector<Item> cold = {item("x", Tier::cold, 100, 1.0), item("y", Tier::cold, 100, 0.5)};
  auto s = select({item("spec", Tier::hot, 50, 0)}, warm, cold, b, Mode::active, 0.0);
  EXPECT_EQ(s.knowledge_budget, 600);
  EXPECT_LE(s.tier_tokens["warm"], 450);
  EXPECT_LE(s.tier_tokens["cold"], 150);
  EXPECT_EQ(ids(s), (std::set<std::string>{"spec", "a", "b", "c", "x"}));
  EXPECT_EQ(s.tier_tokens["warm"], 450);
  EXPECT_EQ(s.total_tokens, 100 + 50 + 450 + 100);
  // Order: hot first, then by gain.
  EXPECT_EQ(s.chosen[0].id, "spec");
  EXPECT_EQ(s.chosen[1].id, "a");
}

// A budget whose B_k is 10000 tokens: the cold cap of 3% is 300, the grown cap of 15% 1500.
Budget ten_thousand_knowledge() {
  Budget b;
  b.window = 10300;
  b.system_prompt = 100;
  b.generation = 100;
  b.recency_reserve = 100;
  return b;
}

TEST(Select, ColdTierStaysWithinItsCapWhenItemsHaveNoLearnedValue) {
  Budget b = ten_thousand_knowledge();
  std::vector<Item> cold;
  for (int i = 0; i < 20; ++i) cold.push_back(item("c" + std::to_string(i), Tier::cold, 100, 1.0));
  auto s = select({item("spec", Tier::hot, 50, 0)}, {}, cold, b, Mode::active, 0.0);
  EXPECT_EQ(s.knowledge_budget, 10000);
  EXPECT_EQ(s.tier_tokens["cold"], 300);
  EXPECT_EQ(s.chosen.size(), 1u + 3u);
  EXPECT_EQ(s.dropped.size(), 17u);
}

TEST(Select, ColdCapGrowsOnlyForItemsWithPositiveLearnedValue) {
  Budget b = ten_thousand_knowledge();
  std::vector<Item> cold;
  for (int i = 0; i < 10; ++i) cold.push_back(item("plain" + std::to_string(i), Tier::cold, 100, 1.0));
  for (int i = 0; i < 20; ++i) {
    Item it = item("learned" + std::to_string(i), Tier::cold, 100, 0.5);
    it.learned = 0.4;
    cold.push_back(it);
  }
  auto s = select({item("spec", Tier::hot, 50, 0)}, {}, cold, b, Mode::active, 0.0);
  EXPECT_EQ(s.tier_tokens["cold"], 1500);
  int plain = 0, learned = 0;
  for (const auto& it : s.chosen) {
    if (it.id.starts_with("plain")) ++plain;
    if (it.id.starts_with("learned")) ++learned;
  }
  EXPECT_EQ(plain, 3);     // the base cap, taken by the better value per token
  EXPECT_EQ(learned, 12);  // the room the grown cap adds goes to learned items only
  EXPECT_EQ(s.chosen.size() + s.dropped.size(), 31u);
}

TEST(Select, RedundancyPenaltyAvoidsNearDuplicates) {
  Budget b;
  b.window = 10000;
  b.generation = 0;
  b.recency_reserve = 0;
  std::string t = "use avx512 fma with eight accumulators and unroll the k loop by four for matmul";
  std::vector<Item> warm = {item("one", Tier::warm, 100, 2.0, t), item("dup", Tier::warm, 100, 1.9, t + " again"),
                            item("other", Tier::warm, 100, 1.0, "poison outputs are checked so never skip work on repeated calls")};
  b.window = 200;  // room for two of three
  b.warm_cap = 1.0;
  auto with_penalty = select({}, warm, {}, b, Mode::active, 1.0);
  EXPECT_EQ(ids(with_penalty), (std::set<std::string>{"one", "other"}));
  auto without = select({}, warm, {}, b, Mode::active, 0.0);
  EXPECT_EQ(ids(without), (std::set<std::string>{"one", "dup"}));
}

TEST(Select, PassiveTakesEverythingInOrderUpToTheWindow) {
  Budget b;
  b.window = 1000;
  b.system_prompt = 100;
  b.generation = 200;
  b.recency_reserve = 500;  // ignored by passive: it fills the window
  std::vector<Item> warm = {item("w1", Tier::warm, 300, 0.1), item("w2", Tier::warm, 300, 9.0), item("w3", Tier::warm, 300, 5)};
  std::vector<Item> cold = {item("c1", Tier::cold, 50, 0.1)};
  auto s = select({item("spec", Tier::hot, 50, 0)}, warm, cold, b, Mode::passive);
  // room = 700 - 50 hot = 650: w1 (300) + w2 (300) fit, w3 does not, c1 (50) fits.
  EXPECT_EQ(ids(s), (std::set<std::string>{"spec", "w1", "w2", "c1"}));
  EXPECT_EQ(s.total_tokens, 100 + 50 + 600 + 50);
}

TEST(Select, HotOverflowIsReported) {
  Budget b;
  b.window = 1000;
  b.generation = 500;
  auto s = select({item("spec", Tier::hot, 800, 0)}, {item("w", Tier::warm, 10, 1)}, {}, b, Mode::active);
  EXPECT_TRUE(s.hot_overflow);
  EXPECT_EQ(s.knowledge_budget, 0);
  EXPECT_EQ(s.tier_tokens["warm"], 0);
}

TEST(Select, NeverExceedsTheBudget) {
  Budget b;
  b.window = 5000;
  b.system_prompt = 300;
  b.generation = 1000;
  b.recency_reserve = 200;
  std::vector<Item> warm, cold;
  for (int i = 0; i < 200; ++i) {
    warm.push_back(item("w" + std::to_string(i), Tier::warm, 17 + (i * 37) % 300, 0.1 + (i * 13) % 10));
    cold.push_back(item("c" + std::to_string(i), Tier::cold, 11 + (i * 53) % 200, 0.1 + (i * 7) % 10));
  }
  for (Mode m : {Mode::active, Mode::passive, Mode::none}) {
    auto s = select({item("spec", Tier::hot, 400, 0)}, warm, cold, b, m);
    EXPECT_LE(s.total_tokens, b.window - b.generation) << mode_name(m);
    EXPECT_EQ(s.chosen.size() + s.dropped.size(), 401u);
  }
}

TEST(Similarity, Basics) {
  EXPECT_DOUBLE_EQ(text_similarity("a b c d", "a b c d"), 1.0);
  EXPECT_LT(text_similarity("tile the k loop for cache reuse", "poison the outputs before each call"), 0.2);
  EXPECT_GT(text_similarity("tile the k loop for cache reuse in matmul", "tile the k loop for cache reuse in conv"), 0.5);
}

TEST(EstimateTokens, MatchesKnownCountsRoughly) {
  // cl100k counts: "Hello, world!" = 4, the pangram = 10.
  EXPECT_EQ(estimate_tokens("Hello, world!"), 4);
  EXPECT_EQ(estimate_tokens("The quick brown fox jumps over the lazy dog."), 10);
  EXPECT_EQ(estimate_tokens(""), 0);
  // Code: within a factor of 1.5 of a chars/3.2 rule of thumb.
  std::string code =
      "extern \"C\" void kope_kernel(const float* x, float* y, int64_t N, int64_t D) {\n"
      "  for (int64_t i = 0; i < N; ++i) {\n    float m = x[i * D];\n  }\n}\n";
  double rule = static_cast<double>(code.size()) / 3.2;
  int64_t est = estimate_tokens(code);
  EXPECT_GT(static_cast<double>(est), rule / 1.5);
  EXPECT_LT(static_cast<double>(est), rule * 1.5);
  // Non-ASCII: one token per code point, not per byte.
  EXPECT_EQ(estimate_tokens("\xe4\xbd\xa0\xe5\xa5\xbd"), 2);  // two CJK characters
}

// The scale moves toward what the provider reports. 4000 letters are 800 tokens by the rule; the
// provider says 2000 (scale 2.5). (Before one estimator, the calibrated quantity was tokens per
// byte, starting at 0.3 and converging to 0.5 here.)
TEST(TokenEstimator, CalibratesTowardReportedUsage) {
  TokenEstimator e;
  std::string text(4000, 'x');
  int64_t before = e.estimate(text);
  EXPECT_EQ(before, estimate_tokens(text));  // uncalibrated: the rule itself
  EXPECT_EQ(before, 800);
  for (int i = 0; i < 20; ++i) e.calibrate(e.estimate(text), 2000);
  EXPECT_NEAR(e.scale(), 2.5, 0.05);
  EXPECT_GT(e.estimate(text), before);
  e.calibrate(100, 0);  // ignored
  EXPECT_NEAR(e.scale(), 2.5, 0.05);
  EXPECT_EQ(e.estimate(""), 0);
  EXPECT_EQ(TokenEstimator(100.0).scale(), TokenEstimator::k_max_scale);  // clamped
  EXPECT_EQ(TokenEstimator(0.5).estimate("Hello, world!"), 2);            // ceil(4 x 0.5)
}

// Stage budgets (docs/design.md §5): an item enters an active prompt only for a reason it
// records; one exploration slot takes the best item without one.
TEST(StageBudget, AnItemWithoutAReasonStaysOutBeyondTheExplorationSlot) {
  Budget b;
  b.memory_cap = 1000;
  Item learned = item("learned", Tier::warm, 100, 0.5);
  learned.learned = 0.2;
  Item keyed = item("keyed", Tier::warm, 100, 0.4);
  keyed.exact_key = true;
  Item plain1 = item("plain1", Tier::warm, 100, 0.9);
  Item plain2 = item("plain2", Tier::cold, 100, 0.8);
  Item plain3 = item("plain3", Tier::cold, 100, 0.3);
  auto s = select({item("hot", Tier::hot, 500, 0)}, {learned, keyed, plain1}, {plain2, plain3}, b, Mode::active, 0.0);
  std::set<std::string> got = ids(s);
  EXPECT_TRUE(got.contains("learned"));
  EXPECT_TRUE(got.contains("keyed"));
  // Exactly one of the reasonless items: the best by value per token.
  EXPECT_TRUE(got.contains("plain1"));
  EXPECT_FALSE(got.contains("plain2"));
  EXPECT_FALSE(got.contains("plain3"));
  for (const auto& it : s.chosen) {
    if (it.tier == Tier::hot) continue;
    EXPECT_FALSE(it.admitted_for.empty()) << it.id;
    if (it.id == "plain1") {
      EXPECT_EQ(it.admitted_for, "exploration slot");
    } else if (it.id == "keyed") {
      EXPECT_EQ(it.admitted_for, "exact key");
    } else if (it.id == "learned") {
      EXPECT_EQ(it.admitted_for, "learned value +0.20");
    }
  }
}

TEST(StageBudget, TheCeilingAndTheValueFloorStopTheFilling) {
  Budget b;
  b.memory_cap = 250;
  b.value_floor = 0.25;  // per 1000 tokens
  std::vector<Item> warm;
  for (int i = 0; i < 6; ++i) {
    Item it = item("k" + std::to_string(i), Tier::warm, 100, 1.0 - 0.1 * i);
    it.exact_key = true;
    warm.push_back(it);
  }
  Item weak = item("weak", Tier::warm, 50, 0.001);  // 0.02 per 1000 tokens: below the floor
  weak.exact_key = true;
  warm.push_back(weak);
  auto s = select({item("hot", Tier::hot, 500, 0)}, warm, {}, b, Mode::active, 0.0);
  EXPECT_LE(s.tier_tokens["warm"] + s.tier_tokens["cold"], 250);
  EXPECT_EQ(ids(s), (std::set<std::string>{"hot", "k0", "k1"}));
  // B_k stays a ceiling above the stage's.
  b.window = 2000;
  b.generation = 1000;
  b.recency_reserve = 0;
  b.memory_cap = 100000;
  auto t = select({item("hot", Tier::hot, 850, 0)}, warm, {}, b, Mode::active, 0.0);
  EXPECT_LE(t.tier_tokens["warm"], t.knowledge_budget);
}

TEST(StageBudget, TheRandomControlMatchesTheTokenCountWithin10Percent) {
  std::vector<Item> warm, cold;
  for (int i = 0; i < 60; ++i) {
    (i % 2 ? warm : cold).push_back(item("i" + std::to_string(i), i % 2 ? Tier::warm : Tier::cold, 20 + (i * 37) % 180, 0.1));
  }
  for (int64_t target : {150, 400, 1500}) {
    for (uint64_t seed : {1u, 2u, 3u}) {
      Budget b;
      b.random_tokens = target;
      b.random_seed = seed;
      auto s = select({item("hot", Tier::hot, 10, 0)}, warm, cold, b, Mode::random, 0.0);
      int64_t got = s.tier_tokens["warm"] + s.tier_tokens["cold"];
      EXPECT_GE(got, target * 9 / 10) << target << " seed " << seed;
      EXPECT_LE(got, target * 11 / 10) << target << " seed " << seed;
      for (const auto& it : s.chosen) {
        if (it.tier != Tier::hot) {
          EXPECT_EQ(it.admitted_for, "random control");
        }
      }
    }
  }
  // Another seed, other items.
  Budget b1, b2;
  b1.random_tokens = b2.random_tokens = 600;
  b1.random_seed = 11;
  b2.random_seed = 12;
  EXPECT_NE(ids(select({}, warm, cold, b1, Mode::random)), ids(select({}, warm, cold, b2, Mode::random)));
}

TEST(Mode, RandomIsNamed) {
  EXPECT_EQ(mode_name(Mode::random), "random");
  EXPECT_EQ(parse_mode("random"), Mode::random);
}

}  // namespace
}  // namespace kope::context
