#include "tools/mobile_decode.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "engine/forward/forward.h"
#include "engine/state/kv_cache.h"

namespace spillway::tools {

namespace {

// max softmax(logits), in double.
double top_probability(std::span<const float> logits) {
  const float mx = *std::max_element(logits.begin(), logits.end());
  double z = 0;
  for (float l : logits) z += std::exp(double(l) - double(mx));
  return 1.0 / z;
}

}  // namespace

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
  std::vector<int32_t> blocks(kv.n_blocks());
  for (int32_t i = 0; i < kv.n_blocks(); ++i) blocks[i] = i;

  MobileResult r;
  auto step = [&](const int32_t* tokens, int32_t n, int64_t pos, int32_t experts) -> Result<std::vector<float>> {
    forward.moe_ffn().set_experts_used_override(experts);
    engine::ForwardBatch batch;
    batch.add_sequence(tokens, n, pos, blocks);
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
      ASSIGN_OR_RETURN(logits, step(&r.tokens.back(), 1, pos, 0));  // overwrites the KV at pos
      ++r.fallback_tokens;
    } else {
      ++r.little_tokens;
    }
    ++pos;
  }
  return r;
}

}  // namespace spillway::tools
