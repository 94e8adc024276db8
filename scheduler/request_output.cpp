#include "scheduler/request_output.h"

#include <algorithm>
#include <cassert>

namespace spillway::scheduler {

namespace {

engine::SamplingParams choice_sampling(const engine::SamplingParams& params, int32_t index) {
  engine::SamplingParams p = params;
  if (p.seed) p.seed = *p.seed + static_cast<uint64_t>(index);
  return p;
}

}  // namespace

ChoiceOutput::ChoiceOutput(const engine::Tokenizer& tokenizer, const GenerationParams& params,
                           int32_t index, std::span<const int32_t> end_of_generation_ids,
                           int32_t max_new_tokens, uint64_t fallback_seed,
                           std::shared_ptr<const grammar::TokenTrie> token_trie)
    : tokenizer_(tokenizer),
      index_(index),
      sampler_(choice_sampling(params.sampling, index), fallback_seed + static_cast<uint64_t>(index)),
      detokenizer_(tokenizer, params.skip_special_tokens),
      stop_strings_(params.stop),
      stop_token_ids_(params.stop_token_ids),
      ignore_eos_(params.ignore_eos),
      want_logprobs_(params.sampling.logprobs || params.sampling.top_logprobs > 0),
      min_tokens_(std::max(params.min_tokens, 0)),
      max_new_tokens_(max_new_tokens) {
  assert(max_new_tokens_ >= 1);
  if (params.grammar && token_trie) {
    constraint_ = std::make_unique<engine::GrammarConstraint>(params.grammar, std::move(token_trie));
    sampler_.set_constraint(constraint_.get());
  }
  std::sort(stop_token_ids_.begin(), stop_token_ids_.end());
  if (min_tokens_ > 0) {
    banned_before_min_.assign(end_of_generation_ids.begin(), end_of_generation_ids.end());
    banned_before_min_.insert(banned_before_min_.end(), stop_token_ids_.begin(), stop_token_ids_.end());
    std::sort(banned_before_min_.begin(), banned_before_min_.end());
    banned_before_min_.erase(std::unique(banned_before_min_.begin(), banned_before_min_.end()),
                             banned_before_min_.end());
  }
}

std::span<const int32_t> ChoiceOutput::banned() const {
  // Structured output: the grammar alone decides where the output may end.
  if (constraint_) return {};
  if (generated_ < min_tokens_) return banned_before_min_;
  return {};
}

bool ChoiceOutput::is_stop_id(int32_t id) const {
  if (!ignore_eos_ && tokenizer_.is_end_of_generation(id)) return true;
  return std::binary_search(stop_token_ids_.begin(), stop_token_ids_.end(), id);
}

bool ChoiceOutput::append(engine::SampledToken&& token) {
  assert(!finished());
  ++generated_;
  GeneratedToken& out = new_tokens_.emplace_back();
  out.id = token.token;
  if (want_logprobs_) {
    out.logprob = token.logprob;
    out.top_logprobs = std::move(token.top_logprobs);
  }

  if (constraint_ && constraint_->failed()) {
    error_ = constraint_->error_message();
    finish_ = FinishReason::Error;
    return true;
  }
  if (is_stop_id(token.token) || (constraint_ && constraint_->terminated())) {
    end_stream(FinishReason::Stop);
    return true;
  }
  std::string text = detokenizer_.push(token.token);
  if (generated_ >= min_tokens_) {
    new_text_ += stop_strings_.push(text);
    if (stop_strings_.stopped()) {
      finish_ = FinishReason::Stop;
      return true;
    }
  } else {
    new_text_ += text;
  }
  if (generated_ >= max_new_tokens_) {
    end_stream(FinishReason::Length);
    return true;
  }
  return false;
}

void ChoiceOutput::end_stream(FinishReason reason) {
  std::string rest = detokenizer_.flush();
  if (generated_ >= min_tokens_) {
    new_text_ += stop_strings_.push(rest);
    if (stop_strings_.stopped()) {
      finish_ = FinishReason::Stop;
      return;
    }
    new_text_ += stop_strings_.flush();
  } else {
    new_text_ += rest;
  }
  finish_ = reason;
}

void ChoiceOutput::finish(FinishReason reason) {
  if (!finish_) finish_ = reason;
}

bool ChoiceOutput::take_update(ChoiceUpdate& out) {
  const bool report_finish = finish_ && !finish_reported_;
  if (new_text_.empty() && new_tokens_.empty() && !report_finish) return false;
  out.index = index_;
  out.text = std::move(new_text_);
  new_text_.clear();
  out.tokens = std::move(new_tokens_);
  new_tokens_.clear();
  out.finish.reset();
  if (report_finish) {
    out.finish = finish_;
    finish_reported_ = true;
  }
  return true;
}

}  // namespace spillway::scheduler
