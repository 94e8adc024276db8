// The compacted active set of a canvas step (issue #17; DiffusionParams::compact) and the
// packing of a canvas's pending step into a ForwardBatch sequence.
//
// Live rows of a step: the still-masked positions of the current block (their logits are
// sampled), the rows those logits come from (p - 1 with shift_logits), and the positions the
// previous step committed (their token changed, so their K/V must be recomputed). Every other
// position is frozen: its K/V are read from the canvas's KV blocks, as the last step that
// forwarded it wrote them (per layer). With compact_all_live every position is live, and the
// step is bit-identical to the reference full recompute (tests/runtime/test_diffusion_compact.cpp):
// each row is computed independently of which other rows share the forward, and a canvas
// step writes all its rows' K/V before any query reads (AttentionMixer).
//
// Thread: engine thread (no shared state). Units: canvas positions (prompt included).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "engine/forward/batch.h"

namespace spillway::engine::diffusion {

class Canvas;

// out = the live positions (ascending, unique) of a step whose masked positions are
// `masked` and whose previous step committed `last_commits`; every position of the canvas
// when canvas.params().compact_all_live.
void compacted_positions(const Canvas& canvas, std::span<const int32_t> masked,
                         std::span<const int32_t> last_commits, std::vector<int32_t>& out);

// Appends the canvas's pending step to a batch: its tokens to `tokens` and the sequence `bs`
// (first_token = the tokens' size on entry; block_table left as the caller set it):
// AttentionMode::Canvas over [0, length) with the rows forward_positions() names (explicit
// BatchSequence::positions) or the contiguous forward_range().
void fill_canvas_sequence(const Canvas& canvas, BatchSequence& bs, std::vector<int32_t>& tokens);

// Index, among the rows the pending step forwards, of canvas row `row` (which it forwards).
int32_t forwarded_index(const Canvas& canvas, int32_t row);

}  // namespace spillway::engine::diffusion
