// Matcher: the per-request parser state of one constrained sequence.
//
// State: a set of parse stacks over the CompiledGrammar (persistent frames in an arena,
// so a set is a handful of ids and rollback is a truncation). compute_mask() answers
// which tokens may come next by walking the TokenTrie from the current set; accept_token()
// advances; rollback(n) undoes the last n accepted tokens.
//
// Thread: one matcher is used by one thread at a time. Ownership: it shares the compiled
// grammar and the trie (read-only). compute_mask() does not allocate once the scratch
// buffers have grown to the grammar's working size (first few calls).
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "common/result.h"
#include "grammar/fsm.h"
#include "grammar/token_trie.h"

namespace spillway::grammar {

struct MatcherLimits {
  uint32_t max_stacks = 1024;           // parse stacks alive at once (ambiguity cap)
  uint64_t max_mask_steps = 4'000'000;  // byte steps in one compute_mask (work cap)
  bool use_slices = true;  // false: always walk the full trie (reference for tests)
};

struct MaskStats {
  uint64_t steps = 0;       // byte steps (trie nodes visited with a live state)
  bool string_fast_path = false;  // every stack on a string loop
  bool slice_path = false;        // a precomputed slice mask was used
  bool class_slice_path = false;  // ... and it was a byte-class slice (token_trie.h ClassSlice)
  bool exact_count_path = false;  // ... limited by an exact count (kExactChars / class_live < 16)
};

class Matcher {
 public:
  // trie may be null for a byte-level matcher (accept_bytes only).
  Matcher(std::shared_ptr<const CompiledGrammar> grammar, std::shared_ptr<const TokenTrie> trie,
          MatcherLimits limits = {});

  // Fills mask (trie->mask_words() words, bit i = token i allowed). Errors: a cap exceeded.
  Status compute_mask(uint64_t* mask, MaskStats* stats = nullptr);
  // Advances by one token; an error (and no change) if the grammar does not allow it.
  Status accept_token(int32_t token);
  // Advances by raw bytes (no tokenizer); false (and no change) if not allowed.
  bool accept_bytes(std::string_view bytes);
  // Undoes the last n accepted tokens / accept_bytes calls (n <= accepted_count()).
  void rollback(size_t n);

  bool is_accepting() const { return history_.back().accepting; }  // EOS allowed now
  bool is_terminated() const { return history_.back().terminated; }  // EOS was accepted
  bool can_continue() const { return history_.back().set_end > history_.back().set_begin; }
  size_t accepted_count() const { return history_.size() - 1; }
  const CompiledGrammar& grammar() const { return *grammar_; }

 private:
  struct Frame { uint32_t state, parent; };
  struct Checkpoint {
    uint32_t set_begin, set_end;  // into sets_
    uint32_t frames;              // frames_.size() after this step
    bool accepting, terminated;
  };
  static constexpr uint32_t kBottom = UINT32_MAX;

  // Appends to dst the closed set reached from src[begin, end) by `byte`; returns whether
  // the root rule can complete there. dst may alias src (indices are used).
  bool step(const std::vector<uint32_t>& src, size_t begin, size_t end, uint8_t byte,
            std::vector<uint32_t>& dst, size_t dst_begin);
  void add(uint32_t state, uint32_t parent, std::vector<uint32_t>& dst, size_t dst_begin, bool& accepting);
  // Trie walk from scratch_[begin, end); sets bits of live tokens.
  void walk(const ByteTrie& trie, uint32_t node, size_t begin, size_t end, uint64_t* mask);
  bool advance(std::string_view bytes, bool& accepting);
  // Every stack of cur is on a kExactChars state.
  bool all_exact(const Checkpoint& cur) const;

  std::shared_ptr<const CompiledGrammar> grammar_;
  std::shared_ptr<const TokenTrie> trie_;
  MatcherLimits limits_;
  std::vector<Frame> frames_;
  std::vector<uint32_t> sets_;
  std::vector<Checkpoint> history_;
  std::vector<uint32_t> scratch_;
  // The trie's slice for each of grammar_->slice_classes() (null: not cached), resolved
  // once here so compute_mask takes no lock.
  std::vector<const ClassSlice*> class_slices_;
  uint64_t steps_ = 0;
  bool overflow_ = false;
};

}  // namespace spillway::grammar
