// The mixture-of-experts FFN (qwen3moe, qwen35moe, qwen3next, llada-moe), as llama.cpp's
// build_moe_ffn computes it:
//
//   h   = RMSNorm(x; norm)
//   p   = softmax(router · h)                 over all n_expert experts, f32
//   E   = the n_expert_used largest p (ties: the lower id first), in descending order
//   w_e = p_e / max(sum_{E} p, 6.1035e-5)     when spec.moe_renormalize, else p_e;
//         then * spec.expert_weights_scale
//   out = sum_{e in E, in that order} w_e * down_e(silu(gate_e h) * up_e h)
//         + sigmoid(dot(shared_gate_inp, h)) * down_s(silu(gate_s h) * up_s h)   (shared expert)
//
// Batched by expert: every token of the step is routed first, the (token, slot) pairs are
// grouped by expert, and each expert used by the step runs once as a matmul over the rows
// routed to it (the quantized kernels give the same bits whatever the row count). Each
// expert output row lands in its own (token, slot) buffer and the weighted sum over a
// token's slots runs in slot order, so a token's output never depends on what it is
// batched with.
//
// Experts come from LayerWeightSource::acquire_experts(layer, ids) (ids: the experts the
// step uses, ascending): the model's mapping, a streamed layer, or an expert cache.
//
// Thread contract: engine thread (inside ForwardPass::execute); kernels fan out on the pool.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "common/result.h"
#include "engine/forward/step_context.h"
#include "engine/model/block_weights.h"
#include "engine/model/model_config.h"
#include "engine/residency/layer_weight_source.h"

namespace spillway::engine {

// The llama.cpp clamp of the renormalisation denominator.
inline constexpr float kMoeRenormMin = 6.103515625e-5f;

// Routes one token: probs = softmax(logits[0..n_expert)) (written to probs, n_expert floats),
// ids[0..k) = the k most probable experts in descending order (ties: lower id first),
// weights[0..k) as the header's w_e. k = n_used.
void moe_route(const float* logits, int32_t n_expert, int32_t n_used, bool renormalize,
               float scale, float* probs, int32_t* ids, float* weights);

class MoeFfn {
 public:
  explicit MoeFfn(const ModelConfig& config);

  void ensure_capacity(int32_t n_tokens);
  // out = the FFN of RMSNorm(x; norm) for MoE layer `layer` (spec, w). Error: the experts
  // could not be acquired (e.g. a read failed); out is then unspecified.
  Status run(const StepContext& ctx, const LayerSpec& spec, const MoeFfnWeights& w, const float* norm,
             const float* x, float* out, LayerWeightSource& source, int32_t layer);

  // Overrides every MoE layer's n_expert_used for the following runs (0: the spec's
  // value; else clamped to [1, spec.n_expert_used]). MoBiLE's little pass runs with K/2.
  void set_experts_used_override(int32_t k) { used_override_ = k; }
  // Per token of the following runs' batch (indexed like ForwardBatch::tokens): its experts
  // used (0: as above; else clamped to [1, spec.n_expert_used]); empty: none. MoBiLE's
  // little decode rows beside full-k prefill rows in one step. A token's output equals a
  // run where every token uses its count. The span must stay valid while it is set.
  void set_token_experts_used(std::span<const int32_t> k) { token_used_ = k; }

  // While on, every run records per MoE layer the full top-k (token, expert) pairs of the
  // tokens that ran with fewer experts: what a MoBiLE fallback of those tokens will most
  // likely ask the expert source for (exact at the first MoE layer; later layers' inputs
  // differ). Turning it on clears the records.
  void record_full_routing(bool on);
  struct RoutedPair {
    int32_t token;
    int32_t expert;
  };
  // [layer] -> pairs, in token order (each token's full top-k in descending probability).
  const std::vector<std::vector<RoutedPair>>& full_routing() const { return full_routing_; }

  // Called on every run with the layer and the distinct experts its step uses (ascending):
  // what an expert cache is asked for. Routing traces (tools/expert_trace.h). Empty: none.
  std::function<void(int32_t layer, std::span<const int32_t> experts)> on_route;

  // Per (token, slot) of the last run: the expert ids chosen ([n_tokens, k] row-major, k
  // the largest count of the run; -1 past a token's own count), for tests and routing
  // traces. Valid until the next run.
  std::span<const int32_t> last_routing() const { return {sel_ids_.data(), last_routed_}; }
  int32_t last_experts_used() const { return last_k_; }

 private:
  const ModelConfig& cfg_;
  int32_t max_expert_ = 0, max_used_ = 0, max_ff_expert_ = 0, max_ff_shared_ = 0;
  int32_t token_capacity_ = 0;
  int32_t used_override_ = 0;
  std::span<const int32_t> token_used_;
  bool record_full_routing_ = false;
  std::vector<std::vector<RoutedPair>> full_routing_;
  std::vector<int32_t> full_ids_tmp_;
  std::vector<float> full_w_tmp_;
  size_t last_routed_ = 0;
  int32_t last_k_ = 0;

  AlignedBuffer h_;            // [tokens, n_embd] normalized input
  AlignedBuffer logits_;       // [tokens, max_expert] router logits
  AlignedBuffer probs_;        // [max_expert] one token's softmax
  std::vector<int32_t> sel_ids_;  // [tokens, k]
  std::vector<float> sel_w_;      // [tokens, k]
  // Grouping: pairs (token, slot) sorted by expert; per expert its first pair.
  std::vector<int32_t> pair_token_, pair_slot_, expert_begin_, cursor_, used_ids_;
  std::vector<uint8_t> ready_;  // per expert of the current wave: already in memory
  AlignedBuffer xe_, ge_, ue_, ye_;  // one expert's rows: [tokens, n_embd | ff | ff | n_embd]
  AlignedBuffer slot_out_;           // [tokens * k, n_embd] each (token, slot)'s expert output
  AlignedBuffer sg_, su_, sh_out_;   // shared expert [tokens, ff_shared | ff_shared | n_embd]
  AlignedBuffer sh_gate_;            // [tokens] dot(shared_gate_inp, h)
};

}  // namespace spillway::engine
