// The plain temperature draw (engine/sampling/band_draw.h) on rows the chain tests do not
// cover: very wide rows (many exps round to subnormals or underflow to 0: the exp kernel's
// integer path), rows where one level's band holds nearly every id (a near-flat row), and
// the read-only entry point reading the caller's row in place (no copy) without writing it.
// Tokens are checked against the sorting reference sampler (reference_sampler.h) for the
// same seed, as in test_sampling_chain.cpp. The fast path (bounds on the masses, no stored
// probabilities) against the exact procedure it stands for, token for token.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "engine/sampling/band_draw.h"
#include "engine/sampling/sampling.h"
#include "kernels/exp_sum.h"
#include "reference_sampler.h"

namespace spillway::engine {
namespace {

constexpr int32_t kVocab = 151936;

std::vector<float> normal_row(std::mt19937& g, int32_t n, float sd) {
  std::normal_distribution<float> normal(0.0f, sd);
  std::vector<float> row(static_cast<size_t>(n));
  for (float& x : row) x = normal(g);
  return row;
}

// Draws `steps` tokens from fresh rows with both samplers (same seed) and the read-only entry.
void expect_reference_tokens(float sd, float temperature, int steps, uint32_t seed, float top_p = 1.0f,
                             float min_p = 0.0f) {
  std::mt19937 g(seed);
  SamplingParams p;
  p.temperature = temperature;
  p.top_p = top_p;
  p.min_p = min_p;
  p.seed = seed;
  reference::ReferenceSampler ref(p, 0);
  Sampler chain(p, 0);
  SamplerScratch scratch;
  SampledToken got;
  for (int step = 0; step < steps; ++step) {
    const std::vector<float> row = normal_row(g, kVocab, sd);
    std::vector<float> a = row;
    const int32_t want = ref.sample(a.data(), kVocab, {}, 0).token;
    chain.sample(row.data(), kVocab, {}, 0, {}, scratch, got);
    ASSERT_EQ(got.token, want) << "sd=" << sd << " T=" << temperature << " top_p=" << top_p << " min_p=" << min_p
                               << " step=" << step;
  }
}

TEST(BandDraw, WideRowsWithSubnormalExpsDrawTheReferenceTokens) {
  // sd 30 at T = 1: most exps are below 2^-126 or zero; T = 0.5 doubles the spread.
  expect_reference_tokens(30.0f, 1.0f, 12, 1);
  expect_reference_tokens(30.0f, 0.5f, 8, 2);
  expect_reference_tokens(12.0f, 1.0f, 8, 3);
}

TEST(BandDraw, NearFlatRowsRefineThroughSeveralLevels) {
  // The whole mass spread over ~all ids: the crossing band holds most of the row, so the
  // draw narrows it level by level.
  expect_reference_tokens(0.01f, 1.0f, 12, 4);
  expect_reference_tokens(1.0f, 2.0f, 12, 5);
}

TEST(BandDraw, TopPAndMinPCutTheRowAsTheReferenceDoes) {
  // The cut-offs on the whole row (no top-k): a model-like wide row, a spread one, a
  // near-flat one (the top-p bound deep in a band of ~all ids), both cut-offs together.
  for (auto [top_p, min_p] : {std::pair{0.9f, 0.0f}, std::pair{0.5f, 0.0f}, std::pair{1.0f, 0.05f},
                              std::pair{0.95f, 0.1f}, std::pair{0.999f, 0.0f}}) {
    expect_reference_tokens(15.0f, 1.0f, 6, 21, top_p, min_p);
    expect_reference_tokens(2.5f, 0.8f, 6, 22, top_p, min_p);
    expect_reference_tokens(0.01f, 1.0f, 4, 23, top_p, min_p);
  }
}

TEST(BandDraw, TheReadOnlyEntryReadsTheRowInPlaceAndLeavesItUnchanged) {
  std::mt19937 g(9);
  const std::vector<float> row = normal_row(g, 5000, 3.0f);
  for (float temperature : {0.0f, 1.0f}) {
    for (bool logprobs : {false, true}) {
      SamplingParams p;
      p.temperature = temperature;
      p.seed = 3;
      p.logprobs = logprobs;
      p.top_logprobs = logprobs ? 3 : 0;
      Sampler s(p, 0);
      reference::ReferenceSampler ref(p, 0);
      SamplerScratch scratch;
      SampledToken out;
      std::vector<float> copy = row;
      s.sample(row.data(), 5000, {}, 0, {}, scratch, out);
      EXPECT_EQ(row, copy) << "T=" << temperature;
      EXPECT_EQ(out.token, ref.sample(copy.data(), 5000, {}, 0).token) << "T=" << temperature;
      // Nothing was copied into the scratch's row buffer.
      EXPECT_TRUE(scratch.logits.empty()) << "T=" << temperature;
    }
  }
}

// band_draw's fast path against its exact procedure (BandDrawPath::kExact) for the same
// uniform number: the same token, the same RNG state after, on rows of every shape the
// bounds meet (peaked like a model's, spread, flat, wide with subnormal exps, coarse with
// ties and -inf), several temperatures and vocabulary sizes (every tail length).
TEST(BandDraw, TheFastPathDrawsTheExactProceduresToken) {
  const int64_t fallbacks_before = band_draw_fallbacks();
  SamplerScratch fast_scratch, exact_scratch;
  std::mt19937 g(17);
  int draws = 0;
  for (int32_t n : {kVocab, 4099, 1000, 64, 17, 1}) {
    for (int kind = 0; kind < 6; ++kind) {
      for (float temperature : {0.5f, 1.0f, 1.7f}) {
        const int steps = n == kVocab ? 6 : 40;
        for (int step = 0; step < steps; ++step) {
          const float sd = kind == 0 ? 15.0f : kind == 1 ? 2.5f : kind == 2 ? 0.02f : kind == 3 ? 40.0f : 2.0f;
          std::vector<float> row = normal_row(g, n, sd);
          if (kind == 4) {  // coarse: ties decided by id, 5% -inf
            for (float& x : row) x = std::uniform_int_distribution<int>(0, 19)(g) == 0 ? -std::numeric_limits<float>::infinity() : std::round(x * 2.0f) / 2.0f;
          }
          if (kind == 5) row[std::uniform_int_distribution<size_t>(0, row.size() - 1)(g)] += 9.0f;  // one dominant id
          std::mt19937_64 rng_fast(1000u + uint64_t(draws)), rng_exact = rng_fast;
          SamplingRow a, b;
          a.logits = b.logits = row.data();
          a.n_vocab = b.n_vocab = n;
          a.inv_temperature = b.inv_temperature = 1.0f / temperature;
          a.rng = &rng_fast;
          b.rng = &rng_exact;
          a.scratch = &fast_scratch;
          b.scratch = &exact_scratch;
          const int32_t want = band_draw(b, BandDrawPath::kExact);
          const int32_t got = band_draw(a, BandDrawPath::kAuto);
          ASSERT_EQ(got, want) << "n=" << n << " kind=" << kind << " T=" << temperature << " step=" << step;
          ASSERT_EQ(rng_fast(), rng_exact()) << "n=" << n << " kind=" << kind;
          ++draws;
        }
      }
    }
  }
  RecordProperty("fallbacks", static_cast<int>(band_draw_fallbacks() - fallbacks_before));
  RecordProperty("draws", draws);
}

// The case the fast path's bound is for: equal logits over 151,936 ids round every
// probability float(1/S) the same way, so the exact total differs from 1 by up to 2^-24
// relative (not a few double ulps), and r = c * total moves across boundaries 6.6e-6 apart
// for about 1% of the draws. A bound without the float rounding term draws other tokens
// here (checked by hand); the real one falls back to the exact procedure instead.
TEST(BandDraw, TheFastPathMatchesTheExactOneWhenEveryProbabilityRoundsTheSameWay) {
  SamplerScratch fast_scratch, exact_scratch;
  for (float value : {0.0f, 3.25f}) {
    std::vector<float> row(static_cast<size_t>(kVocab), value);
    for (int step = 0; step < 300; ++step) {
      std::mt19937_64 rng_fast(77u + uint64_t(step)), rng_exact = rng_fast;
      SamplingRow a, b;
      a.logits = b.logits = row.data();
      a.n_vocab = b.n_vocab = kVocab;
      a.rng = &rng_fast;
      b.rng = &rng_exact;
      a.scratch = &fast_scratch;
      b.scratch = &exact_scratch;
      const int32_t want = band_draw(b, BandDrawPath::kExact);
      ASSERT_EQ(band_draw(a, BandDrawPath::kAuto), want) << "value=" << value << " step=" << step;
    }
  }
}

// row_probabilities: the draw's probabilities, float(e * (1 / S)) with the kernels' exp and
// sum, summing to 1; a row of -inf gives zeros.
TEST(BandDraw, RowProbabilitiesAreTheNormalisedKernelExps) {
  std::mt19937 g(5);
  std::vector<float> row = normal_row(g, 3001, 4.0f);
  row[7] = -std::numeric_limits<float>::infinity();
  std::vector<float> p(row.size(), -1.0f);
  row_probabilities(row.data(), 3001, 0.8f, p.data());
  float mx = row[0];
  for (float x : row) mx = std::max(mx, x);
  std::vector<float> e(row.size());
  const double inv_sum = 1.0 / kernels::exp_scaled_sum(row.data(), mx, 0.8f, e.data(), 3001);
  double total = 0.0;
  for (size_t i = 0; i < row.size(); ++i) {
    ASSERT_EQ(p[i], static_cast<float>(static_cast<double>(kernels::exp_poly((row[i] - mx) * 0.8f)) * inv_sum)) << i;
    total += p[i];
  }
  EXPECT_EQ(p[7], 0.0f);
  EXPECT_NEAR(total, 1.0, 1e-6);
  std::vector<float> none(5, -std::numeric_limits<float>::infinity());
  row_probabilities(none.data(), 5, 1.0f, p.data());
  for (int i = 0; i < 5; ++i) EXPECT_EQ(p[size_t(i)], 0.0f);
}

}  // namespace
}  // namespace spillway::engine
