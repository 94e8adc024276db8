// One diffusion canvas and its reference sampler state: prompt + masks, the block /
// timestep schedule, the commit rule (top count by confidence, ties to the lower position,
// never remask), and llama.cpp's RNG stream (diffusion_generate at 3f545becc).
//
// Step protocol (the caller owns the forward):
//   while (!canvas.done()) {
//     auto rows = canvas.begin_step();        // masked positions of the current block
//     forward over canvas.tokens() (bidirectional over the whole canvas), logits only for
//       the rows canvas.logit_row(p) of each p in rows, in that order;
//     canvas.commit(logits, n_vocab);         // [rows.size(), n_vocab]
//   }
// begin_step() skips steps whose block has no mask left: llama.cpp still decodes once and
// then ends the block, but that decode's logits are unused, so we count the step
// (steps_run(), empty_steps()) without asking for a forward.
//
// Thread: not thread-safe; one owner (the engine thread) at a time. Units: positions are
// canvas indices (prompt included), tokens are vocabulary ids.
#pragma once

#include <cstdint>
#include <random>
#include <span>
#include <vector>

#include "engine/diffusion/params.h"
#include "engine/diffusion/row_sampler.h"

namespace spillway::engine::diffusion {

struct CanvasStats {
  int32_t steps_run = 0;        // steps executed, empty-block steps included (llama.cpp's count)
  int32_t forwards = 0;         // steps that needed a forward
  int32_t empty_steps = 0;      // steps whose block had no mask left (no forward)
  int64_t rows_evaluated = 0;   // canvas rows forwarded (length per forward for the reference)
  int32_t cached_forwards = 0;  // block_cache / compact: forwards of fewer rows than the canvas
  int32_t repeat_guard_trips = 0;  // 1 when the repeat guard ended the canvas
  int64_t rows_sampled = 0;     // logits rows read (masked rows of the current block)
  int32_t committed = 0;        // positions committed
  int32_t forced_top1 = 0;      // turbo: steps where no row passed the threshold (top-1 committed)
  int32_t eos_tail_dropped = 0; // eos_tail_drop: masked positions filled with the end token unsampled
  int32_t repair_forwards = 0;  // repair: 1 once the repair forward ran (included in forwards)
  int32_t repair_changes = 0;   // repair: generated positions whose token the repair changed
  int32_t blocks_finished = 0;  // blocks that ran >= 1 forward and then ended
  int32_t block_forwards = 0;   // forwards of those blocks (/ blocks_finished: steps per block)
};

class Canvas {
 public:
  // prompt: n_prompt > 0 tokens; length: canvas length including the prompt. params must
  // pass validate(params, prompt.size(), length).
  Canvas(std::span<const int32_t> prompt, int32_t length, int32_t mask_token, bool shift_logits,
         const DiffusionParams& params);

  bool done() const { return done_; }
  // Whether begin_step() returned rows that commit() has not consumed yet, and those rows.
  bool pending() const { return pending_; }
  std::span<const int32_t> pending_rows() const { return masked_; }
  // The masked positions (ascending) whose logits the next commit() needs; advances over
  // empty-block steps first. Empty exactly when done() becomes true.
  std::span<const int32_t> begin_step();
  // The canvas rows [begin, end) the pending step must forward (Canvas mode over
  // [begin, length), keys [0, length)): the whole canvas, or with block_cache the current
  // block's rows after the block's first step. The K/V of the rows outside it must be in the
  // canvas's KV blocks from an earlier step of this canvas (else invalidate_cache()).
  struct Range {
    int32_t begin = 0;
    int32_t end = 0;
  };
  Range forward_range() const;
  // Compacted steps (DiffusionParams::compact): the positions (ascending) the pending step
  // forwards, with K/V of every other position read from the canvas's KV blocks; empty when
  // the step forwards forward_range() (contiguous). engine/diffusion/active_set.h.
  std::span<const int32_t> forward_positions() const;
  // Rows the pending step forwards: forward_positions().size(), else forward_range()'s length.
  int32_t forward_count() const;
  // The end-of-generation ids EOS tail-drop looks for (DiffusionParams::eos_tail_drop);
  // none (the default) = no tail-drop. Call before the first commit().
  void set_end_tokens(std::span<const int32_t> ids);
  // eos_tail_drop: the first position holding a committed end token, -1 while none.
  int32_t eos_position() const { return eos_pos_; }
  // repair: the pending step is the repair forward (rows = every generated position).
  bool repairing() const { return repairing_; }
  // The canvas's K/V are gone (new KV blocks after preemption): the next step forwards all.
  void invalidate_cache() { refresh_ = true; }
  bool needs_refresh() const { return refresh_; }
  // Canvas row whose logits predict position p (shift_logits: p - 1, row 0 for p = 0).
  int32_t logit_row(int32_t p) const { return shift_logits_ ? (p > 0 ? p - 1 : 0) : p; }
  // logits: [begin_step().size(), n_vocab], row i for the i-th position. Commits this step's
  // positions; what it committed is in last_positions() / last_tokens().
  void commit(const float* logits, int32_t n_vocab);

