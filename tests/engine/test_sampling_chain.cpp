// The stage-chain sampler against the sort-based sampler it replaced (reference_sampler.h,
// the specification of seeded draws): the same tokens and logprobs for the same seed on
// many random rows and parameter combinations, at small vocabularies and at Qwen's 151,936;
// the sort-free paths' draws against the softmax by a chi-square test; weighted_select
// against a sort; the constraint-mask stage.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <vector>

#include "engine/sampling/sampler_stages.h"
#include "engine/sampling/sampling.h"
#include "reference_sampler.h"

namespace spillway::engine {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// Rows of different shapes: kind 0 spread (sd 3), 1 nearly flat (sd 0.05), 2 coarse
// (multiples of 0.5: many exact ties, decided by id) with some -inf, 3 one dominant token.
std::vector<float> random_row(std::mt19937& g, int32_t n, int kind) {
  std::normal_distribution<float> normal(0.0f, kind == 0 ? 3.0f : kind == 1 ? 0.05f : 2.0f);
  std::uniform_int_distribution<int> pct(0, 99);
  std::vector<float> row(n);
  for (float& x : row) {
    x = normal(g);
    if (kind == 2) {
      x = std::round(x * 2.0f) / 2.0f;
      if (pct(g) < 5) x = kNegInf;
    }
  }
  if (kind == 3) row[std::uniform_int_distribution<int32_t>(0, n - 1)(g)] += 12.0f;
  return row;
}

// Logprobs: the reference computes log-softmax all in double; the chain sums float exps
// (kernels::exp_scaled_sum) in double, within 1e-6 plus the float rounding of the result.
void expect_logprob(float want, float got, const std::string& where) {
  if (!std::isfinite(want)) {
    EXPECT_EQ(want, got) << where;
    return;
  }
  EXPECT_NEAR(want, got, 1e-6 + 1.2e-7 * std::fabs(want)) << where;
}

void expect_same(const SampledToken& want, const SampledToken& got, const std::string& where) {
  ASSERT_EQ(want.token, got.token) << where;
  expect_logprob(want.logprob, got.logprob, where);
  ASSERT_EQ(want.top_logprobs.size(), got.top_logprobs.size()) << where;
  for (size_t i = 0; i < want.top_logprobs.size(); ++i) {
    EXPECT_EQ(want.top_logprobs[i].token, got.top_logprobs[i].token) << where;
    expect_logprob(want.top_logprobs[i].logprob, got.top_logprobs[i].logprob, where);
  }
}

// Runs `steps` steps of the reference and the chain side by side on fresh random rows, the
// chosen token appended to both histories; every step must agree. Alternates the two entry
// points of the chain (in place, and read-only row + caller scratch).
void compare_with_reference(const SamplingParams& params, int32_t n_vocab, int kind, int steps,
                            uint32_t row_seed, SamplerScratch& scratch) {
  std::mt19937 g(row_seed);
  reference::ReferenceSampler ref(params, 99);
  Sampler chain(params, 99);
  std::vector<int32_t> history;
  const int n_prompt = std::uniform_int_distribution<int>(0, 12)(g);
  for (int i = 0; i < n_prompt; ++i) {
    history.push_back(std::uniform_int_distribution<int32_t>(0, n_vocab - 1)(g));
  }
  std::vector<int32_t> banned;
  if (row_seed % 3 == 0) banned = {0, n_vocab / 2};
  SampledToken got;
  for (int step = 0; step < steps; ++step) {
    const std::vector<float> row = random_row(g, n_vocab, kind);
    std::vector<float> a = row, b = row;
    const SampledToken want = ref.sample(a.data(), n_vocab, history, n_prompt, banned);
    if (step % 2 == 0) {
      got = chain.sample(b.data(), n_vocab, history, n_prompt, banned);
    } else {
      chain.sample(row.data(), n_vocab, history, n_prompt, banned, scratch, got);
    }
    const std::string where =
        "T=" + std::to_string(params.temperature) + " k=" + std::to_string(params.top_k) +
        " p=" + std::to_string(params.top_p) + " min_p=" + std::to_string(params.min_p) +
        " vocab=" + std::to_string(n_vocab) + " kind=" + std::to_string(kind) +
        " step=" + std::to_string(step);
    expect_same(want, got, where);
    if (::testing::Test::HasFatalFailure()) return;
    history.push_back(want.token);
  }
}

TEST(SamplingChain, SameTokensAsTheSortingSamplerForTheSameSeed) {
  SamplerScratch scratch;
  uint32_t combo = 0;
  for (float temperature : {0.0f, 0.4f, 1.0f, 1.7f}) {
    for (int32_t top_k : {0, 1, 3, 40, 100000}) {
      for (float top_p : {1.0f, 0.9f, 0.5f, 0.05f}) {
        for (float min_p : {0.0f, 0.05f, 0.3f}) {
          ++combo;
          SamplingParams p;
          p.temperature = temperature;
          p.top_k = top_k;
          p.top_p = top_p;
          p.min_p = min_p;
          p.seed = combo * 7919u;
          if (combo % 4 == 1) p.repetition_penalty = 1.3f;
          if (combo % 5 == 2) {
            p.presence_penalty = 0.5f;
            p.frequency_penalty = 0.25f;
          }
          if (combo % 6 == 3) p.logit_bias = {{1, 4.0f}, {2, -100.0f}};
          if (combo % 3 == 0) {
            p.logprobs = true;
            p.top_logprobs = static_cast<int32_t>(combo % 7);
          }
          for (int32_t n_vocab : {7, 300, 4000}) {
            compare_with_reference(p, n_vocab, static_cast<int>((combo + n_vocab) % 4), 4,
                                   combo * 31u + static_cast<uint32_t>(n_vocab), scratch);
            if (HasFatalFailure()) return;
          }
        }
      }
    }
  }
}

// Qwen's vocabulary: the sizes where the old full sort hurt.
TEST(SamplingChain, SameTokensAtA151936Vocabulary) {
  SamplerScratch scratch;
  struct Case {
    float temperature, top_p, min_p;
    int32_t top_k;
    bool logprobs;
  };
  const Case cases[] = {
      {1.0f, 1.0f, 0.0f, 0, false},   // OpenAI's default: no sort at all
      {1.0f, 1.0f, 0.0f, 0, true},    // ... with top_logprobs
      {0.7f, 0.9f, 0.0f, 0, false},   // top-p by weighted selection
      {0.8f, 1.0f, 0.05f, 0, false},  // min-p filter
      {1.0f, 0.95f, 0.0f, 40, false}, // top-k then a walk
      {0.0f, 1.0f, 0.0f, 0, true},    // greedy
  };
  uint32_t seed = 1;
  for (const Case& c : cases) {
    SamplingParams p;
    p.temperature = c.temperature;
    p.top_p = c.top_p;
    p.min_p = c.min_p;
    p.top_k = c.top_k;
    p.logprobs = c.logprobs;
    p.top_logprobs = c.logprobs ? 5 : 0;
    p.seed = seed * 12345u;
    for (int kind = 0; kind < 4; ++kind) {
      compare_with_reference(p, 151936, kind, 2, seed++, scratch);
      if (HasFatalFailure()) return;
    }
  }
}

// Pearson's chi-square of `counts` against probabilities `expected` (cells with an expected
// count below 5 pooled), and its degrees of freedom.
std::pair<double, int> chi_square(const std::vector<int>& counts, const std::vector<double>& expected,
                                  int n) {
  double stat = 0.0, pooled_e = 0.0, pooled_o = 0.0;
  int cells = 0;
  for (size_t i = 0; i < counts.size(); ++i) {
    const double e = expected[i] * n;
    if (e < 5.0) {
      pooled_e += e;
      pooled_o += counts[i];
      continue;
    }
    stat += (counts[i] - e) * (counts[i] - e) / e;
    ++cells;
  }
  if (pooled_e > 0.0) {
    stat += (pooled_o - pooled_e) * (pooled_o - pooled_e) / std::max(pooled_e, 1.0);
    ++cells;
  }
  return {stat, cells - 1};
}

// The expected distribution by definition (double precision, sorted: independent of the
// chain's selection): softmax(logits / T), then top-p's smallest nucleus, then min-p.
std::vector<double> expected_distribution(const std::vector<float>& logits, float temperature,
                                          float top_p, float min_p) {
  const size_t n = logits.size();
  std::vector<int32_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  });
  std::vector<double> p(n, 0.0);
  double sum = 0.0;
  for (int32_t id : order) sum += p[id] = std::exp((logits[id] - logits[order[0]]) / temperature);
  for (double& x : p) x /= sum;
  std::vector<bool> keep(n, false);
  double cumulative = 0.0;
  for (int32_t id : order) {
    keep[id] = true;
    cumulative += p[id];
    if (cumulative >= top_p) break;
  }
  const double best = p[order[0]];
  for (size_t id = 0; id < n; ++id) {
    if (keep[id] && static_cast<int32_t>(id) != order[0] && p[id] < best * min_p) keep[id] = false;
  }
  double kept = 0.0;
  for (size_t id = 0; id < n; ++id) kept += keep[id] ? p[id] : 0.0;
  for (size_t id = 0; id < n; ++id) p[id] = keep[id] ? p[id] / kept : 0.0;
  return p;
}

