// The sampler's probabilities and logprobs after the exp moved to the kernels' vectorized
// exp_poly (kernels/exp_sum.h): against the old math (glibc std::exp in float, summed in
// double; logprobs all in double) at Qwen's 151,936-token vocabulary. Seeded draws are
// checked token for token elsewhere (test_sampling_chain.cpp, against a reference sampler
// that uses the same exp); this file checks that the distribution itself did not move.
#include <gtest/gtest.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "engine/sampling/band_draw.h"
#include "engine/sampling/sampling.h"

namespace spillway::engine {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();
constexpr int32_t kVocab = 151936;

// kind 0 spread (sd 3), 1 nearly flat (sd 0.05), 2 coarse with 5% -inf, 3 one dominant
// token, 4 very spread (sd 15: subnormal and zero probabilities in the tail).
std::vector<float> make_row(uint32_t seed, int kind) {
  std::mt19937 g(seed);
  const float sd = kind == 0 ? 3.0f : kind == 1 ? 0.05f : kind == 4 ? 15.0f : 2.0f;
  std::normal_distribution<float> normal(0.0f, sd);
  std::uniform_int_distribution<int> pct(0, 99);
  std::vector<float> row(kVocab);
  for (float& x : row) {
    x = normal(g);
    if (kind == 2) {
      x = std::round(x * 2.0f) / 2.0f;
      if (pct(g) < 5) x = kNegInf;
    }
  }
  if (kind == 3) row[std::uniform_int_distribution<int32_t>(0, kVocab - 1)(g)] += 12.0f;
  return row;
}

// The old sampler's probabilities over `logits` (all finite ids, or the given candidates in
// rank order): float std::exp((l - max) * 1/T), a double sum, each the float of its share.
std::vector<float> old_probs(const std::vector<float>& logits, float temperature) {
  const float inv_t = 1.0f / temperature;
  float mx = kNegInf;
  for (float l : logits) mx = std::max(mx, l);
  std::vector<float> e(logits.size());
  double sum = 0.0;
  for (size_t i = 0; i < logits.size(); ++i) {
    e[i] = std::exp((logits[i] - mx) * inv_t);
    sum += e[i];
  }
  for (float& v : e) v = static_cast<float>(v / sum);
  return e;
}

// 1e-6 relative where the old probability is a normal float; below that (subnormal), within
// a few units of 2^-149.
void expect_close(float got, float want, const std::string& where) {
  const double tol = want >= FLT_MIN ? 1e-6 * want : 4.0 * std::numeric_limits<float>::denorm_min();
  ASSERT_LE(std::fabs(double(got) - double(want)), tol) << where << " got " << got << " want " << want;
}

TEST(SamplingExp, DenseProbabilitiesWithinOneMillionthOfStdExp) {
  SamplerScratch scratch;
  SampledToken out;
  uint32_t seed = 11;
  for (float temperature : {1.0f, 0.7f, 1.6f}) {
    for (int kind = 0; kind < 5; ++kind) {
      const std::vector<float> row = make_row(seed++, kind);
      SamplingParams p;
      p.temperature = temperature;  // top_p 1, no top_k: the dense all-ids softmax
      p.seed = seed;
      Sampler sampler(p, 0);
      sampler.sample(row.data(), kVocab, {}, 0, {}, scratch, out);
      // The draw stores no probabilities: row_probabilities computes the ones it is defined by.
      std::vector<float> probs(kVocab, -1.0f);
      row_probabilities(row.data(), kVocab, 1.0f / temperature, probs.data());
      const std::vector<float> want = old_probs(row, temperature);
      double total = 0.0;
      for (int32_t i = 0; i < kVocab; ++i) {
        expect_close(probs[size_t(i)], want[size_t(i)],
                     "T=" + std::to_string(temperature) + " kind=" + std::to_string(kind) + " id=" + std::to_string(i));
        if (HasFatalFailure()) return;
        total += probs[size_t(i)];
      }
      EXPECT_NEAR(total, 1.0, 1e-5);
    }
  }
}

TEST(SamplingExp, TopKCandidateProbabilitiesWithinOneMillionthOfStdExp) {
  SamplerScratch scratch;
  SampledToken out;
  uint32_t seed = 51;
  for (int32_t k : {3, 40, 1000}) {
    for (int kind = 0; kind < 5; ++kind) {
      const std::vector<float> row = make_row(seed++, kind);
      SamplingParams p;
      p.temperature = 0.8f;
      p.top_k = k;
      p.seed = seed;
      Sampler sampler(p, 0);
      sampler.sample(row.data(), kVocab, {}, 0, {}, scratch, out);
      // The k best in rank order, as the chain keeps them in scratch.candidates.
      std::vector<int32_t> ids(kVocab);
      for (int32_t i = 0; i < kVocab; ++i) ids[size_t(i)] = i;
      std::partial_sort(ids.begin(), ids.begin() + k, ids.end(), [&](int32_t a, int32_t b) {
        return row[size_t(a)] > row[size_t(b)] || (row[size_t(a)] == row[size_t(b)] && a < b);
      });
      std::vector<float> kept(size_t(k), 0.0f);
      for (int32_t i = 0; i < k; ++i) kept[size_t(i)] = row[size_t(ids[size_t(i)])];
      const std::vector<float> want = old_probs(kept, p.temperature);
      for (int32_t i = 0; i < k; ++i) {
        ASSERT_EQ(scratch.candidates[size_t(i)].id, ids[size_t(i)]);
        expect_close(scratch.candidates[size_t(i)].p, want[size_t(i)],
                     "k=" + std::to_string(k) + " kind=" + std::to_string(kind) + " rank=" + std::to_string(i));
        if (HasFatalFailure()) return;
      }
    }
  }
}

// Logprobs against log-softmax computed all in double (the old code), and the top
// alternatives against a full sort.
TEST(SamplingExp, LogprobsWithinToleranceOfDoubleAndTopAlternativesExact) {
  uint32_t seed = 91;
  double worst = 0.0;
  for (int kind = 0; kind < 5; ++kind) {
    std::vector<float> row = make_row(seed++, kind);
    if (kind == 1) {  // ties at the top: decided by the lower id
      row[500] = row[90000] = row[7] = 1.0f;
    }
    double mx = kNegInf;
    for (float l : row) mx = std::max(mx, double(l));
    double sum = 0.0;
    for (float l : row) sum += std::exp(double(l) - mx);
    const double lse = std::log(sum) + mx;
    std::vector<int32_t> order(kVocab);
    for (int32_t i = 0; i < kVocab; ++i) order[size_t(i)] = i;
    std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
      return row[size_t(a)] > row[size_t(b)] || (row[size_t(a)] == row[size_t(b)] && a < b);
    });
    for (int32_t top_n : {1, 5, 20}) {
      for (int32_t token : {order[0], order[3], order[70000], int32_t(12345)}) {
        if (row[size_t(token)] == kNegInf) continue;
        SampledToken out;
        compute_logprobs(row.data(), kVocab, token, top_n, out);
        const double want = double(row[size_t(token)]) - lse;
        const double err = std::fabs(double(out.logprob) - want);
        worst = std::max(worst, err);
        // 1e-6 absolute plus the float rounding of the result (|logprob| up to ~80 here).
        EXPECT_LE(err, 1e-6 + 1.2e-7 * std::fabs(want)) << "kind=" << kind << " token=" << token;
        ASSERT_EQ(out.top_logprobs.size(), size_t(top_n));
        for (int32_t i = 0; i < top_n; ++i) {
          EXPECT_EQ(out.top_logprobs[size_t(i)].token, order[size_t(i)]) << "kind=" << kind << " rank " << i;
          EXPECT_NEAR(out.top_logprobs[size_t(i)].logprob, double(row[size_t(order[size_t(i)])]) - lse,
                      1e-6 + 1.2e-7 * std::fabs(double(row[size_t(order[size_t(i)])]) - lse));
        }
      }
    }
  }
  RecordProperty("worst_abs_error_e9", static_cast<int>(worst * 1e9));
}

// Short rows and rows smaller than top_n: every id, in rank order (ties by id), -inf last.
TEST(SamplingExp, TopAlternativesOnShortRows) {
  const std::vector<float> row = {0.5f, 2.0f, kNegInf, 2.0f, -1.0f, 0.5f, 3.0f};
  SampledToken out;
  compute_logprobs(row.data(), 7, 1, 20, out);
  const std::vector<int32_t> want = {6, 1, 3, 0, 5, 4, 2};
  ASSERT_EQ(out.top_logprobs.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ(out.top_logprobs[i].token, want[i]) << i;
  EXPECT_EQ(out.top_logprobs.back().logprob, kNegInf);
  compute_logprobs(row.data(), 7, 6, 2, out);
  ASSERT_EQ(out.top_logprobs.size(), 2u);
  EXPECT_EQ(out.top_logprobs[0].token, 6);
  EXPECT_EQ(out.top_logprobs[1].token, 1);
}

}  // namespace
}  // namespace spillway::engine
