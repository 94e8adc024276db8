// Turning one row of logits into the next token: a chain of stages (sampler_stages.h).
//
// Order of operations (as llama.cpp / vLLM): logit_bias -> repetition / presence /
// frequency penalties over the tokens generated so far (repetition also over the prompt)
// -> min_tokens / ignore_eos masking of end-of-generation ids -> the structured-output
// constraint mask (when one is set) -> logprobs of the raw distribution (what OpenAI
// reports) -> greedy if temperature == 0 or top_k == 1, else temperature -> top-k ->
// top-p -> min-p -> draw with the sequence's seeded RNG. The vocabulary is never sorted.
//
// Thread contract: a Sampler instance belongs to one sequence and is used by one thread at
// a time (any thread: the runner samples the rows of a step on the kernel pool).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <random>
#include <span>
#include <utility>
#include <vector>

#include "engine/sampling/sampler_stages.h"

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
  ~Sampler();
  Sampler(Sampler&&) noexcept;
  Sampler& operator=(Sampler&&) noexcept;

  // Chooses the next token from logits[0..n_vocab). `logits` is used as scratch and
  // modified. history: prompt + generated tokens (penalties); n_prompt: how many of
  // history are prompt. banned: ids that must not be chosen this step (e.g. EOS before
  // min_tokens). Uses the Sampler's own scratch (grown to the vocabulary on first use).
  SampledToken sample(float* logits, int32_t n_vocab, std::span<const int32_t> history,
                      size_t n_prompt, std::span<const int32_t> banned = {});

  // The same choice from a read-only row: when a logit stage may write the row (bias,
  // penalties, banned ids, a constraint) it is copied into scratch.logits and the chain runs
  // there; otherwise the chain reads `logits` in place and never writes it. scratch: owned by the caller's row slot (one thread at a time),
  // reused across sequences and steps. out: overwritten, its vectors' capacity reused.
  void sample(const float* logits, int32_t n_vocab, std::span<const int32_t> history,
              size_t n_prompt, std::span<const int32_t> banned, SamplerScratch& scratch,
              SampledToken& out);

  // Structured output: from now on every row is masked by constraint->fill_allowed before
  // the temperature, and the chosen token is passed to constraint->accept. Not owned; must
  // outlive the Sampler (or be replaced). null removes it.
  void set_constraint(TokenConstraint* constraint);
  TokenConstraint* constraint() const { return constraint_; }

  // Forced tokens: when the constraint allows exactly one token (forced_token() >= 0) that
  // is inside the row, not banned and has a finite logit, it is appended without running
  // the chain; the constraint is told as usual, logprobs are still computed from the raw
  // row, and a non-greedy sampler advances its RNG by the one draw the chain would have
  // made, so greedy and seeded outputs are the same as with the chain (which could only
  // pick that token). On by default; off runs the chain for every row (tests).
  void set_forced_shortcut(bool on) { forced_shortcut_ = on; }
  // Rows that ran the chain / that took the forced-token shortcut, since construction.
  uint64_t chain_runs() const { return chain_runs_; }
  uint64_t forced_appends() const { return forced_appends_; }

  const SamplingParams& params() const { return params_; }

 private:
  // Whether a logit stage (bias, penalties, banned ids, the constraint's mask) may write the
  // row this call; the candidate stages never do.
  bool writes_logits(std::span<const int32_t> banned) const;
  void run_chain(float* logits, int32_t n_vocab, std::span<const int32_t> history,
                 size_t n_prompt, std::span<const int32_t> banned, SamplerScratch& scratch,
                 SampledToken& out);

  SamplingParams params_;
  std::mt19937_64 rng_;
  // The chain, in order. Logit stages, then (constraint_index_) the constraint's mask when
  // set, then the candidate stages.
  std::vector<std::unique_ptr<SamplerStage>> stages_;
  size_t constraint_index_ = 0;
  bool has_constraint_ = false;
  TokenConstraint* constraint_ = nullptr;
  std::unique_ptr<SamplerScratch> own_scratch_;  // for the in-place sample()
  bool greedy_ = false;  // the chain ends in GreedyStage (no RNG draw)
  bool forced_shortcut_ = true;
  uint64_t chain_runs_ = 0;
  uint64_t forced_appends_ = 0;
};

// Natural-log softmax of the raw logits at `token`, and the top-n alternatives. ids_scratch:
// optional, reused for the selection instead of a fresh vector.
void compute_logprobs(const float* logits, int32_t n_vocab, int32_t token, int32_t top_n,
                      SampledToken& out, std::vector<int32_t>* ids_scratch = nullptr);

}  // namespace spillway::engine
