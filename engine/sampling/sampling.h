// Turning one row of logits into the next token.
//
// Order of operations (as llama.cpp / vLLM): logit_bias -> repetition / presence /
// frequency penalties over the tokens generated so far (repetition also over the prompt)
// -> min_tokens / ignore_eos masking of end-of-generation ids -> logprobs of the raw
// distribution (what OpenAI reports) -> greedy if temperature == 0, else temperature ->
// top-k -> top-p -> min-p -> draw with the sequence's seeded RNG.
//
// Thread contract: a Sampler instance belongs to one sequence and one thread at a time.
#pragma once

#include <cstdint>
#include <optional>
#include <random>
#include <span>
#include <utility>
#include <vector>

namespace spillway::engine {

struct SamplingParams {
  float temperature = 1.0f;      // 0 = greedy
  float top_p = 1.0f;            // (0, 1]
  int32_t top_k = 0;             // 0 = off
  float min_p = 0.0f;            // 0 = off
  float repetition_penalty = 1.0f;  // 1 = off (llama.cpp/HF style: divide positive logits)
  float presence_penalty = 0.0f;    // OpenAI: -2..2
  float frequency_penalty = 0.0f;   // OpenAI: -2..2
  std::vector<std::pair<int32_t, float>> logit_bias;  // added to logits
  std::optional<uint64_t> seed;  // none = nondeterministic
  int32_t top_logprobs = 0;      // number of alternatives to report (0..20)
  bool logprobs = false;         // report the chosen token's logprob
};

struct TokenLogprob {
  int32_t token = -1;
  float logprob = 0.0f;
};

struct SampledToken {
  int32_t token = -1;
  float logprob = 0.0f;                    // of the chosen token, in the raw distribution
  std::vector<TokenLogprob> top_logprobs;  // best first, when asked for
};

class Sampler {
 public:
  Sampler(SamplingParams params, uint64_t fallback_seed);

  // Chooses the next token from logits[0..n_vocab). `logits` is used as scratch and
  // modified. history: prompt + generated tokens (penalties); n_prompt: how many of
  // history are prompt. banned: ids that must not be chosen this step (e.g. EOS before
  // min_tokens).
  SampledToken sample(float* logits, int32_t n_vocab, std::span<const int32_t> history,
                      size_t n_prompt, std::span<const int32_t> banned = {});

  const SamplingParams& params() const { return params_; }

 private:
  SamplingParams params_;
  std::mt19937_64 rng_;
  // Scratch reused between calls (no allocation once grown to the vocabulary).
  std::vector<std::pair<float, int32_t>> candidates_;
  std::vector<int32_t> counts_;   // per token id, zero between calls
  std::vector<int32_t> touched_;  // ids with a nonzero count
  std::vector<int32_t> ids_;      // top-logprob selection
  std::vector<float> raw_logits_;  // logits before bias/penalties, kept when logprobs are asked
};

// Natural-log softmax of the raw logits at `token`, and the top-n alternatives. ids_scratch:
// optional, reused for the selection instead of a fresh vector.
void compute_logprobs(const float* logits, int32_t n_vocab, int32_t token, int32_t top_n,
                      SampledToken& out, std::vector<int32_t>* ids_scratch = nullptr);

}  // namespace spillway::engine
