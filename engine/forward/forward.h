// The forward pass of a decoder-only model over a multi-sequence batch: the orchestrator.
//
// execute(batch): embed every token; for each layer, acquire its weights, visit its mixer
// (attention_mixer.h, ...) and add the result to the residual stream, visit its FFN
// (dense_ffn.h, ...) and add that; then the final norm and logits only for
// batch.logit_rows. Every row is computed independently of the other rows in the batch,
// so a sequence's results do not depend on what it is batched with.
//
// Adding a mixer or FFN kind: a file here with its workspace and run() (the contract is in
// step_context.h), an alternative in model/block_weights.h, and one branch in run_layer's
// visit (engine/README.md, "Adding an architecture").
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

#include "common/result.h"
#include "engine/forward/attention_mixer.h"
#include "engine/forward/batch.h"
#include "engine/forward/delta_net_mixer.h"
#include "engine/forward/dense_ffn.h"
#include "engine/forward/moe_ffn.h"
#include "engine/forward/profile.h"
#include "engine/model/model.h"
#include "engine/residency/layer_weight_source.h"
#include "engine/state/kv_cache.h"
#include "engine/state/recurrent_state.h"
#include "kernels/thread_pool.h"

namespace spillway::engine {

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
  // The recurrent-state pool BatchSequence::state_slot indexes (models with gated delta net
  // layers need one; execute returns an Error without it). Must outlive its use.
  void set_recurrent_state(RecurrentState* state) { delta_net_.set_state(state); }
  // The MoE FFN (routing of the last step, experts-used override for MoBiLE's little pass).
  MoeFfn& moe_ffn() { return moe_ffn_; }
  // Accumulates wall time per part into *profile (null: stop). Engine thread only.
  void set_profile(ForwardProfile* profile) { profile_ = profile; }

 private:
  void ensure_capacity(int32_t n_tokens, int32_t n_logit_rows, int64_t max_keys);
  // An Error only when a streamed matrix or a MoE layer's experts could not be read.
  Status run_layer(const StepContext& ctx, int32_t layer, const BlockWeights& w);

  const Model& model_;
  const ModelConfig& cfg_;
  ForwardProfile* profile_ = nullptr;
  MappedWeights mapped_weights_;
  LayerWeightSource* weights_;
  kernels::ThreadPool& pool_;
  AttentionMixer attention_;
  DeltaNetMixer delta_net_;
  DenseFfn dense_ffn_;
  MoeFfn moe_ffn_;

  int32_t token_capacity_ = 0;
  int32_t logit_capacity_ = 0;
  // Per token of the current batch: its sequence, position and attention key count.
  std::vector<int32_t> token_sequence_;
  std::vector<int64_t> token_position_;
  std::vector<int64_t> token_key_count_;

  AlignedBuffer x_, h_;                 // [tokens, n_embd]: residual stream, a block's output
  AlignedBuffer final_rows_, logits_;   // [logit rows, n_embd | n_vocab]
  std::vector<uint8_t> embd_row_scratch_;  // one token-embedding row read from disk
  std::vector<uint8_t> matmul_scratch_storage_;
  void* matmul_scratch_ = nullptr;
  size_t matmul_scratch_bytes_ = 0;
};

}  // namespace spillway::engine
