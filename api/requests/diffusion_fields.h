// The diffusion fields of /v1/completions and /v1/chat/completions (diffusion models
// only): an optional `diffusion` object {steps, block_length, algorithm, alg_temp, eps,
// sampler ("reference" | "turbo"), threshold (a number, or [hi, lo, switch_step]), cache,
// repeat_guard, and the turbo switches eos_tail_drop, repair, exact_top_k (booleans)}
// plus the top-level aliases other servers accept: `steps`, `block_length` (NeMo's LLaDA
// server, Fast-dLLM) and `remasking` ("low_confidence" | "random"). The object wins over
// an alias. Unknown members of `diffusion` and invalid values are 400s naming the field
// ("diffusion.steps"). Whether the model is a diffusion model is the server's check.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "api/requests/json_fields.h"

namespace spillway::api {

struct DiffusionFields {
  // The first field that asked for diffusion ("diffusion", "steps", ...); empty when none
  // did. An autoregressive model refuses the request naming it.
  std::string given;
  std::optional<int32_t> steps;         // >= 1
  std::optional<int32_t> block_length;  // >= 1: block schedule; absent: timestep schedule
  std::optional<std::string> algorithm; // confidence | low_confidence | maskgit_plus | entropy |
                                        // margin | topk_margin | random | origin
  std::optional<double> alg_temp;       // >= 0
  std::optional<double> eps;            // (0, 1): timestep schedule
  std::optional<std::string> sampler;   // "reference" | "turbo"
  std::optional<double> threshold;      // (0, 1]: turbo threshold (the first steps of a block)
  std::optional<double> threshold_low;  // (0, 1]: after threshold_switch steps
  std::optional<int32_t> threshold_switch;
  std::optional<std::string> cache;     // "none" | "block" (approximate block cache; needs block_length) | "compact" (compacted active set)
  std::optional<int32_t> compact_refresh;  // >= 0, with cache "compact": a full forward every N steps (0: per block)
  std::optional<int32_t> repeat_guard;  // true = 16, false = 0, or a run length >= 2
  std::optional<bool> eos_tail_drop;    // stop denoising after a committed end token
  std::optional<bool> repair;           // one full forward after the canvas drains, re-argmax
  std::optional<bool> exact_top_k;      // hierarchical top-K over the vocabulary
};

void read_diffusion_fields(FieldReader& body, DiffusionFields& out);

}  // namespace spillway::api
