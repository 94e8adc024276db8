#include "engine/diffusion/params.h"

#include <cmath>

#include <fmt/format.h>

namespace spillway::engine::diffusion {

Status validate(const DiffusionParams& p, int32_t n_prompt, int32_t canvas_length) {
  if (p.steps <= 0) return Error{fmt::format("steps: must be > 0 (got {})", p.steps)};
  if (!(p.temperature >= 0.0f) || !std::isfinite(p.temperature)) {
    return Error{"temperature: must be a finite number >= 0"};
  }
  if (!(p.alg_temp >= 0.0f) || !std::isfinite(p.alg_temp)) {
    return Error{"alg_temp: must be a finite number >= 0"};
  }
  if (p.top_k < 0) return Error{"top_k: must be >= 0"};
  if (!(p.top_p > 0.0f && p.top_p <= 1.0f)) return Error{"top_p: must be in (0, 1]"};
  if (!(p.eps > 0.0f && p.eps < 1.0f)) {
    if (p.schedule == Schedule::Timestep) return Error{"eps: must be in (0, 1)"};
  }
  if (!(p.threshold >= 0.0f && p.threshold <= 1.0f)) return Error{"threshold: must be in [0, 1]"};
  if (!(p.threshold_low >= 0.0f && p.threshold_low <= 1.0f)) return Error{"threshold: the low value must be in [0, 1]"};
  if (p.repeat_guard < 0) return Error{"repeat_guard: must be >= 0"};
  if (p.threshold_switch < 0) return Error{"threshold: the switch step must be >= 0"};
  if (p.turbo() && p.algorithm == Algorithm::Origin) {
    return Error{"algorithm: 'origin' has no confidence for threshold commits"};
  }
  if (n_prompt <= 0) return Error{"prompt: a diffusion canvas needs at least one prompt token"};
  if (canvas_length <= n_prompt) {
    return Error{fmt::format("max_tokens: the canvas ({} positions) must be longer than the prompt ({})",
                             canvas_length, n_prompt)};
  }
  if (p.schedule == Schedule::Block) {
    if (p.block_length <= 0) return Error{"block_length: must be > 0"};
    if (p.blocks_over_canvas && canvas_length % p.block_length != 0) {
      return Error{fmt::format("block_length: {} does not divide the canvas length {} (prompt + generation)",
                               p.block_length, canvas_length)};
    }
    if (!p.blocks_over_canvas && (canvas_length - n_prompt) % p.block_length != 0) {
      return Error{fmt::format("block_length: {} does not divide the generation length {} (max_tokens)",
                               p.block_length, canvas_length - n_prompt)};
    }
    const int32_t blocks = block_count(p, n_prompt, canvas_length);
    if (p.steps % blocks != 0) {
      return Error{fmt::format("steps: {} is not a multiple of the block count {}", p.steps, blocks)};
    }
  }
  return {};
}

int32_t block_count(const DiffusionParams& p, int32_t n_prompt, int32_t canvas_length) {
  if (p.schedule != Schedule::Block) return 1;
  return (p.blocks_over_canvas ? canvas_length : canvas_length - n_prompt) / p.block_length;
}

Result<Algorithm> parse_algorithm(std::string_view name) {
  if (name == "confidence" || name == "low_confidence" || name == "maskgit_plus") return Algorithm::Confidence;
  if (name == "entropy") return Algorithm::Entropy;
  if (name == "margin" || name == "topk_margin") return Algorithm::Margin;
  if (name == "random") return Algorithm::Random;
  if (name == "origin") return Algorithm::Origin;
  return Error{fmt::format("algorithm: unknown '{}' (confidence, entropy, margin, random, origin)", name)};
}

std::string_view algorithm_name(Algorithm a) {
  switch (a) {
    case Algorithm::Origin: return "origin";
    case Algorithm::Entropy: return "entropy";
    case Algorithm::Margin: return "margin";
    case Algorithm::Random: return "random";
    case Algorithm::Confidence: return "confidence";
  }
  return "?";
}

}  // namespace spillway::engine::diffusion
