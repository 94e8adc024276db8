#include "cli/mobile_flags.h"

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <charconv>

namespace spillway::cli {

void add_mobile_flags(CLI::App& cmd, MobileFlags& f) {
  cmd.add_option("--moe-little-experts", f.little_experts,
                 "MoE models, MoBiLE: decode tokens first run with K routed experts (renormalised over "
                 "them) and fall back to the full top-k only when unsure: K, auto (half the top-k, at "
                 "least 1) or off")
      ->envname("SPILLWAY_MOE_LITTLE_EXPERTS")
      ->capture_default_str();
  cmd.add_option("--moe-fallback-confidence", f.fallback_confidence,
                 "MoBiLE: a little pass whose top softmax probability is <= this is recomputed with the "
                 "full top-k (0: never, 1: always)")
      ->envname("SPILLWAY_MOE_FALLBACK_CONFIDENCE")
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str();
}

Result<engine::MobileSettings> mobile_settings(const MobileFlags& f) {
  engine::MobileSettings s;
  s.fallback_confidence = f.fallback_confidence;
  if (!(f.fallback_confidence >= 0.0 && f.fallback_confidence <= 1.0)) {
    return Error{fmt::format("--moe-fallback-confidence {} is not in [0, 1]", f.fallback_confidence)};
  }
  if (f.little_experts == "off") {
    s.little_experts = engine::kMobileOff;
  } else if (f.little_experts == "auto") {
    s.little_experts = engine::kMobileAuto;
  } else {
    int32_t k = 0;
    const char* end = f.little_experts.data() + f.little_experts.size();
    auto [p, ec] = std::from_chars(f.little_experts.data(), end, k);
    if (ec != std::errc() || p != end || k < 1) {
      return Error{fmt::format("--moe-little-experts '{}' is not a positive count, auto or off", f.little_experts)};
    }
    s.little_experts = k;
  }
  return s;
}

}  // namespace spillway::cli
