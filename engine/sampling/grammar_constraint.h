// The grammar library (grammar/) plugged into the sampler: the tokenizer's vocabulary as a
// grammar::Vocabulary / TokenTrie, and GrammarConstraint, the TokenConstraint of one
// structured-output sequence.
//
// Per step of a constrained sequence the sampler calls fill_allowed (the matcher's mask,
// EOS ids only where the grammar is complete) and then accept(chosen token). A cap hit in
// the mask, or a token the grammar refuses, makes the constraint failed(): it then allows
// nothing (the sampler picks token 0), and the owner (scheduler::ChoiceOutput) must end the
// sequence with an error naming error_message().
//
// Thread contract: a GrammarConstraint belongs to one sequence and is used by one thread
// at a time (a kernel pool thread while sampling, the engine thread otherwise). The trie
// and compiled grammar are shared immutable. The process-wide counters below are atomic.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "engine/sampling/sampler_stages.h"
#include "engine/tokenizer/tokenizer.h"
#include "grammar/fsm.h"
#include "grammar/matcher.h"
#include "grammar/token_trie.h"

namespace spillway::engine {

// The tokenizer as the grammar sees it: token_bytes(id, false) per id (control tokens ""),
// and every end-of-generation id.
grammar::Vocabulary grammar_vocabulary(const Tokenizer& tokenizer);

// grammar_vocabulary + TokenTrie::build; call once at model load (≈ 200 ms at 150k tokens).
std::shared_ptr<const grammar::TokenTrie> build_token_trie(const Tokenizer& tokenizer);

// Process-wide structured-output counters (read by /metrics). Mask seconds are kept as a
// histogram over kMaskBucketBounds (upper bounds, seconds; the last bucket is +Inf).
struct ConstraintCounters {
  static constexpr double kMaskBucketBounds[] = {1e-5, 2.5e-5, 5e-5, 1e-4, 2.5e-4, 5e-4,
                                                 1e-3, 2.5e-3, 5e-3, 1e-2, 2.5e-2, 0.1};
  static constexpr size_t kMaskBuckets = std::size(kMaskBucketBounds) + 1;
  std::atomic<uint64_t> masks{0};
  std::atomic<uint64_t> mask_nanoseconds{0};
  std::atomic<uint64_t> mask_bucket[kMaskBuckets] = {};
  std::atomic<uint64_t> forced_tokens{0};  // masks that left one token (appended unsampled)
  std::atomic<uint64_t> failures{0};       // caps hit / refused tokens
};
ConstraintCounters& constraint_counters();

class GrammarConstraint final : public TokenConstraint {
 public:
  GrammarConstraint(std::shared_ptr<const grammar::CompiledGrammar> grammar,
                    std::shared_ptr<const grammar::TokenTrie> trie, grammar::MatcherLimits limits = {});

  void fill_allowed(std::span<uint64_t> allowed, int32_t n_vocab) override;
  void accept(int32_t token) override;
  // Computes the mask for the current state (once; accept() invalidates it), and whether
  // it allows exactly one token (counted in forced_tokens).
  void prepare() override;
  int32_t forced_token() override;

  bool failed() const { return !error_.empty(); }
  const std::string& error_message() const { return error_; }
  // The grammar accepted an end-of-generation id: the output is complete.
  bool terminated() const { return matcher_.is_terminated(); }
  const grammar::Matcher& matcher() const { return matcher_; }

 private:
  std::shared_ptr<const grammar::TokenTrie> trie_;
  grammar::Matcher matcher_;
  std::vector<uint64_t> mask_;  // trie_->mask_words() words
  bool ready_ = false;          // mask_ is the current state's mask
  int32_t allowed_count_ = 0;   // set bits of mask_ (when ready_)
  int32_t only_token_ = -1;     // the allowed token when allowed_count_ == 1
  std::string error_;
};

}  // namespace spillway::engine
