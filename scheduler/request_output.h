// The output side of one choice of a request: its sampler, detokenizer, stop conditions and
// the update pieces not yet delivered.
//
// Per generated token, in this order:
// 1. end-of-generation id (unless ignore_eos) or a stop_token_ids id -> Stop; the token is
//    reported in ChoiceUpdate::tokens and counted in completion_tokens, its text is not
//    part of the output;
// 2. its text goes through a StreamingDetokenizer (skip_special_tokens) and the stop-string
//    matcher: a completed stop string -> Stop, the stop string and anything after it never
//    reach the output; text that may still become a stop string is held back;
// 3. max_tokens reached, or the sequence filled the context -> Length.
// min_tokens: while fewer than min_tokens tokens were generated, end-of-generation ids and
// stop ids are banned in sampling (banned()), and the text of tokens before the
// min_tokens-th is not searched for stop strings (as vLLM).
// When the stream ends other than by a stop string, held-back text is released.
// Cancellation and errors release nothing more.
//
// Thread contract: engine thread only.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "engine/sampling/grammar_constraint.h"
#include "engine/sampling/sampling.h"
#include "engine/tokenizer/tokenizer.h"
#include "scheduler/config.h"
#include "scheduler/request.h"
#include "scheduler/stop_strings.h"

namespace spillway::scheduler {

class ChoiceOutput {
 public:
  // end_of_generation_ids: every id the tokenizer calls end-of-generation (for min_tokens).
  // max_new_tokens: this choice's generation limit (max_tokens, or what the context leaves).
  // fallback_seed: the sampler's seed when params.sampling.seed is unset. With a seed, the
  // choice's sampler is seeded with seed + index, so choice 0 reproduces an n = 1 request.
  ChoiceOutput(const engine::Tokenizer& tokenizer, const GenerationParams& params, int32_t index,
               std::span<const int32_t> end_of_generation_ids, int32_t max_new_tokens,
               uint64_t fallback_seed,
               std::shared_ptr<const grammar::TokenTrie> token_trie = nullptr);
  ChoiceOutput(ChoiceOutput&&) = default;

  int32_t index() const { return index_; }
  engine::Sampler& sampler() { return sampler_; }
  // Ids that must not be sampled next (end-of-generation and stop ids before min_tokens;
  // none under structured output, where the grammar alone decides where the output ends).
  std::span<const int32_t> banned() const;

  // Applies the next generated token. Returns true when it finished the choice.
  bool append(engine::SampledToken&& token);
  // Ends the choice without releasing held text (Cancelled, Error).
  void finish(FinishReason reason);
  // Ends the stream as the end of generation does: held text is released (a diffusion
  // canvas stopped by its repeat guard). No-op when already finished.
  void end(FinishReason reason) {
    if (!finish_) end_stream(reason);
  }

  bool finished() const { return finish_.has_value(); }
  // Structured output: why the choice ended with FinishReason::Error ("" otherwise).
  const std::string& error() const { return error_; }
  std::optional<FinishReason> finish_reason() const { return finish_; }
  int32_t generated() const { return generated_; }

  // Moves what is new since the last call into out; false when there is nothing.
  bool take_update(ChoiceUpdate& out);

 private:
  void end_stream(FinishReason reason);  // flushes detokenizer and held text
  bool is_stop_id(int32_t id) const;

  const engine::Tokenizer& tokenizer_;
  int32_t index_;
  engine::Sampler sampler_;
  // Structured output: the choice's matcher, set as sampler_'s constraint (heap: the
  // sampler keeps its address across moves).
  std::unique_ptr<engine::GrammarConstraint> constraint_;
  std::string error_;
  engine::StreamingDetokenizer detokenizer_;
  StopStringMatcher stop_strings_;
  std::vector<int32_t> stop_token_ids_;
  std::vector<int32_t> banned_before_min_;
  bool ignore_eos_;
  bool want_logprobs_;
  int32_t min_tokens_;
  int32_t max_new_tokens_;

  int32_t generated_ = 0;
  std::optional<FinishReason> finish_;
  bool finish_reported_ = false;
  std::string new_text_;
  std::vector<GeneratedToken> new_tokens_;
};

}  // namespace spillway::scheduler
