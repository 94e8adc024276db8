// The plain temperature draw (engine/sampling/band_draw.h) on rows the chain tests do not
// cover: very wide rows (many exps round to subnormals or underflow to 0: the exp kernel's
// integer path), rows where one level's band holds nearly every id (a near-flat row), and
// the read-only entry point reading the caller's row in place (no copy) without writing it.
// Tokens are checked against the sorting reference sampler (reference_sampler.h) for the
// same seed, as in test_sampling_chain.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "engine/sampling/sampling.h"
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
void expect_reference_tokens(float sd, float temperature, int steps, uint32_t seed) {
  std::mt19937 g(seed);
  SamplingParams p;
  p.temperature = temperature;
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
    ASSERT_EQ(got.token, want) << "sd=" << sd << " T=" << temperature << " step=" << step;
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

}  // namespace
}  // namespace spillway::engine
