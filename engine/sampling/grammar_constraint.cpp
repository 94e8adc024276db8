#include "engine/sampling/grammar_constraint.h"

#include <algorithm>
#include <bit>
#include <chrono>

namespace spillway::engine {

grammar::Vocabulary grammar_vocabulary(const Tokenizer& tokenizer) {
  grammar::Vocabulary v;
  const int32_t n = tokenizer.n_vocab();
  v.tokens.resize(static_cast<size_t>(n));
  for (int32_t id = 0; id < n; ++id) {
    if (tokenizer.is_end_of_generation(id)) {
      v.eos_ids.push_back(id);
      continue;  // "" : never part of the grammar's bytes
    }
    v.tokens[static_cast<size_t>(id)] = tokenizer.token_bytes(id, /*include_special=*/false);
  }
  return v;
}

std::shared_ptr<const grammar::TokenTrie> build_token_trie(const Tokenizer& tokenizer) {
  return grammar::TokenTrie::build(grammar_vocabulary(tokenizer));
}

ConstraintCounters& constraint_counters() {
  static ConstraintCounters counters;
  return counters;
}

GrammarConstraint::GrammarConstraint(std::shared_ptr<const grammar::CompiledGrammar> grammar,
                                     std::shared_ptr<const grammar::TokenTrie> trie, grammar::MatcherLimits limits)
    : trie_(trie), matcher_(std::move(grammar), std::move(trie), limits) {}

void GrammarConstraint::prepare() {
  if (failed() || ready_) return;
  ConstraintCounters& counters = constraint_counters();
  const auto t0 = std::chrono::steady_clock::now();
  mask_.assign(trie_->mask_words(), 0);
  Status s = matcher_.compute_mask(mask_.data());
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  counters.masks.fetch_add(1, std::memory_order_relaxed);
  counters.mask_nanoseconds.fetch_add(static_cast<uint64_t>(seconds * 1e9), std::memory_order_relaxed);
  size_t b = 0;
  while (b < std::size(ConstraintCounters::kMaskBucketBounds) && seconds > ConstraintCounters::kMaskBucketBounds[b]) ++b;
  counters.mask_bucket[b].fetch_add(1, std::memory_order_relaxed);
  if (!s) {
    error_ = "structured output: " + s.error().message;
    counters.failures.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  ready_ = true;
  allowed_count_ = 0;
  only_token_ = -1;
  for (size_t w = 0; w < mask_.size(); ++w) {
    if (!mask_[w]) continue;
    allowed_count_ += std::popcount(mask_[w]);
    if (allowed_count_ > 1) break;
    only_token_ = static_cast<int32_t>(w * 64 + static_cast<size_t>(std::countr_zero(mask_[w])));
  }
  if (allowed_count_ == 1) counters.forced_tokens.fetch_add(1, std::memory_order_relaxed);
}

int32_t GrammarConstraint::forced_token() {
  prepare();
  if (failed() || !ready_ || allowed_count_ != 1) return -1;
  return only_token_;
}

void GrammarConstraint::fill_allowed(std::span<uint64_t> allowed, int32_t /*n_vocab*/) {
  prepare();
  if (failed()) return;  // nothing allowed; the owner ends the sequence
  ConstraintCounters& counters = constraint_counters();
  // The model's rows may be wider than the tokenizer (padded vocabularies): ids past the
  // trie stay disallowed; the last shared word is cut at n_vocab by the stage.
  const size_t words = std::min(allowed.size(), mask_.size());
  for (size_t w = 0; w < words; ++w) allowed[w] = mask_[w];
  if (allowed_count_ == 0) {
    error_ = "structured output: the grammar allows no token here (the vocabulary cannot spell "
             "what it requires)";
    counters.failures.fetch_add(1, std::memory_order_relaxed);
  }
}

void GrammarConstraint::accept(int32_t token) {
  ready_ = false;
  if (failed()) return;
  if (token < 0 || static_cast<size_t>(token) >= trie_->vocab_size()) {
    error_ = "structured output: token " + std::to_string(token) + " is outside the vocabulary";
    return;
  }
  Status s = matcher_.accept_token(token);
  if (!s) {
    error_ = "structured output: " + s.error().message;
    constraint_counters().failures.fetch_add(1, std::memory_order_relaxed);
  }
}

}  // namespace spillway::engine
