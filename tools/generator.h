// Single-sequence generation on top of engine::ForwardPass: what `spillway run` and `spillway bench`
// use. (Serving many sequences goes through the scheduler instead.)
//
// Owns a KV cache sized for max_context tokens of one sequence (and, for hybrid models, one
// recurrent-state slot). Not thread-safe: one
// generate() at a time.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "common/result.h"
#include "engine/forward/forward.h"
#include "engine/forward/mobile_params.h"
#include "engine/state/kv_cache.h"
#include "engine/state/recurrent_state.h"
#include "engine/model/model.h"
#include "engine/sampling/sampling.h"
#include "engine/tokenizer/tokenizer.h"
#include "kernels/thread_pool.h"

namespace spillway::tools {

struct GenerateOptions {
  int32_t max_tokens = 128;
  engine::SamplingParams sampling;
  bool stop_at_end_of_generation = true;
  int32_t prefill_chunk = 512;  // prompt tokens per forward step
  // Called after every forward step, between steps (e.g. ResidencyController::on_step).
  std::function<void()> after_step;
  // MoE models: MoBiLE big-little decode steps (tools/mobile_decode.h mobile_decode_step).
  engine::MobileSettings mobile;
};

struct GenerateResult {
  std::vector<int32_t> tokens;     // generated ids (an end-of-generation id is not included)
  double prompt_seconds = 0.0;     // wall time of the prompt's forward steps
  double generate_seconds = 0.0;   // wall time of the decode steps (after the first token)
  bool stopped_at_end = false;
  int64_t mobile_little_tokens = 0;    // MoBiLE: decode steps accepted from the little pass
  int64_t mobile_fallback_tokens = 0;  // and recomputed with the full k
};

class Generator {
 public:
  // weights: null for the model's file mapping, else outlives the Generator.
  Generator(const engine::Model& model, kernels::ThreadPool& pool, int32_t max_context,
            int32_t block_size = 16, engine::LayerWeightSource* weights = nullptr);

  // on_token is called after each generated token (for streaming output).
  Result<GenerateResult> generate(std::span<const int32_t> prompt, const GenerateOptions& options,
                                  const engine::Tokenizer* tokenizer,
                                  const std::function<void(int32_t)>& on_token = {});

 private:
  const engine::Model& model_;
  int32_t max_context_;
  engine::KvCache kv_;
  engine::RecurrentState state_;  // one slot (empty for models without recurrent layers)
  engine::ForwardPass forward_;
  std::vector<int32_t> block_table_;
};

}  // namespace spillway::tools