TEST(SamplingChain, SortFreeDrawsFollowTheSoftmax) {
  // 400 tokens (above weighted_select's small-set cutoff, so the partitioning runs).
  std::mt19937 g(2024);
  const std::vector<float> logits = random_row(g, 400, 0);
  struct Case {
    float temperature, top_p, min_p;
  };
  for (const Case c : {Case{1.0f, 1.0f, 0.0f}, Case{0.6f, 1.0f, 0.0f}, Case{1.0f, 0.8f, 0.0f},
                       Case{1.3f, 1.0f, 0.02f}, Case{1.0f, 0.9f, 0.01f}}) {
    SamplingParams p;
    p.temperature = c.temperature;
    p.top_p = c.top_p;
    p.min_p = c.min_p;
    p.seed = 77;
    Sampler s(p, 0);
    const int n = 60000;
    std::vector<int> counts(logits.size(), 0);
    SamplerScratch scratch;
    SampledToken out;
    for (int i = 0; i < n; ++i) {
      s.sample(logits.data(), 400, {}, 0, {}, scratch, out);
      ++counts[out.token];
    }
    const std::vector<double> expected =
        expected_distribution(logits, c.temperature, c.top_p, c.min_p);
    for (size_t id = 0; id < counts.size(); ++id) {
      if (expected[id] == 0.0) {
        EXPECT_EQ(counts[id], 0) << "id " << id << " was cut";
      }
    }
    const auto [stat, df] = chi_square(counts, expected, n);
    ASSERT_GT(df, 5);
    // Mean df, sd sqrt(2 df): a bound 8 sd out fails on a real bias only.
    EXPECT_LT(stat, df + 8.0 * std::sqrt(2.0 * df))
        << "T=" << c.temperature << " top_p=" << c.top_p << " min_p=" << c.min_p;
  }
}

