// The MoBiLE flags `spillway serve`, `run` and `bench` share (issue #16; README, "MoE
// models"): --moe-little-experts K|auto|off and --moe-fallback-confidence γ, each also read
// from its SPILLWAY_* environment variable.
#pragma once

#include <string>

#include "common/result.h"
#include "engine/forward/mobile_params.h"

namespace CLI {
class App;
}

namespace spillway::cli {

struct MobileFlags {
  std::string little_experts = "off";  // K | auto | off
  double fallback_confidence = engine::kDefaultFallbackConfidence;
};

void add_mobile_flags(CLI::App& command, MobileFlags& flags);

// Errors name the flag. K is checked against the model when it is loaded (a K not below
// the model's top-k, or a model without MoE layers: MoBiLE stays off).
Result<engine::MobileSettings> mobile_settings(const MobileFlags& flags);

}  // namespace spillway::cli
