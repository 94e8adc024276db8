#include "grammar/matcher.h"

#include <cassert>
#include <algorithm>
#include <cstring>

namespace spillway::grammar {

Matcher::Matcher(std::shared_ptr<const CompiledGrammar> grammar,
                 std::shared_ptr<const TokenTrie> trie, MatcherLimits limits)
    : grammar_(std::move(grammar)), trie_(std::move(trie)), limits_(limits) {
  frames_.reserve(4096);
  scratch_.reserve(1 << 16);
  if (trie_ && limits_.use_slices)
    for (const ByteSet& cls : grammar_->slice_classes()) class_slices_.push_back(trie_->class_slice(cls));
  bool accepting = false;
  add(grammar_->rule_start(grammar_->root()), kBottom, sets_, 0, accepting);
  history_.push_back(Checkpoint{0, static_cast<uint32_t>(sets_.size()),
                                static_cast<uint32_t>(frames_.size()), accepting, false});
}

void Matcher::add(uint32_t state, uint32_t parent, std::vector<uint32_t>& dst, size_t dst_begin,
                  bool& accepting) {
  const CompiledGrammar& g = *grammar_;
  const State& st = g.state(state);
  if (st.range_end > st.range_begin) {
    for (size_t i = dst_begin; i < dst.size(); ++i) {
      const Frame& f = frames_[dst[i]];
      if (f.state == state && f.parent == parent) return;
    }
    if (dst.size() - dst_begin >= limits_.max_stacks) { overflow_ = true; return; }
    frames_.push_back(Frame{state, parent});
    dst.push_back(static_cast<uint32_t>(frames_.size() - 1));
  }
  for (const CallEdge* c = g.calls_begin(st), *e = g.calls_end(st); c != e; ++c) {
    frames_.push_back(Frame{c->ret, parent});
    add(g.rule_start(c->rule), static_cast<uint32_t>(frames_.size() - 1), dst, dst_begin, accepting);
  }
  if (st.flags & kFinal) {
    if (parent == kBottom) {
      accepting = true;
    } else {
      const Frame pf = frames_[parent];
      add(pf.state, pf.parent, dst, dst_begin, accepting);
    }
  }
}

bool Matcher::step(const std::vector<uint32_t>& src, size_t begin, size_t end, uint8_t byte,
                   std::vector<uint32_t>& dst, size_t dst_begin) {
  bool accepting = false;
  const CompiledGrammar& g = *grammar_;
  for (size_t i = begin; i < end; ++i) {
    const Frame f = frames_[src[i]];
    uint32_t t = g.next(f.state, byte);
    if (t != UINT32_MAX) add(t, f.parent, dst, dst_begin, accepting);
  }
  return accepting;
}

bool Matcher::advance(std::string_view bytes, bool& accepting) {
  const Checkpoint& cur = history_.back();
  const size_t frames_before = frames_.size();
  scratch_.clear();
  scratch_.insert(scratch_.end(), sets_.begin() + cur.set_begin, sets_.begin() + cur.set_end);
  size_t begin = 0, end = scratch_.size();
  accepting = cur.accepting;
  overflow_ = false;
  for (unsigned char b : bytes) {
    size_t nb = scratch_.size();
    accepting = step(scratch_, begin, end, b, scratch_, nb);
    begin = nb;
    end = scratch_.size();
    if ((begin == end && !accepting) || overflow_) break;
  }
  if (overflow_ || (begin == end && !accepting)) {
    frames_.resize(frames_before);
    return false;
  }
  if (bytes.empty()) return true;
  uint32_t sb = static_cast<uint32_t>(sets_.size());
  sets_.insert(sets_.end(), scratch_.begin() + static_cast<std::ptrdiff_t>(begin),
               scratch_.begin() + static_cast<std::ptrdiff_t>(end));
  history_.push_back(Checkpoint{sb, static_cast<uint32_t>(sets_.size()),
                                static_cast<uint32_t>(frames_.size()), accepting, false});
  return true;
}

bool Matcher::accept_bytes(std::string_view bytes) {
  if (is_terminated()) return false;
  bool accepting = false;
  if (bytes.empty()) {
    history_.push_back(history_.back());
    return true;
  }
  return advance(bytes, accepting);
}

Status Matcher::accept_token(int32_t token) {
  if (!trie_ || token < 0 || static_cast<size_t>(token) >= trie_->vocab_size())
    return Error{"token " + std::to_string(token) + " is outside the vocabulary"};
  if (is_terminated()) return Error{"the grammar has already ended"};
  if (trie_->is_eos(token)) {
    if (!is_accepting()) return Error{"end of generation is not allowed before the grammar is complete"};
    Checkpoint c = history_.back();
    c.terminated = true;
    c.set_begin = c.set_end;
    history_.push_back(c);
    return {};
  }
  const std::string& bytes = trie_->token_bytes(token);
  bool accepting = false;
  if (bytes.empty() || !advance(bytes, accepting))
    return Error{"token " + std::to_string(token) + " is not allowed by the grammar here"};
  return {};
}

void Matcher::rollback(size_t n) {
  assert(n <= accepted_count());
  history_.resize(history_.size() - n);
  const Checkpoint& c = history_.back();
  sets_.resize(c.set_end);
  frames_.resize(c.frames);
}

void Matcher::walk(const ByteTrie& trie, uint32_t node, size_t begin, size_t end, uint64_t* mask) {
  const TrieNode& n = trie.node(node);
  const uint32_t last = n.first_child + n.n_children;
  for (uint32_t ci = n.first_child; ci < last; ++ci) {
    const TrieNode& c = trie.node(ci);
    const size_t frames_before = frames_.size();
    const size_t nb = scratch_.size();
    const bool accepting = step(scratch_, begin, end, c.byte, scratch_, nb);
    const size_t ne = scratch_.size();
    ++steps_;
    if (ne > nb || accepting) {
      for (uint32_t k = c.token_begin; k < c.token_end; ++k) {
        uint32_t id = static_cast<uint32_t>(trie.tokens()[k]);
        mask[id >> 6] |= uint64_t{1} << (id & 63);
      }
      if (ne > nb && c.n_children) walk(trie, ci, nb, ne, mask);
    }
    scratch_.resize(nb);
    frames_.resize(frames_before);
    if (steps_ > limits_.max_mask_steps || overflow_) return;
  }
}

bool Matcher::all_exact(const Checkpoint& cur) const {
  if (cur.set_end == cur.set_begin) return false;
  for (uint32_t i = cur.set_begin; i < cur.set_end; ++i)
    if (!(grammar_->state(frames_[sets_[i]].state).flags & kExactChars)) return false;
  return true;
}

Status Matcher::compute_mask(uint64_t* mask, MaskStats* stats) {
  assert(trie_);
  const size_t words = trie_->mask_words();
  const Checkpoint& cur = history_.back();
  steps_ = 0;
  overflow_ = false;
  bool fast = limits_.use_slices && cur.set_end > cur.set_begin;
  for (uint32_t i = cur.set_begin; i < cur.set_end && fast; ++i)
    if (!(grammar_->state(frames_[sets_[i]].state).flags & kStringLoop)) fast = false;
  // Which precomputed slice can be OR'd in, and which trie then covers the other tokens:
  //  - every stack on a string loop: the slice, plus the suffix trie (exact: each other
  //    token behaves like its suffix);
  //  - some stack can read any safe characters: the slice, plus the trie of non-slice tokens;
  //  - some stack can read >= 16 safe characters: the short slice, plus the rest;
  //  - otherwise the full trie.
  uint8_t live = 0;
  for (uint32_t i = cur.set_begin; i < cur.set_end; ++i)
    live = std::max(live, grammar_->state(frames_[sets_[i]].state).live_chars);
  const ByteTrie* trie = &trie_->full();
  const std::vector<uint64_t>* slice = nullptr;
  bool class_path = false, exact_path = false;
  if (!limits_.use_slices) {
  } else if (fast) { trie = &trie_->string_suffixes(); slice = &trie_->string_slice_mask(); }
  else if (live == kLiveUnbounded) { trie = &trie_->outside_slice(); slice = &trie_->string_slice_mask(); }
  else if (live >= TokenTrie::kShortSliceChars) { trie = &trie_->outside_short_slice(); slice = &trie_->short_slice_mask(); }
  else if (all_exact(cur)) {
    // Every stack reads at most its live_chars more safe characters (and any that many):
    // slice tokens of up to `live` (the largest) characters are allowed, longer ones are
    // not; walk the others.
    trie = &trie_->outside_slice();
    slice = &trie_->slice_upto_mask(live);
    exact_path = true;
  } else {
    // A byte-class slice of some stack (the largest): its tokens are allowed by that stack
    // alone; every other token is walked with the whole set.
    // Or, when every stack has the same class with an exact count r < kClassSliceBytes
    // (max over stacks), its tokens of at most r bytes (longer ones die on every stack).
    const ClassSlice* best = nullptr;
    uint16_t common = kNoSliceClass;
    uint8_t exact_r = 0;
    for (uint32_t i = cur.set_begin; i < cur.set_end; ++i) {
      const State& st = grammar_->state(frames_[sets_[i]].state);
      const uint16_t c = st.slice_class;
      if (i == cur.set_begin) common = c;
      else if (c != common) common = kNoSliceClass;
      if (c == kNoSliceClass || !class_slices_[c]) continue;
      exact_r = std::max(exact_r, st.class_live);
      if (st.class_live < kClassSliceBytes) continue;
      if (!best || class_slices_[c]->count > best->count) best = class_slices_[c];
    }
    if (best) { trie = &best->outside; slice = &best->mask; class_path = true; }
    else if (common != kNoSliceClass && class_slices_[common]) {
      trie = &class_slices_[common]->outside;
      slice = &class_slices_[common]->upto[exact_r];
      class_path = exact_path = true;
    }
  }
  if (slice) std::memcpy(mask, slice->data(), words * sizeof(uint64_t));
  else std::memset(mask, 0, words * sizeof(uint64_t));
  if (cur.set_end > cur.set_begin) {
    const size_t frames_before = frames_.size();
    scratch_.clear();
    scratch_.insert(scratch_.end(), sets_.begin() + cur.set_begin, sets_.begin() + cur.set_end);
    walk(*trie, 0, 0, scratch_.size(), mask);
    frames_.resize(frames_before);
  }
  if (cur.accepting && !cur.terminated)
    for (int32_t id : trie_->eos_ids()) mask[id >> 6] |= uint64_t{1} << (id & 63);
  if (stats) { stats->steps = steps_; stats->string_fast_path = fast; stats->slice_path = slice != nullptr; stats->class_slice_path = class_path; stats->exact_count_path = exact_path; }
  if (overflow_)
    return Error{"grammar too ambiguous: more than " + std::to_string(limits_.max_stacks) + " parse stacks"};
  if (steps_ > limits_.max_mask_steps)
    return Error{"token mask exceeded its cap of " + std::to_string(limits_.max_mask_steps) + " steps"};
  return {};
}

}  // namespace spillway::grammar
