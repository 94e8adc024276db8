// The reference loop for one canvas on its own: every step forwards the whole canvas
// (prompt + canvas, bidirectional over all of it, as llama-diffusion-cli does) with logits
// only for the rows the step samples, then commits. Used by `spillway run`, tests and the
// runtime's single-canvas path; the scheduler packs canvases with other sequences instead.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "common/result.h"
#include "engine/diffusion/canvas.h"
#include "engine/forward/batch.h"
#include "engine/forward/forward.h"

namespace spillway::engine::diffusion {

// Adds the canvas's forward for the step begin_step() returned `rows` for to `batch`: one
// sequence over the canvas rows forward_range() names (the whole canvas unless block_cache)
// in Canvas mode (keys [0, length)), and its logit rows (in `rows` order). block_table must
// cover `length` positions and, for a partial range, hold this canvas's earlier K/V.
void add_canvas_step(const Canvas& canvas, std::span<const int32_t> rows, std::vector<int32_t> block_table,
                     ForwardBatch& batch);

// Called after each committed step (not after empty-block steps).
using StepObserver = std::function<void(const Canvas&)>;

// Runs `canvas` to the end on `forward`, whose KV cache blocks [0, ceil(length/block_size))
// are free for it (block_table). Errors only from the forward (a streamed layer unreadable).
Status run_canvas(ForwardPass& forward, Canvas& canvas, const std::vector<int32_t>& block_table,
                  const StepObserver& observer = {});

}  // namespace spillway::engine::diffusion
