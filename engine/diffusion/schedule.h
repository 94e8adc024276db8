// How many masked positions a step commits (llama.cpp's diffusion_generate at 3f545becc,
// reproduced by ../shared/testdata/golden-wave2/diffusion_schedule.py).
#pragma once

#include <cstdint>
#include <vector>

namespace spillway::engine::diffusion {

// Block schedule: a block that starts with `masks` masked positions commits
// masks / steps + (i < masks % steps) at its step i, i = 0..steps-1.
std::vector<int32_t> block_commit_counts(int32_t masks, int32_t steps);

// Timestep schedule at step `step` of `steps` with `remaining` masks: all of them on the last
// step, else int(remaining * (1 - s / t)) in float32 with t = 1 - step/steps*(1-eps),
// s = 1 - (step+1)/steps*(1-eps).
int32_t timestep_commit_count(int32_t step, int32_t steps, int32_t remaining, float eps);

// The canvas range [begin, end) of block `b` (block schedule): blocks start after the
// prompt, so the last ones may be short or empty (begin >= end).
struct BlockRange {
  int32_t begin = 0;
  int32_t end = 0;
};
BlockRange block_range(int32_t b, int32_t n_prompt, int32_t block_length, int32_t canvas_length);

}  // namespace spillway::engine::diffusion
