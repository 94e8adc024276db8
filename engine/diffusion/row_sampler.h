// One masked row's candidate token and its confidence, as llama.cpp's diffusion loop gets
// them from its sampler chain (top_k, top_p, temperature, dist) and calculate_confidence().
//
// The candidate distribution: the top_k highest logits (0 = all, ties to the lower id),
// then the smallest prefix whose softmax mass reaches top_p (< 1), then softmax of
// logits / temperature (temperature 0: of the raw logits) over what is left. The token is
// the best candidate at temperature 0, else a draw from that distribution with `rng`.
// Confidence (Algorithm): Confidence and Origin p(token); Margin p1 - p2 (p1 alone with one
// candidate); Entropy -sum p*log(p + 1e-10) (llama.cpp returns the entropy itself, so the
// most uncertain rows commit first: kept for parity, see README); Random one uniform float
// from `rng` (libstdc++ uniform_real_distribution<float>(0, 1)).
//
// Thread: an instance is one thread's scratch; cost O(n_vocab) per row (top_k > 0 or top_p
// < 1 add a partial sort of the kept candidates).
#pragma once

#include <cstdint>
#include <random>
#include <utility>
#include <vector>

#include "engine/diffusion/params.h"
#include "engine/diffusion/vocab_top_k.h"

namespace spillway::engine::diffusion {

struct RowChoice {
  int32_t token = -1;
  float confidence = 0.0f;
  float p_token = 0.0f;  // turbo only: softmax(raw logits)[token] over the whole vocabulary
};

class RowSampler {
 public:
  explicit RowSampler(const DiffusionParams& params) : params_(params) {}

  // logits: the row's n_vocab raw logits. Draws from rng only as described above.
  RowChoice choose(const float* logits, int32_t n_vocab, std::mt19937& rng);
  // The token alone (Origin commits draw no confidence).
  int32_t sample_token(const float* logits, int32_t n_vocab, std::mt19937& rng);

 private:
  void build_distribution(const float* logits, int32_t n_vocab);
  // DiffusionParams::exact_top_k: builds cand_ from VocabTopK when the row's result needs
  // only the best few candidates (see params.h); false = the plain path must run.
  bool build_hierarchical(const float* logits, int32_t n_vocab);
  // The full-vocabulary softmax of the chosen token for threshold commits.
  float full_softmax_p(const float* logits, int32_t n_vocab, int32_t token);
  int32_t pick(std::mt19937& rng) const;

  DiffusionParams params_;
  // The candidate distribution after build_distribution: (p, id), best first.
  std::vector<std::pair<float, int32_t>> cand_;
  VocabTopK top_k_;
  // exact_top_k, greedy full-vocabulary rows: the normalizer and max of the row just built.
  bool have_sum_ = false;
  double sum_ = 0.0;
  float max_ = 0.0f;
};

// libstdc++'s std::uniform_real_distribution<float>(0, 1)(rng) for std::mt19937, written
// out so the stream does not depend on the standard library: float(u32) / 2^32, and a
// result that rounds to 1 becomes the largest float below 1.
float uniform_float(std::mt19937& rng);

}  // namespace spillway::engine::diffusion
