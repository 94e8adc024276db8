// MoBiLE's big-little decoding (issue #16; research/hybrid-moe.md §5) in a single-sequence
// greedy decoder, to measure its quality offline: each decode step runs the token with the
// router's top little_k experts (renormalised over them); when the top softmax probability
// of the resulting logits is <= gamma, the step is discarded and the position recomputed
// with the full top-k (its KV overwritten). Prefill always uses the full k. gamma = 0 is a
// little_k run and gamma = 1 a full-k run, bit for bit (tests/engine/moe/test_mobile_decode.cpp).
//
// Recomputing a position overwrites its KV; hybrid MoE models (qwen35moe, qwen3next) also
// roll their recurrent state back one step (engine::RecurrentState::rollback) first. Not the server path: no sampler, no streaming.
#pragma once

#include <cstdint>
#include <vector>

#include "common/result.h"
#include "engine/forward/forward.h"
#include "engine/model/model.h"
#include "engine/state/recurrent_state.h"
#include "kernels/thread_pool.h"

namespace spillway::tools {

struct MobileOptions {
  int32_t little_experts = 0;  // 0: half the model's top-k (at least 1)
  double gamma = 0.7;          // fall back when max softmax(logits) <= gamma
  int32_t max_new_tokens = 16;
  int32_t eos_id = -1;         // stops generation (not included in tokens)
};

struct MobileResult {
  std::vector<int32_t> tokens;       // generated (greedy)
  int32_t little_tokens = 0;         // decode steps accepted from the little pass
  int32_t fallback_tokens = 0;       // decode steps recomputed with the full k
  std::vector<std::vector<float>> logits;  // per generated token, the logits it came from
};

// One MoBiLE decode step of a single-sequence batch with one logit row (`spillway run` and
// `bench`): with little > 0 the batch runs with `little` experts and, when the top softmax
// probability of its logits is <= gamma, again with the full k after rolling the
// sequence's recurrent-state slot back (hybrids). little <= 0: a plain forward. Counts
// into *little_tokens / *fallback_tokens. The logits are valid until the next forward.
Result<std::span<const float>> mobile_decode_step(engine::ForwardPass& forward, engine::RecurrentState& state,
                                                  const engine::ForwardBatch& batch, int32_t little, double gamma,
                                                  int64_t* little_tokens, int64_t* fallback_tokens);

Result<MobileResult> mobile_generate(const engine::Model& model, kernels::ThreadPool& pool,
                                     const std::vector<int32_t>& prompt, const MobileOptions& options);

}  // namespace spillway::tools