// weighted_select against sort + walk. Masses are multiples of 2^-12 so that every sum is
// exact and the two must agree exactly.
TEST(SamplingChain, WeightedSelectFindsTheFirstRankReachingTheTarget) {
  std::mt19937 g(5);
  for (int trial = 0; trial < 400; ++trial) {
    const size_t n = std::uniform_int_distribution<size_t>(1, trial < 200 ? 60 : 3000)(g);
    std::vector<Candidate> cand(n);
    double total = 0.0;
    for (size_t i = 0; i < n; ++i) {
      // Coarse logits: ties broken by id.
      cand[i].logit = static_cast<float>(std::uniform_int_distribution<int>(-20, 20)(g));
      cand[i].id = static_cast<int32_t>(i);
      cand[i].p = static_cast<float>(std::uniform_int_distribution<int>(0, 64)(g)) / 4096.0f;
      total += cand[i].p;
    }
    std::shuffle(cand.begin(), cand.end(), g);
    std::vector<Candidate> sorted = cand;
    std::sort(sorted.begin(), sorted.end(), ranks_before);
    for (double target : {0.0, total * 0.5, total, total + 1.0,
                          std::uniform_real_distribution<double>(0.0, total)(g)}) {
      size_t want = n;
      double acc = 0.0;
      for (size_t i = 0; i < n; ++i) {
        acc += sorted[i].p;
        if (acc >= target) {
          want = i + 1;
          break;
        }
      }
      std::vector<Candidate> work = cand;
      const size_t m = weighted_select(work.data(), n, target);
      ASSERT_EQ(m, want) << "n=" << n << " target=" << target;
      EXPECT_EQ(work[m - 1].id, sorted[m - 1].id);
      std::vector<int32_t> above, want_above;
      for (size_t i = 0; i + 1 < m; ++i) {
        above.push_back(work[i].id);
        want_above.push_back(sorted[i].id);
      }
      std::sort(above.begin(), above.end());
      std::sort(want_above.begin(), want_above.end());
      EXPECT_EQ(above, want_above);
    }
  }
}

