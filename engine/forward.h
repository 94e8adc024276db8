// The forward pass of a decoder-only transformer over a multi-sequence batch.
//
// execute(batch): embed every token, run each layer (RMSNorm -> Q/K/V -> rope -> write
// K/V into the paged cache -> attention per sequence -> output projection -> residual ->
// RMSNorm -> SwiGLU MLP -> residual), then final norm and logits only for
// batch.logit_rows. Every row is computed independently of the other rows in the batch,
// so a sequence's results do not depend on what it is batched with.
//
// Weights come from a LayerWeightSource: by default the model's file mapping; under a
// memory budget a WeightResidency that streams some layers from disk. Each layer is
// acquired before it runs and released after, so a streamed layer is read once per step
// whatever the number of tokens in it.
//
// Thread contract: one thread calls execute() at a time (the engine thread); kernels
// fan out on the ThreadPool. Workspaces are allocated at construction for
// max_batch_tokens and max_context and only grow (never inside a step of a size seen before).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "engine/batch.h"
#include "common/result.h"
#include "engine/kv_cache.h"
#include "engine/layer_weight_source.h"
#include "engine/model.h"
#include "kernels/thread_pool.h"

namespace spillway::engine {

// Wall time per part of the forward, summed over the steps run while it is attached
// (ForwardPass::set_profile). For benchmarks: a few clock reads per layer.
struct ForwardProfile {
  enum Part { Embed, Norms, Qkv, RopeKv, Attention, Wo, GateUp, SiluMul, Down, Residual, Logits, Weights, kParts };
  double seconds[kParts] = {};
  static const char* name(int part);
  double total() const;
};

class ForwardPass {
 public:
  // weights: null for the model's own mapping; else must outlive the ForwardPass.
  ForwardPass(const Model& model, KvCache& kv, kernels::ThreadPool& pool,
              int32_t max_batch_tokens, int32_t max_context,
              LayerWeightSource* weights = nullptr);

  // Returns logits [batch.logit_rows.size(), n_vocab], valid until the next call. An Error
  // only when a streamed layer could not be read (the KV of this step's tokens is then
  // incomplete: the caller must not reuse it).
  Result<std::span<const float>> execute(const ForwardBatch& batch);

  const Model& model() const { return model_; }
  // Accumulates wall time per part into *profile (null: stop). Engine thread only.
  void set_profile(ForwardProfile* profile) { profile_ = profile; }

 private:
  struct AlignedBuffer {
    std::vector<float> storage;
    float* data = nullptr;
    void resize(size_t floats);
  };

  void ensure_capacity(int32_t n_tokens, int32_t n_logit_rows, int64_t max_ctx);
  size_t attention_scratch_stride() const;  // floats per thread
  void run_layer(int32_t layer_index, const LayerWeights& w, const ForwardBatch& batch,
                 int32_t n_tokens);
  void attention(int32_t layer_index, const ForwardBatch& batch, int32_t n_tokens);
  void matmul(const kernels::WeightMatrix& w, const float* x, int64_t m, float* y);

  // Runs fn, adding its wall time to the profile's part when profiling.
  template <class Fn>
  void timed(ForwardProfile::Part part, Fn&& fn);

  const Model& model_;
  const ModelConfig& cfg_;
  ForwardProfile* profile_ = nullptr;
  MappedWeights mapped_weights_;
  LayerWeightSource* weights_;
  KvCache& kv_;
  kernels::ThreadPool& pool_;

  int32_t token_capacity_ = 0;
  int32_t logit_capacity_ = 0;
  int64_t context_capacity_ = 0;
  // Per token of the current batch: its sequence and position.
  std::vector<int32_t> token_sequence_;
  std::vector<int64_t> token_position_;
  // Attention work of the current batch: up to kernels::kAttentionMaxTokens consecutive
  // tokens of one sequence and one kv head each (same for every layer).
  struct AttentionTask {
    int32_t first_token;
    int32_t n_tokens;
    int32_t kv_head;
  };
  std::vector<AttentionTask> attention_tasks_;
  int64_t attention_work_ = 0;  // multiply-adds of the batch's attention, per layer

  AlignedBuffer x_, h_, q_, k_, v_, attn_, gate_, up_;  // [tokens, dim]
  AlignedBuffer final_rows_, logits_;                   // [logit rows, dim|vocab]
  AlignedBuffer attention_scratch_;                     // [threads, context]
  std::vector<uint8_t> matmul_scratch_storage_;
  void* matmul_scratch_ = nullptr;
  size_t matmul_scratch_bytes_ = 0;
};

}  // namespace spillway::engine
