// One forward step over several sequences (the engine half of DESIGN.md's StepBatch).
//
// Tokens of all sequences are packed in one array, grouped by sequence. Each sequence
// brings its KV block table: the forward writes K/V of its new tokens into the blocks at
// positions [start_position, start_position + n_tokens) and a query at position p attends
// keys [0, p] (causal), or, inside a canvas, [0, canvas_end) (bidirectional within the
// canvas, causal to the committed prefix). KV for [0, start_position) must already be in
// those blocks (an earlier step or a prefix-cache hit). Block ids index the engine's
// KvCache (engine/state/kv_cache.h); state_slot indexes the recurrent-state pool of models
// with recurrent mixers.
#pragma once

#include <cstdint>
#include <vector>

namespace spillway::engine {

enum class AttentionMode : uint8_t {
  Causal,  // AR stream: token at position p sees [0, p]
  Canvas,  // diffusion canvas: positions in [canvas_begin, canvas_end) see [0, canvas_end)
  Padding, // shape-bucket padding rows (runtime/step_buckets.h): no K/V written, no keys
           // attended (attention output 0), no logits; block_table empty; they change no
           // other row's result. Attention-only models (a recurrent mixer rejects them).
};

struct BatchSequence {
  int32_t first_token = 0;      // index of its first token in ForwardBatch::tokens
  int32_t n_tokens = 0;
  int64_t start_position = 0;   // sequence position of tokens[first_token]
  std::vector<int32_t> block_table;  // covers positions [0, start_position + n_tokens)
  AttentionMode mode = AttentionMode::Causal;
  int64_t canvas_begin = 0;          // Canvas mode: the canvas's positions; those not among
  int64_t canvas_end = 0;            // this step's tokens are read from the KV blocks
  int32_t state_slot = -1;           // recurrent-state slot; -1 for attention-only models
  // Canvas mode only, optional: the position of each of the n_tokens tokens (ascending,
  // inside [canvas_begin, canvas_end)) when they are not start_position + i: a compacted
  // canvas step forwards only its live rows (engine/diffusion/active_set.h). Empty: contiguous.
  std::vector<int32_t> positions;
};

struct ForwardBatch {
  std::vector<int32_t> tokens;
  std::vector<BatchSequence> sequences;
  // Indices into `tokens` whose next-token logits are wanted, in output order
  // (typically the last token of each sequence that samples this step).
  std::vector<int32_t> logit_rows;

  void clear() { tokens.clear(); sequences.clear(); logit_rows.clear(); }
  // Appends a sequence's tokens; returns its index in `sequences`.
  int add_sequence(const int32_t* toks, int32_t n, int64_t start_position,
                   std::vector<int32_t> block_table) {
    BatchSequence s;
    s.first_token = static_cast<int32_t>(tokens.size());
    s.n_tokens = n;
    s.start_position = start_position;
    s.block_table = std::move(block_table);
    tokens.insert(tokens.end(), toks, toks + n);
    sequences.push_back(std::move(s));
    return static_cast<int>(sequences.size()) - 1;
  }
};

}  // namespace spillway::engine
