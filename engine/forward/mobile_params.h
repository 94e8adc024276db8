// MoBiLE big-little decoding in the serving path (issue #16; research/hybrid-moe.md §5):
// the settings a server holds (--moe-little-experts, --moe-fallback-confidence), what a
// request may override (the body's "moe" object), and the decision rule on a row's logits.
//
// A decode row runs with the router's top `little` experts (renormalised over them); when
// the max softmax probability of its raw logits is <= gamma the pass is discarded and the
// position recomputed with the full top-k. Prefill always runs the full top-k.
//
// Pure values and functions; any thread.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <span>

#include "engine/model/model_config.h"

namespace spillway::engine {

// little_experts: kMobileOff (full top-k), kMobileAuto (half the model's top-k, at least 1)
// or a count in [1, top-k].
inline constexpr int32_t kMobileOff = 0;
inline constexpr int32_t kMobileAuto = -1;
inline constexpr double kDefaultFallbackConfidence = 0.7;

struct MobileSettings {
  int32_t little_experts = kMobileOff;
  double fallback_confidence = kDefaultFallbackConfidence;  // gamma, in [0, 1]
};

// A request's override: the fields it names replace the server's.
struct MobileRequest {
  std::optional<int32_t> little_experts;  // kMobileOff, kMobileAuto or a count
  std::optional<double> fallback_confidence;
};

// The largest top-k of a model's MoE layers; 0: it has none (MoBiLE does not apply).
inline int32_t moe_top_k(const ModelConfig& config) {
  int32_t k = 0;
  for (const LayerSpec& s : config.layers) {
    if (s.ffn == FfnKind::Moe) k = std::max(k, s.n_expert_used);
  }
  return k;
}

// The little pass's expert count for a model whose largest top-k is `top_k` (0: not MoE):
// 0 when MoBiLE is off for this row (or the model has no MoE layers, or the count is not
// below top_k: the little pass would be the full one).
inline int32_t resolve_little_experts(int32_t little_experts, int32_t top_k) {
  if (top_k <= 0 || little_experts == kMobileOff) return 0;
  const int32_t k = little_experts == kMobileAuto ? std::max(1, top_k / 2) : little_experts;
  return k >= 1 && k < top_k ? k : 0;
}

// The settings a row runs with: the server's, overridden by the request's fields. A request
// that names only fallback_confidence while the server has MoBiLE off asks for it on: auto.
inline MobileSettings merge_mobile(const MobileSettings& server, const MobileRequest* request) {
  if (request == nullptr) return server;
  MobileSettings s = server;
  if (request->little_experts) {
    s.little_experts = *request->little_experts;
  } else if (s.little_experts == kMobileOff) {
    s.little_experts = kMobileAuto;
  }
  if (request->fallback_confidence) s.fallback_confidence = *request->fallback_confidence;
  return s;
}

// max softmax(logits), in double (the little pass's confidence).
inline double top_probability(std::span<const float> logits) {
  const float mx = *std::max_element(logits.begin(), logits.end());
  double z = 0;
  for (float l : logits) z += std::exp(double(l) - double(mx));
  return 1.0 / z;
}

// Whether a little pass with these raw logits is discarded and recomputed with the full k.
inline bool mobile_falls_back(std::span<const float> logits, double gamma) {
  return top_probability(logits) <= gamma;
}

}  // namespace spillway::engine
