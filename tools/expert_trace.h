// Routing traces of a MoE model and an offline replay of expert-cache policies over them
// (issue #16: "a routing-trace replay tool compares cache policies offline"). Hit rates
// depend only on the routing, so they are measured here exactly, without timing.
//
// A trace is, per forward step, per MoE layer, the distinct experts the step asked for (what
// the expert cache sees). record_expert_trace runs greedy generation over prompts (one
// sequence at a time: a prefill step, then one step per generated token).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"
#include "engine/model/model.h"
#include "engine/residency/layer_weight_source.h"
#include "kernels/thread_pool.h"

namespace spillway::tools {

struct ExpertTrace {
  std::vector<int32_t> experts_per_layer;  // 0 for a dense layer
  int32_t experts_used = 0;                // the largest top-k
  // [step][layer] -> the layer's distinct experts that step, ascending.
  std::vector<std::vector<std::vector<int32_t>>> steps;
};

// weights: where the forward reads the weights (null: the model's mapping).
Result<ExpertTrace> record_expert_trace(const engine::Model& model, kernels::ThreadPool& pool,
                                        const std::vector<std::vector<int32_t>>& prompts, int32_t max_new_tokens,
                                        int32_t eos_id, engine::LayerWeightSource* weights = nullptr);

enum class CachePolicy {
  Lru,          // global least recently used
  LruFloor,     // global LRU; a layer at or below 2 x top-k slots loses slots only to itself
                // (when every layer's floor fits): the policy of engine/residency/expert_cache.h
  Lfu,          // global least frequently used (requests since start), LRU among equals
  LruPerLayer,  // slots split evenly between the MoE layers, LRU inside each
};
std::string_view cache_policy_name(CachePolicy p);

struct ReplayResult {
  uint64_t hits = 0, misses = 0;
  double hit_rate() const { return hits + misses ? double(hits) / double(hits + misses) : 0.0; }
};
// Replays the trace through a cache of `slots` experts. A layer's request larger than the
// cache runs in waves (as the engine does).
ReplayResult replay_expert_trace(const ExpertTrace& trace, CachePolicy policy, int32_t slots);

}  // namespace spillway::tools
