#include "engine/diffusion/schedule.h"

#include <algorithm>

namespace spillway::engine::diffusion {

std::vector<int32_t> block_commit_counts(int32_t masks, int32_t steps) {
  std::vector<int32_t> counts(steps);
  for (int32_t i = 0; i < steps; ++i) counts[i] = masks / steps + (i < masks % steps ? 1 : 0);
  return counts;
}

int32_t timestep_commit_count(int32_t step, int32_t steps, int32_t remaining, float eps) {
  // Kept in float32 operation by operation, as llama.cpp computes it.
  const float t = 1.0f - static_cast<float>(step) / static_cast<float>(steps) * (1.0f - eps);
  const float s = 1.0f - static_cast<float>(step + 1) / static_cast<float>(steps) * (1.0f - eps);
  const float p = step < steps - 1 ? 1.0f - s / t : 1.0f;
  return static_cast<int32_t>(static_cast<float>(remaining) * p);
}

BlockRange block_range(int32_t b, int32_t n_prompt, int32_t block_length, int32_t canvas_length) {
  const int32_t begin = n_prompt + b * block_length;
  return {begin, std::min(begin + block_length, canvas_length)};
}

}  // namespace spillway::engine::diffusion
