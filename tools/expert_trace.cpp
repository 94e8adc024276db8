#include "tools/expert_trace.h"

#include <algorithm>
#include <fmt/format.h>

#include "engine/forward/forward.h"
#include "engine/state/kv_cache.h"

namespace spillway::tools {

Result<ExpertTrace> record_expert_trace(const engine::Model& model, kernels::ThreadPool& pool,
                                        const std::vector<std::vector<int32_t>>& prompts, int32_t max_new_tokens,
                                        int32_t eos_id, engine::LayerWeightSource* weights) {
  const engine::ModelConfig& c = model.config();
  ExpertTrace trace;
  for (const engine::LayerSpec& s : c.layers) {
    trace.experts_per_layer.push_back(s.ffn == engine::FfnKind::Moe ? s.n_expert : 0);
    trace.experts_used = std::max(trace.experts_used, s.n_expert_used);
  }
  if (trace.experts_used == 0) return Error{fmt::format("{}: not a MoE model", model.source().path())};
  size_t longest = 0;
  for (const auto& p : prompts) longest = std::max(longest, p.size());
  const auto context = static_cast<int32_t>(longest) + max_new_tokens;
  constexpr int32_t kBlock = 16;
  engine::KvCache kv(c.n_layers, c.n_kv_heads, c.head_dim, kBlock, (context + kBlock - 1) / kBlock);
  engine::ForwardPass forward(model, kv, pool, std::max<int32_t>(context, 1), context, weights);
  std::vector<std::vector<int32_t>>* step = nullptr;
  forward.moe_ffn().on_route = [&](int32_t layer, std::span<const int32_t> ids) {
    (*step)[layer].assign(ids.begin(), ids.end());
  };
  std::vector<int32_t> blocks(kv.n_blocks());
  for (int32_t i = 0; i < kv.n_blocks(); ++i) blocks[i] = i;
  for (const auto& prompt : prompts) {
    if (prompt.empty()) continue;
    std::vector<int32_t> tokens = prompt;
    int64_t pos = 0;
    size_t fed = 0;
    for (int32_t n = 0; n <= max_new_tokens; ++n) {
      engine::ForwardBatch batch;
      const auto count = static_cast<int32_t>(tokens.size() - fed);
      batch.add_sequence(tokens.data() + fed, count, pos, blocks);
      batch.logit_rows.push_back(count - 1);
      trace.steps.emplace_back(c.n_layers);
      step = &trace.steps.back();
      auto logits = forward.execute(batch);
      if (!logits) return logits.error();
      pos += count;
      fed = tokens.size();
      const auto next = static_cast<int32_t>(std::max_element(logits->begin(), logits->end()) - logits->begin());
      if (next == eos_id || n == max_new_tokens) break;
      tokens.push_back(next);
    }
  }
  forward.moe_ffn().on_route = nullptr;
  return trace;
}

std::string_view cache_policy_name(CachePolicy p) {
  switch (p) {
    case CachePolicy::Lru: return "lru";
    case CachePolicy::LruFloor: return "lru-floor";
    case CachePolicy::Lfu: return "lfu";
    case CachePolicy::LruPerLayer: return "lru-per-layer";
  }
  return "?";
}

namespace {

struct SimSlot {
  int32_t layer = -1, expert = -1;
  uint64_t last_use = 0;
  bool pinned = false;
};

}  // namespace

ReplayResult replay_expert_trace(const ExpertTrace& trace, CachePolicy policy, int32_t slots) {
  ReplayResult r;
  const auto n_layers = static_cast<int32_t>(trace.experts_per_layer.size());
  int32_t moe_layers = 0;
  for (int32_t n : trace.experts_per_layer) moe_layers += n > 0;
  slots = std::max(slots, 1);
  std::vector<SimSlot> cache(slots);
  std::vector<std::vector<int32_t>> slot_of(n_layers);
  std::vector<std::vector<uint64_t>> freq(n_layers);
  for (int32_t l = 0; l < n_layers; ++l) {
    slot_of[l].assign(trace.experts_per_layer[l], -1);
    freq[l].assign(trace.experts_per_layer[l], 0);
  }
  std::vector<int32_t> held(n_layers, 0);
  const int32_t floor = 2 * trace.experts_used;
  const bool floors = policy == CachePolicy::LruFloor && slots >= floor * moe_layers;
  const int32_t per_layer = std::max(1, slots / std::max(moe_layers, 1));
  uint64_t tick = 0;

  auto victim = [&](int32_t layer) {
    int32_t best = -1, best_any = -1;
    auto better = [&](int32_t a, int32_t b) {  // is slot a a better victim than b
      if (b < 0) return true;
      if (policy == CachePolicy::Lfu) {
        const uint64_t fa = freq[cache[a].layer][cache[a].expert], fb = freq[cache[b].layer][cache[b].expert];
        if (fa != fb) return fa < fb;
      }
      return cache[a].last_use < cache[b].last_use;
    };
    for (int32_t i = 0; i < slots; ++i) {
      const SimSlot& s = cache[i];
      if (s.pinned) continue;
      if (policy == CachePolicy::LruPerLayer) {
        // Only this layer's slots; a free slot only while the layer is under its share.
        if (s.layer < 0) {
          if (held[layer] < per_layer) return i;
          continue;
        }
        if (s.layer != layer) continue;
        if (better(i, best)) best = i;
        continue;
      }
      if (s.layer < 0) return i;
      if (better(i, best_any)) best_any = i;
      const bool ok = !floors || s.layer == layer || held[s.layer] > floor;
      if (ok && better(i, best)) best = i;
    }
    return best >= 0 ? best : best_any;
  };

  for (const auto& step : trace.steps) {
    for (int32_t l = 0; l < n_layers; ++l) {
      const std::vector<int32_t>& ids = step[l];
      const size_t wave = policy == CachePolicy::LruPerLayer ? static_cast<size_t>(per_layer) : cache.size();
      for (size_t first = 0; first < ids.size(); first += wave) {
        ++tick;
        const size_t last = std::min(ids.size(), first + wave);
        // Hits first (pinned, so the misses of the same request cannot evict them), then
        // the misses, as the expert cache does.
        for (size_t i = first; i < last; ++i) {
          const int32_t e = ids[i];
          ++freq[l][e];
          const int32_t s = slot_of[l][e];
          if (s >= 0) {
            ++r.hits;
            cache[s].last_use = tick;
            cache[s].pinned = true;
          }
        }
        for (size_t i = first; i < last; ++i) {
          const int32_t e = ids[i];
          if (slot_of[l][e] >= 0 && cache[slot_of[l][e]].pinned) continue;
          ++r.misses;
          const int32_t v = victim(l);
          if (v < 0) continue;  // nothing evictable (a per-layer share smaller than the wave)
          SimSlot& slot = cache[v];
          if (slot.layer >= 0) {
            slot_of[slot.layer][slot.expert] = -1;
            --held[slot.layer];
          }
          slot = {l, e, tick, true};
          slot_of[l][e] = v;
          ++held[l];
        }
        for (SimSlot& s : cache) s.pinned = false;
      }
    }
  }
  return r;
}

}  // namespace spillway::tools
