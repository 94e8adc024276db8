// The sampler against independent definitions: greedy is the argmax, the empirical
// distribution of seeded draws follows softmax(logits / T) restricted by top-k / top-p /
// min-p, penalties and logit bias change the logits as OpenAI / llama.cpp define them, and
// logprobs are the log-softmax of the raw logits.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <set>
#include <vector>

#include "engine/sampling/sampling.h"

namespace spillway::engine {
namespace {

std::vector<double> softmax(const std::vector<float>& logits, double temperature = 1.0) {
  const double mx = *std::max_element(logits.begin(), logits.end());
  std::vector<double> p(logits.size());
  double sum = 0;
  for (size_t i = 0; i < logits.size(); ++i) sum += p[i] = std::exp((logits[i] - mx) / temperature);
  for (double& x : p) x /= sum;
  return p;
}

// Draws `n` tokens with a fresh copy of the logits each time; returns counts per id.
std::map<int32_t, int> draw(Sampler& s, const std::vector<float>& logits, int n) {
  std::map<int32_t, int> counts;
  std::vector<float> scratch;
  for (int i = 0; i < n; ++i) {
    scratch = logits;
    ++counts[s.sample(scratch.data(), static_cast<int32_t>(scratch.size()), {}, 0).token];
  }
  return counts;
}

const std::vector<float> kLogits = {1.0f, 3.0f, 2.5f, -1.0f, 0.0f, 2.9f, 0.5f, -3.0f};

TEST(Sampling, GreedyIsArgmaxAndLowestIdOnTies) {
  SamplingParams p;
  p.temperature = 0;
  Sampler s(p, 1);
  std::vector<float> l = kLogits;
  EXPECT_EQ(s.sample(l.data(), 8, {}, 0).token, 1);
  std::vector<float> ties = {0.f, 5.f, 1.f, 5.f};
  EXPECT_EQ(s.sample(ties.data(), 4, {}, 0).token, 1);
}

TEST(Sampling, TopKOneIsGreedyWhateverTheTemperature) {
  SamplingParams p;
  p.temperature = 1.5f;
  p.top_k = 1;
  Sampler s(p, 1);
  auto counts = draw(s, kLogits, 200);
  EXPECT_EQ(counts.size(), 1u);
  EXPECT_EQ(counts.begin()->first, 1);
}

TEST(Sampling, TemperatureDrawsFollowSoftmax) {
  for (float temperature : {0.5f, 1.0f, 2.0f}) {
    SamplingParams p;
    p.temperature = temperature;
    p.seed = 42;
    Sampler s(p, 0);
    const int n = 20000;
    auto counts = draw(s, kLogits, n);
    const auto expected = softmax(kLogits, temperature);
    for (size_t id = 0; id < kLogits.size(); ++id) {
      const double freq = counts[static_cast<int32_t>(id)] / double(n);
      // 5 binomial standard deviations (+ a floor for tiny p): fails on a real bias only.
      const double sd = std::sqrt(expected[id] * (1 - expected[id]) / n);
      EXPECT_NEAR(freq, expected[id], 5 * sd + 1e-3) << "T=" << temperature << " id=" << id;
    }
  }
}

TEST(Sampling, TopKRestrictsToTheKBest) {
  SamplingParams p;
  p.temperature = 1.0f;
  p.top_k = 3;
  p.seed = 3;
  Sampler s(p, 0);
  auto counts = draw(s, kLogits, 5000);
  for (const auto& [id, c] : counts) EXPECT_TRUE(id == 1 || id == 5 || id == 2) << id;
  // Renormalized over the three: p(1) = e^3 / (e^3 + e^2.9 + e^2.5).
  const double z = std::exp(3.0) + std::exp(2.9) + std::exp(2.5);
  EXPECT_NEAR(counts[1] / 5000.0, std::exp(3.0) / z, 0.03);
}

TEST(Sampling, TopPKeepsTheSmallestNucleus) {
  const auto probs = softmax(kLogits);
  // Sorted: ids 1, 5, 2, 0, 6, 4, 3, 7. Choose top_p just above the first two's mass.
  const double two = probs[1] + probs[5];
  SamplingParams p;
  p.temperature = 1.0f;
  p.top_p = static_cast<float>(two + 0.01);
  p.seed = 5;
  Sampler s(p, 0);
  auto counts = draw(s, kLogits, 5000);
  std::set<int32_t> seen;
  for (const auto& [id, c] : counts) seen.insert(id);
  EXPECT_EQ(seen, (std::set<int32_t>{1, 5, 2}));  // the third is needed to exceed top_p
  p.top_p = static_cast<float>(two - 0.01);
  Sampler s2(p, 0);
  seen.clear();
  for (const auto& [id, c] : draw(s2, kLogits, 5000)) seen.insert(id);
  EXPECT_EQ(seen, (std::set<int32_t>{1, 5}));
}

TEST(Sampling, MinPDropsTokensBelowAFractionOfTheBest) {
  const auto probs = softmax(kLogits);
  SamplingParams p;
  p.temperature = 1.0f;
  p.min_p = static_cast<float>(probs[2] / probs[1] + 0.01);  // just excludes id 2
  p.seed = 9;
  Sampler s(p, 0);
  std::set<int32_t> seen;
  for (const auto& [id, c] : draw(s, kLogits, 3000)) seen.insert(id);
  EXPECT_EQ(seen, (std::set<int32_t>{1, 5}));
}

TEST(Sampling, SameSeedSameTokensDifferentSeedDifferentTokens) {
  SamplingParams p;
  p.temperature = 1.0f;
  p.seed = 1234;
  auto run = [&](SamplingParams params) {
    Sampler s(params, 0);
    std::vector<int32_t> out;
    for (int i = 0; i < 64; ++i) {
      std::vector<float> l = kLogits;
      out.push_back(s.sample(l.data(), 8, {}, 0).token);
    }
    return out;
  };
  EXPECT_EQ(run(p), run(p));
  SamplingParams q = p;
  q.seed = 4321;
  EXPECT_NE(run(p), run(q));
}

TEST(Sampling, UnseededSamplersUseTheFallbackSeed) {
  SamplingParams p;
  p.temperature = 1.0f;
  Sampler a(p, 77), b(p, 77), c(p, 78);
  std::vector<int32_t> ta, tb, tc;
  for (int i = 0; i < 64; ++i) {
    std::vector<float> l1 = kLogits, l2 = kLogits, l3 = kLogits;
    ta.push_back(a.sample(l1.data(), 8, {}, 0).token);
    tb.push_back(b.sample(l2.data(), 8, {}, 0).token);
    tc.push_back(c.sample(l3.data(), 8, {}, 0).token);
  }
  EXPECT_EQ(ta, tb);
  EXPECT_NE(ta, tc);
}

TEST(Sampling, LogitBiasCanBanAndForce) {
  SamplingParams p;
  p.temperature = 0;
  p.logit_bias = {{1, -100.0f}};
  Sampler s(p, 0);
  std::vector<float> l = kLogits;
  EXPECT_EQ(s.sample(l.data(), 8, {}, 0).token, 5);
  p.logit_bias = {{7, 100.0f}};
  Sampler s2(p, 0);
  l = kLogits;
  EXPECT_EQ(s2.sample(l.data(), 8, {}, 0).token, 7);
}

TEST(Sampling, RepetitionPenaltyDividesPositiveAndMultipliesNegativeLogits) {
  SamplingParams p;
  p.temperature = 0;
  p.repetition_penalty = 1.5f;
  Sampler s(p, 0);
  // History holds id 1 (logit 3 -> 2) in the prompt: id 5 (2.9) wins.
  std::vector<int32_t> history = {1, 3};
  std::vector<float> l = kLogits;
  EXPECT_EQ(s.sample(l.data(), 8, history, 2).token, 5);
  EXPECT_FLOAT_EQ(l[1], 3.0f / 1.5f);
  EXPECT_FLOAT_EQ(l[3], -1.0f * 1.5f);
  EXPECT_FLOAT_EQ(l[0], 1.0f);  // not in history: unchanged
}

TEST(Sampling, PresenceAndFrequencyPenaltiesCountGeneratedTokensOnly) {
  SamplingParams p;
  p.temperature = 0;
  p.presence_penalty = 0.05f;
  p.frequency_penalty = 0.1f;
  Sampler s(p, 0);
  // Prompt {1, 1} is not penalized; generated {1, 1} is: 3 - 0.05 - 2*0.1 = 2.75 < 2.9.
  std::vector<float> l = kLogits;
  std::vector<int32_t> prompt_only = {1, 1};
  EXPECT_EQ(s.sample(l.data(), 8, prompt_only, 2).token, 1);
  l = kLogits;
  std::vector<int32_t> generated = {0, 1, 1};
  EXPECT_EQ(s.sample(l.data(), 8, generated, 1).token, 5);
  EXPECT_FLOAT_EQ(l[1], 3.0f - 0.05f - 2 * 0.1f);
  EXPECT_FLOAT_EQ(l[0], 1.0f);  // prompt token: not penalized
  // The next call counts its own history only (the sampler's counts start from zero).
  l = kLogits;
  std::vector<int32_t> other = {0, 2};
  s.sample(l.data(), 8, other, 1);
  EXPECT_FLOAT_EQ(l[1], 3.0f);
  EXPECT_FLOAT_EQ(l[2], kLogits[2] - 0.05f - 0.1f);
}

TEST(Sampling, BannedIdsAreNeverChosen) {
  SamplingParams p;
  p.temperature = 2.0f;
  p.seed = 11;
  Sampler s(p, 0);
  const std::vector<int32_t> banned = {1, 5, 2};
  std::vector<float> l;
  for (int i = 0; i < 2000; ++i) {
    l = kLogits;
    const int32_t t = s.sample(l.data(), 8, {}, 0, banned).token;
    EXPECT_TRUE(std::find(banned.begin(), banned.end(), t) == banned.end());
  }
}

TEST(Sampling, LogprobsAreTheLogSoftmaxOfTheRawLogits) {
  SamplingParams p;
  p.temperature = 0;
  p.logprobs = true;
  p.top_logprobs = 3;
  p.logit_bias = {{5, 50.0f}};  // changes the choice, not the reported distribution
  Sampler s(p, 0);
  std::vector<float> l = kLogits;
  const SampledToken t = s.sample(l.data(), 8, {}, 0);
  const auto probs = softmax(kLogits);
  EXPECT_EQ(t.token, 5);
  EXPECT_NEAR(t.logprob, std::log(probs[5]), 1e-5);
  ASSERT_EQ(t.top_logprobs.size(), 3u);
  EXPECT_EQ(t.top_logprobs[0].token, 1);
  EXPECT_EQ(t.top_logprobs[1].token, 5);
  EXPECT_EQ(t.top_logprobs[2].token, 2);
  for (const auto& alt : t.top_logprobs) {
    EXPECT_NEAR(alt.logprob, std::log(probs[alt.token]), 1e-5);
  }
}

TEST(Sampling, NoLogprobsUnlessAsked) {
  SamplingParams p;
  p.temperature = 0;
  Sampler s(p, 0);
  std::vector<float> l = kLogits;
  EXPECT_TRUE(s.sample(l.data(), 8, {}, 0).top_logprobs.empty());
}

}  // namespace
}  // namespace spillway::engine
