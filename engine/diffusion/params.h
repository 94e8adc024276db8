// What a diffusion request asks for: the schedule (block or timestep), the commit
// algorithm and the token sampler, as llama.cpp's diffusion_params (examples/diffusion at
// 3f545becc) names them, plus validation with errors that name the field.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "common/result.h"

namespace spillway::engine::diffusion {

// llama.cpp's numbering (--diffusion-algorithm N).
enum class Algorithm : uint8_t {
  Origin = 0,      // each masked position commits with probability count / masks, random order
  Entropy = 1,     // confidence = entropy of the candidate distribution (llama.cpp's sign, see README)
  Margin = 2,      // confidence = p1 - p2
  Random = 3,      // confidence = a uniform float from the canvas's mt19937
  Confidence = 4,  // confidence = p(chosen token) (LLaDA's low_confidence remasking)
};

enum class Schedule : uint8_t {
  Timestep = 0,  // Dream: one block = the whole canvas; count = floor(m * (1 - s/t))
  Block = 1,     // LLaDA: blocks of block_length after the prompt; per-block even split
};

struct DiffusionParams {
  int32_t steps = 128;              // steps over all blocks (block: a multiple of the block count)
  Schedule schedule = Schedule::Block;
  int32_t block_length = 32;        // Block: see blocks_over_canvas
  // Block schedule, how many blocks (they always start right after the prompt):
  // true (llama-diffusion-cli): canvas_length / block_length, the canvas length (prompt
  //   included) a multiple of block_length, so the trailing blocks may be short or empty;
  // false (LLaDA's generate(), the API): generation length / block_length, the generation
  //   length (canvas - prompt) a multiple of block_length.
  bool blocks_over_canvas = true;
  float eps = 1e-3f;                // Timestep: t runs from 1 to eps
  Algorithm algorithm = Algorithm::Confidence;
  float alg_temp = 0.0f;            // > 0: commit positions drawn from softmax(conf / alg_temp)
  // The token sampler for each masked row: top_k (0 = whole vocabulary), then top_p (< 1),
  // then temperature; temperature 0 takes the best candidate (greedy).
  float temperature = 0.0f;
  int32_t top_k = 0;
  float top_p = 1.0f;
  uint32_t seed = 42;               // the canvas's std::mt19937 (random / origin / draws)

  // Turbo: threshold commits (Fast-dLLM's parallel decoding, the seed's two-stage rule).
  // threshold > 0: a step commits every masked row of the block whose token probability
  // (softmax of the raw logits over the whole vocabulary) is >= the threshold, and at least
  // the single most confident row (by that probability, ties to the lower position); the
  // schedule's counts are ignored and a block runs until it has no mask (no forced flush,
  // no step limit). The threshold is `threshold` for the first threshold_switch steps of a
  // block, then threshold_low (when > 0). threshold 0 = the reference sampler, byte for byte.
  float threshold = 0.0f;
  float threshold_low = 0.0f;
  int32_t threshold_switch = 0;
  bool turbo() const { return threshold > 0.0f; }

  // Approximate block cache (Fast-dLLM's DualCache, opt-in; block schedule only): the first
  // step of each block forwards the whole canvas, the block's other steps forward only the
  // block's rows (and the row before it for shift_logits models), attending to the K/V the
  // other positions left in the canvas's KV blocks at the block's first step. false = every
  // step forwards the whole canvas (the reference). With one step per block both are equal.
  bool block_cache = false;

  // Compacted active set (issue #17, opt-in; the seed's technique): the first step of each
  // block (and the first after the canvas's K/V were lost) forwards the whole canvas; every
  // other step forwards only the live rows (engine/diffusion/active_set.h): the block's
  // still-masked positions, the rows their logits come from (shift_logits) and the positions
  // the previous step committed; every other position's K/V stay in the canvas's KV blocks
  // from the last step that forwarded it. Approximate (frozen K/V are stale), like
  // block_cache, but fewer rows. compact_all_live (tests): every step forwards every position
  // through the compacted path, bit-identical to the reference. block_cache is ignored when
  // compact is set.
  bool compact = false;
  bool compact_all_live = false;
  // compact: > 0 also forwards the whole canvas every compact_refresh-th step of a block
  // (refreshing every frozen position's K/V); 0: only at a block's first step.
  int32_t compact_refresh = 0;
  // Set by the API when the request named a cache ("none", "block", "compact"): the server's
  // default (SchedulerConfig::diffusion_compact) then does not apply.
  bool cache_chosen = false;

  // Repeat guard (turbo): > 0 ends the canvas's output where one token has been committed
  // this many times in a row in the committed left-contiguous text (the seed's 16).
  int32_t repeat_guard = 0;

  // EOS tail-drop (turbo, opt-in; Canvas::set_end_tokens names the end ids): once a step
  // commits an end-of-generation token at position e, every still-masked position after e
  // becomes that token (padding: never sampled, never streamed, counted in
  // CanvasStats::eos_tail_dropped) and blocks after e run no step; the canvas ends when no
  // mask is left before its first committed end token. false = the reference.
  bool eos_tail_drop = false;

  // Exact hierarchical top-K (vocab_top_k.h): the candidate and confidence of a row come
  // from per-chunk maxima and a refine inside the best chunks instead of sorting the whole
  // vocabulary. Same tokens and probabilities as the plain path (bit for bit for greedy
  // confidence / random / origin; margin and top_k within float rounding). Rows it cannot
  // serve exactly (entropy, or top_p < 1 / temperature > 0 without top_k) take the plain path.
  bool exact_top_k = false;

  // Repair pass (turbo, opt-in): after the canvas drains, one more forward of the whole
  // canvas re-picks the argmax of every generated position (up to the first end token
  // with eos_tail_drop); CanvasStats::repair_changes counts the positions it changed. No
  // text is final (committed_prefix_end() stays at the prompt) until it ran.
  bool repair = false;
};

// Checks the values alone and against the canvas: canvas_length (prompt included) >
// n_prompt > 0; for the block schedule the blocks_over_canvas divisibility and steps a
// multiple of the block count. Error messages start with the field name
// ("steps: ...", "block_length: ...") so the API can name it.
Status validate(const DiffusionParams& p, int32_t n_prompt, int32_t canvas_length);

// The block schedule's block count (1 for the timestep schedule); p must be valid.
int32_t block_count(const DiffusionParams& p, int32_t n_prompt, int32_t canvas_length);

// "confidence", "entropy", "margin", "random", "origin" and the peers' aliases
// ("low_confidence" = confidence, "maskgit_plus" = confidence, "topk_margin" = margin).
Result<Algorithm> parse_algorithm(std::string_view name);
std::string_view algorithm_name(Algorithm a);

}  // namespace spillway::engine::diffusion
