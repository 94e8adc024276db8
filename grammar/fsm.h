// CompiledGrammar: the IR compiled for the matcher. Every rule body becomes a
// deterministic automaton over bytes whose edges are byte ranges or calls of other rules
// (a deterministic recursive transition network). States of all rules share one index
// space. Immutable after compile(); shared read-only between threads and matchers
// (std::shared_ptr<const CompiledGrammar>).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/result.h"
#include "grammar/ir.h"

namespace spillway::grammar {

struct CompileLimits {
  uint32_t max_nfa_states = 400'000;  // Thompson states over all rules
  uint32_t max_dfa_states = 200'000;  // determinized states over all rules
  double max_seconds = 1.0;           // wall-clock cap of one compile
  // Deterministic cap on the compile's work (CompiledGrammar::compile_work units: roughly
  // one per byte, edge or automaton state looked at; 3-8 ns each in a Release build on the
  // loaded dev machine, so 250M is ~1-2 s and the wall clock usually stops such a compile
  // first). Over it, compile() fails with "grammar too complex" whatever the machine's load.
  // The bench schemas need < 6M units, JSON-Schema-Test-Suite schemas < 0.5M, the largest
  // grammar the fuzz corpus compiles (86k states) 190M.
  uint64_t max_work = 250'000'000;
};

struct ByteRange {
  uint8_t lo, hi;   // inclusive
  uint32_t target;  // state
};

struct CallEdge {
  RuleId rule;
  uint32_t ret;  // state to continue in once `rule` completes
};

enum StateFlags : uint8_t {
  kFinal = 1,       // the rule may end here
  kStringLoop = 2,  // every JSON-string-safe UTF-8 character leads back here (see token_trie.h)
  kExactChars = 4,  // live_chars < 16 is exact: no sequence of live_chars + 1 safe characters
                    // can be read from here (the tail of a maxLength string)
};

struct State {
  uint32_t range_begin, range_end;  // into ranges
  uint32_t call_begin, call_end;    // into calls
  uint8_t flags;
  // Every sequence of up to live_chars JSON-string-safe UTF-8 characters can be read from
  // here without the stack dying (255: any number). Lets the matcher OR in the
  // precomputed slice masks (token_trie.h) instead of walking those tokens.
  uint8_t live_chars;
  // Byte-class slice (see token_trie.h, ClassSlice): every byte string of at most
  // kClassSliceBytes bytes, each byte in slice_classes()[slice_class], can be read from here
  // without the stack dying. kNoSliceClass: none. Covers broad non-string classes (a
  // `format: email` local part or hostname label) the JSON-string slice does not.
  uint16_t slice_class;
  // With slice_class: kClassSliceBytes (as above), or r < kClassSliceBytes: every string of
  // at most r class bytes can be read and none of r + 1 (no call or rule end on the way).
  uint8_t class_live;
};
inline constexpr uint8_t kLiveUnbounded = 255;
inline constexpr uint16_t kNoSliceClass = UINT16_MAX;
// Tokens of at most this many bytes make up a byte-class slice; a class is used for a state
// only if it has at least kMinSliceClassBytes bytes (smaller ones admit few tokens).
inline constexpr uint32_t kClassSliceBytes = 16;
inline constexpr size_t kMinSliceClassBytes = 16;

class CompiledGrammar {
 public:
  static Result<std::shared_ptr<const CompiledGrammar>> compile(const Grammar& g,
                                                                 const CompileLimits& limits = {});

  uint32_t rule_start(RuleId r) const { return rule_start_[r]; }
  RuleId root() const { return root_; }
  const State& state(uint32_t s) const { return states_[s]; }
  size_t state_count() const { return states_.size(); }
  const ByteRange* ranges_begin(const State& s) const { return ranges_.data() + s.range_begin; }
  const ByteRange* ranges_end(const State& s) const { return ranges_.data() + s.range_end; }
  const CallEdge* calls_begin(const State& s) const { return calls_.data() + s.call_begin; }
  const CallEdge* calls_end(const State& s) const { return calls_.data() + s.call_end; }
  // The target of `byte` from state s, or UINT32_MAX.
  uint32_t next(uint32_t s, uint8_t byte) const {
    const State& st = states_[s];
    for (const ByteRange* r = ranges_begin(st), *e = ranges_end(st); r != e; ++r) {
      if (byte < r->lo) break;
      if (byte <= r->hi) return r->target;
    }
    return UINT32_MAX;
  }
  const std::string& rule_name(RuleId r) const { return rule_names_[r]; }
  // The byte classes that some state's slice_class refers to.
  const std::vector<ByteSet>& slice_classes() const { return slice_classes_; }
  // The work compile() did (units of CompileLimits::max_work): deterministic for a grammar,
  // so tests can bound it without timing.
  uint64_t compile_work() const { return compile_work_; }

 private:
  std::vector<State> states_;
  std::vector<ByteRange> ranges_;
  std::vector<CallEdge> calls_;
  std::vector<uint32_t> rule_start_;
  std::vector<std::string> rule_names_;
  std::vector<ByteSet> slice_classes_;
  RuleId root_ = 0;
  uint64_t compile_work_ = 0;
  friend class Compiler;
};

}  // namespace spillway::grammar
