#include "tools/mobile_decode.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "engine/forward/forward.h"
#include "engine/forward/mobile_params.h"
#include "engine/state/recurrent_state.h"
#include "engine/state/kv_cache.h"

namespace spillway::tools {

using engine::top_probability;

Result<std::span<const float>> mobile_decode_step(engine::ForwardPass& forward, engine::RecurrentState& state,
                                                  const engine::ForwardBatch& batch, int32_t little, double gamma,
                                                  int64_t* little_tokens, int64_t* fallback_tokens) {
  if (little <= 0) return forward.execute(batch);
  forward.moe_ffn().set_experts_used_override(little);
  state.set_keep_undo(true);  // a fallback recomputes the token from the state before it
  auto out = forward.execute(batch);
  state.set_keep_undo(false);
  forward.moe_ffn().set_experts_used_override(0);
  if (!out) return out;
  if (!engine::mobile_falls_back(*out, gamma)) {
    ++*little_tokens;
    return out;
  }
  if (state.n_layers() > 0 && !state.rollback(batch.sequences[0].state_slot)) {
    return Error{"MoBiLE fallback: no recurrent-state step to roll back"};
  }
  ++*fallback_tokens;
  return forward.execute(batch);
}

Result<MobileResult> mobile_generate(const engine::Model& model, kernels::ThreadPool& pool,
                                     const std::vector<int32_t>& prompt, const MobileOptions& o) {
  const engine::ModelConfig& c = model.config();
  int32_t k = 0;
  for (const engine::LayerSpec& s : c.layers) k = std::max(k, s.n_expert_used);
  if (k == 0) return Error{fmt::format("{}: not a MoE model", model.source().path())};
  if (prompt.empty()) return Error{"mobile_generate: empty prompt"};
  const int32_t little = o.little_experts > 0 ? std::min(o.little_experts, k) : std::max(1, k / 2);
  const auto context = static_cast<int32_t>(prompt.size()) + o.max_new_tokens;
  constexpr int32_t kBlock = 16;
  engine::KvCache kv(c.n_layers, c.n_kv_heads, c.head_dim, kBlock, (context + kBlock - 1) / kBlock);
  engine::ForwardPass forward(model, kv, pool, context, context);
  engine::RecurrentState state(c, 1);  // hybrid models (qwen35moe, qwen3next): one slot
  forward.set_recurrent_state(&state);
  std::vector<int32_t> blocks(kv.n_blocks());
  for (int32_t i = 0; i < kv.n_blocks(); ++i) blocks[i] = i;

  MobileResult r;
  auto step = [&](const int32_t* tokens, int32_t n, int64_t pos, int32_t experts) -> Result<std::vector<float>> {
    forward.moe_ffn().set_experts_used_override(experts);
    state.set_keep_undo(experts > 0);  // a little step may fall back: keep the state before it
    engine::ForwardBatch batch;
    batch.add_sequence(tokens, n, pos, blocks);
    batch.sequences[0].state_slot = 0;
    batch.logit_rows.push_back(n - 1);
    auto logits = forward.execute(batch);
    forward.moe_ffn().set_experts_used_override(0);
    if (!logits) return logits.error();
    return std::vector<float>(logits->begin(), logits->end());
  };
  // Prefill with the full k.
  ASSIGN_OR_RETURN(std::vector<float> logits, step(prompt.data(), static_cast<int32_t>(prompt.size()), 0, 0));
  int64_t pos = static_cast<int64_t>(prompt.size());
  for (int32_t n = 0; n < o.max_new_tokens; ++n) {
    const auto next = static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
    if (next == o.eos_id) break;
    r.tokens.push_back(next);
    r.logits.push_back(logits);
    if (n + 1 == o.max_new_tokens) break;
    ASSIGN_OR_RETURN(logits, step(&r.tokens.back(), 1, pos, little));
    if (top_probability(logits) <= o.gamma) {
      // The recurrent state (hybrid models) goes back to before the little step; the KV at
      // pos is overwritten.
      if (state.n_layers() > 0 && !state.rollback(0)) return Error{"mobile_generate: no step to roll back"};
      ASSIGN_OR_RETURN(logits, step(&r.tokens.back(), 1, pos, 0));
      ++r.fallback_tokens;
    } else {
      ++r.little_tokens;
    }
    ++pos;
  }
  return r;
}

}  // namespace spillway::tools
