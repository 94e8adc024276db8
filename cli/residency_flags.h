// The memory-budget flags `spillway run`, `serve` and `bench` share (README, "Models
// bigger than memory"), each also read from its SPILLWAY_* environment variable.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "common/result.h"
#include "engine/residency/expert_cache.h"
#include "engine/residency/residency_plan.h"

namespace CLI {
class App;
}

namespace spillway::cli {

struct ResidencyFlags {
  std::string memory_budget = "auto";   // SIZE | auto
  std::string priority = "balanced";    // max-throughput | balanced | max-context
  double safety_factor = 0.9;
  std::string resident_layers = "auto"; // N | auto | all
  std::string placement = "first";      // first | last | interleaved
  int prefetch_depth = 2;
  std::string expert_cache = "auto";    // SIZE | auto | off (MoE models)
  std::string expert_cache_policy = "lru";  // lru | lfu
  std::string read_mode = "auto";       // auto | direct | buffered
  std::string row_piece_size = "4M";    // SIZE | 0 (whole matrices)
};

void add_residency_flags(CLI::App& command, ResidencyFlags& flags);

// n_layers resolves "all". Errors name the flag.
Result<engine::ResidencyOptions> residency_options(const ResidencyFlags& flags);

// The expert tier's counters for `run --json` / `bench --json`, under the names of the
// metrics (issue #16) without the spillway_ prefix.
nlohmann::ordered_json expert_json(const engine::ExpertCacheReport& report);
// The expert tier over the timed single-sequence decode runs (`bench --json`'s
// experts.decode): hit rate, bytes per token, stall fraction, the disk bound.
nlohmann::ordered_json expert_decode_json(const engine::ExpertDecodeReport& report);

}  // namespace spillway::cli