TEST(SamplingChain, ConstraintMaskAllowsOnlyItsTokensAndSeesTheChoice) {
  std::mt19937 g(8);
  const std::vector<float> logits = random_row(g, 1000, 0);
  AllowedSetConstraint allow({3, 64, 65, 999});
  for (float temperature : {0.0f, 1.0f}) {
    SamplingParams p;
    p.temperature = temperature;
    p.seed = 1;
    p.logit_bias = {{500, 100.0f}};  // bias cannot bring back a masked token
    Sampler s(p, 0);
    s.set_constraint(&allow);
    for (int i = 0; i < 200; ++i) {
      std::vector<float> l = logits;
      const int32_t t = s.sample(l.data(), 1000, {}, 0).token;
      EXPECT_TRUE(t == 3 || t == 64 || t == 65 || t == 999) << t;
      ASSERT_FALSE(allow.accepted().empty());
      EXPECT_EQ(allow.accepted().back(), t);
    }
    if (temperature == 0.0f) {
      // Greedy: the best of the allowed.
      int32_t best = 3;
      for (int32_t id : {64, 65, 999}) {
        if (logits[id] > logits[best]) best = id;
      }
      std::vector<float> l = logits;
      EXPECT_EQ(s.sample(l.data(), 1000, {}, 0).token, best);
    }
  }
  // Removing the constraint: back to the plain chain (the greedy argmax).
  SamplingParams p;
  p.temperature = 0;
  Sampler s(p, 0);
  s.set_constraint(&allow);
  s.set_constraint(nullptr);
  std::vector<float> l = logits;
  EXPECT_EQ(s.sample(l.data(), 1000, {}, 0).token,
            std::max_element(logits.begin(), logits.end()) - logits.begin());
}

TEST(SamplingChain, AnEmptyMaskLeavesTokenZeroAsAnAllMinusInfinityRowDoes) {
  AllowedSetConstraint none({});
  SamplingParams p;
  p.temperature = 1.0f;
  p.seed = 3;
  Sampler s(p, 0);
  s.set_constraint(&none);
  std::vector<float> l = {1.0f, 2.0f, 3.0f};
  EXPECT_EQ(s.sample(l.data(), 3, {}, 0).token, 0);
  reference::ReferenceSampler ref(p, 0);
  std::vector<float> all_masked(3, kNegInf);
  EXPECT_EQ(ref.sample(all_masked.data(), 3, {}, 0).token, 0);
}

TEST(SamplingChain, TheReadOnlyEntryPointLeavesTheRowUnchanged) {
  std::mt19937 g(4);
  const std::vector<float> logits = random_row(g, 500, 0);
  SamplingParams p;
  p.temperature = 1.0f;
  p.repetition_penalty = 2.0f;
  p.logit_bias = {{7, 3.0f}};
  p.seed = 10;
  Sampler s(p, 0);
  SamplerScratch scratch;
  SampledToken out;
  const std::vector<int32_t> history = {7, 8, 9};
  s.sample(logits.data(), 500, history, 1, {}, scratch, out);
  std::mt19937 g2(4);
  EXPECT_EQ(logits, random_row(g2, 500, 0));
  EXPECT_GE(out.token, 0);
  EXPECT_LT(out.token, 500);
}

}  // namespace
}  // namespace spillway::engine
