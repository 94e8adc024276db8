// Single-sequence generation on top of ForwardPass: what `spillway run` and `spillway bench`
// use. (Serving many sequences goes through the scheduler instead.)
//
// Owns a KV cache sized for max_context tokens of one sequence. Not thread-safe: one
// generate() at a time.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "common/result.h"
#include "engine/forward.h"
#include "engine/kv_cache.h"
#include "engine/model.h"
#include "engine/sampling.h"
#include "engine/tokenizer.h"
#include "kernels/thread_pool.h"

namespace spillway::engine {

struct GenerateOptions {
  int32_t max_tokens = 128;
  SamplingParams sampling;
  bool stop_at_end_of_generation = true;
  int32_t prefill_chunk = 512;  // prompt tokens per forward step
  // Called after every forward step, between steps (e.g. ResidencyController::on_step).
  std::function<void()> after_step;
};

struct GenerateResult {
  std::vector<int32_t> tokens;     // generated ids (an end-of-generation id is not included)
  double prompt_seconds = 0.0;     // wall time of the prompt's forward steps
  double generate_seconds = 0.0;   // wall time of the decode steps (after the first token)
  bool stopped_at_end = false;
};

class Generator {
 public:
  // weights: null for the model's file mapping, else outlives the Generator.
  Generator(const Model& model, kernels::ThreadPool& pool, int32_t max_context,
            int32_t block_size = 16, LayerWeightSource* weights = nullptr);

  // on_token is called after each generated token (for streaming output).
  Result<GenerateResult> generate(std::span<const int32_t> prompt, const GenerateOptions& options,
                                  const Tokenizer* tokenizer,
                                  const std::function<void(int32_t)>& on_token = {});

 private:
  const Model& model_;
  int32_t max_context_;
  KvCache kv_;
  ForwardPass forward_;
  std::vector<int32_t> block_table_;
};

}  // namespace spillway::engine