  const std::vector<int32_t>& tokens() const { return tokens_; }
  int32_t n_prompt() const { return n_prompt_; }
  int32_t length() const { return static_cast<int32_t>(tokens_.size()); }
  int32_t mask_token() const { return mask_token_; }
  bool is_masked(int32_t p) const { return tokens_[p] == mask_token_; }
  // Committed positions [n_prompt, committed_prefix_end()) form a contiguous run from the
  // prompt: the text that can be streamed and never changes. With DiffusionParams::repair
  // nothing is final before the repair forward ran: n_prompt until then.
  int32_t committed_prefix_end() const;
  // Repeat guard (DiffusionParams::repeat_guard): the canvas position (exclusive) where the
  // committed left-contiguous text reached repeat_guard equal tokens in a row, -1 until then.
  // The output ends there; the canvas stops (done() after the next begin_step()).
  int32_t repeat_stop() const { return repeat_stop_; }
  const std::vector<int32_t>& last_positions() const { return last_positions_; }  // ascending
  const std::vector<int32_t>& last_tokens() const { return last_tokens_; }
  // llama.cpp's global step index of the step begin_step() last returned.
  int32_t global_step() const { return block_ * steps_per_block_ + step_; }
  const CanvasStats& stats() const { return stats_; }
  const DiffusionParams& params() const { return params_; }

 private:
  void start_block();
  void collect_masked();
  int32_t commit_count() const;
  void threshold_commit();  // turbo (DiffusionParams::threshold)
  int32_t left_committed_end() const;  // committed_prefix_end() without the repair hold
  bool any_mask() const;
  bool is_end(int32_t token) const;
  void end_block();            // block accounting before moving past the current block
  bool finish_or_repair();     // all blocks done: set up the repair step (true) or done_
  void drop_tail();            // eos_tail_drop after a commit
  void repair_commit(const float* logits, int32_t n_vocab);

  DiffusionParams params_;
  std::vector<int32_t> tokens_;
  int32_t n_prompt_ = 0;
  int32_t mask_token_ = 0;
  bool shift_logits_ = false;
  int32_t num_blocks_ = 1;
  int32_t steps_per_block_ = 0;
  int32_t block_ = 0;           // current block
  int32_t step_ = 0;            // step inside the block (of the pending step once begun)
  int32_t block_begin_ = 0, block_end_ = 0;
  std::vector<int32_t> block_counts_;  // block schedule: per-step commit counts of the block
  std::vector<int32_t> masked_;        // the pending step's masked positions
  std::vector<int32_t> live_;          // compact: the pending step's live positions
  bool pending_ = false;               // begin_step() returned rows that commit() has not consumed
  bool refresh_ = true;                // block_cache: the next step forwards the whole canvas
  bool done_ = false;
  std::mt19937 rng_;
  RowSampler sampler_;
  std::vector<RowChoice> choices_;
  std::vector<int32_t> order_;
  std::vector<int32_t> last_positions_, last_tokens_;
  CanvasStats stats_;
  int32_t repeat_stop_ = -1;
  int32_t scanned_ = 0;         // repeat guard: positions of the committed prefix scanned
  int32_t run_token_ = -1, run_length_ = 0;
  std::vector<int32_t> end_tokens_;  // sorted
  int32_t eos_pos_ = -1;
  bool repairing_ = false, repaired_ = false;
  int32_t block_forwards_ = 0;  // forwards of the current block
};

}  // namespace spillway::engine::diffusion
