#include "cli/residency_flags.h"

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <array>
#include <charconv>
#include <climits>

#include "engine/platform/memory_probe.h"

namespace spillway::cli {

void add_residency_flags(CLI::App& cmd, ResidencyFlags& f) {
  cmd.add_option("--memory-budget", f.memory_budget,
                 "Memory for weights, KV and buffers: SIZE (512M, 8G) or auto (the cgroup limit, "
                 "else MemAvailable)")
      ->envname("SPILLWAY_MEMORY_BUDGET")
      ->capture_default_str();
  cmd.add_option("--residency-priority", f.priority,
                 "KV room kept when planning: max-throughput (512 tokens), balanced (1024), "
                 "max-context (the whole context)")
      ->envname("SPILLWAY_RESIDENCY_PRIORITY")
      ->check(CLI::IsMember({"max-throughput", "balanced", "max-context"}))
      ->capture_default_str();
  cmd.add_option("--residency-safety", f.safety_factor,
                 "Fraction of the computed room actually filled with resident layers")
      ->envname("SPILLWAY_RESIDENCY_SAFETY")
      ->check(CLI::Range(0.01, 1.0))
      ->capture_default_str();
  cmd.add_option("--resident-layers", f.resident_layers,
                 "Decoder layers kept in memory: N, auto (as the budget allows) or all")
      ->envname("SPILLWAY_RESIDENT_LAYERS")
      ->capture_default_str();
  cmd.add_option("--residency-placement", f.placement,
                 "Which layers stay resident: first, last or interleaved")
      ->envname("SPILLWAY_RESIDENCY_PLACEMENT")
      ->check(CLI::IsMember({"first", "last", "interleaved"}))
      ->capture_default_str();
  cmd.add_option("--prefetch-depth", f.prefetch_depth, "Streamed matrices read ahead of compute (at least; more to keep 32 MiB in flight, up to 8)")
      ->envname("SPILLWAY_PREFETCH_DEPTH")
      ->check(CLI::Range(1, 16))
      ->capture_default_str();
  cmd.add_option("--read-mode", f.read_mode,
                 "How streamed weights are read: auto (buffered, unless a probe of the model file at "
                 "start finds O_DIRECT 1.1x faster), direct (O_DIRECT) or buffered (page cache, dropped "
                 "after use)")
      ->envname("SPILLWAY_READ_MODE")
      ->check(CLI::IsMember({"auto", "direct", "buffered"}))
      ->capture_default_str();
  cmd.add_option("--row-piece-size", f.row_piece_size,
                 "Streamed matrices larger than this stream as row ranges of at most SIZE, computed "
                 "as each arrives, so staging holds pieces, not whole matrices; 0: whole matrices")
      ->envname("SPILLWAY_ROW_PIECE_SIZE")
      ->capture_default_str();
  cmd.add_option("--expert-cache", f.expert_cache,
                 "MoE models: RAM for routed experts, streamed from disk by expert: SIZE (e.g. 2G), "
                 "auto (on when the model does not fit the budget, with the room left) or off "
                 "(experts stay in their layers)")
      ->envname("SPILLWAY_EXPERT_CACHE")
      ->capture_default_str();
  cmd.add_option("--expert-cache-policy", f.expert_cache_policy,
                 "Which cached expert a miss replaces: lru (least recently used, per-layer floor of 2 x "
                 "top-k) or lfu (least frequently used); `spillway expert-trace` compares them")
      ->envname("SPILLWAY_EXPERT_CACHE_POLICY")
      ->check(CLI::IsMember({"lru", "lfu"}))
      ->capture_default_str();
}

Result<engine::ResidencyOptions> residency_options(const ResidencyFlags& f) {
  engine::ResidencyOptions o;
  if (f.memory_budget != "auto") {
    auto bytes = engine::parse_byte_size(f.memory_budget);
    if (!bytes || *bytes <= 0) {
      return Error{fmt::format("--memory-budget '{}' is not a size (e.g. 512M, 8G) or auto",
                               f.memory_budget)};
    }
    o.memory_budget_bytes = *bytes;
  }
  o.priority = *engine::parse_residency_priority(f.priority);
  o.placement = *engine::parse_residency_placement(f.placement);
  o.safety_factor = f.safety_factor;
  o.prefetch_depth = f.prefetch_depth;
  if (f.expert_cache == "off") {
    o.expert_cache_bytes = -1;
  } else if (f.expert_cache != "auto") {
    auto bytes = engine::parse_byte_size(f.expert_cache);
    if (!bytes || *bytes < 0) {
      return Error{fmt::format("--expert-cache '{}' is not a size (e.g. 2G), auto or off", f.expert_cache)};
    }
    o.expert_cache_bytes = *bytes;
  }
  o.expert_cache_lfu = f.expert_cache_policy == "lfu";
  if (f.read_mode != "auto") o.direct_io = f.read_mode == "direct";
  if (f.row_piece_size == "0") {
    o.row_piece_bytes = 0;
  } else {
    auto bytes = engine::parse_byte_size(f.row_piece_size);
    if (!bytes || *bytes <= 0) {
      return Error{fmt::format("--row-piece-size '{}' is not a size (e.g. 4M) or 0", f.row_piece_size)};
    }
    o.row_piece_bytes = static_cast<uint64_t>(*bytes);
  }
  if (f.resident_layers == "all") {
    o.resident_layers = INT32_MAX;  // clamped to the layer count by the plan
  } else if (f.resident_layers != "auto") {
    int32_t n = -1;
    auto [p, ec] = std::from_chars(f.resident_layers.data(),
                                   f.resident_layers.data() + f.resident_layers.size(), n);
    if (ec != std::errc() || p != f.resident_layers.data() + f.resident_layers.size() || n < 0) {
      return Error{fmt::format("--resident-layers '{}' is not a number, auto or all",
                               f.resident_layers)};
    }
    o.resident_layers = n;
  }
  return o;
}

namespace {

// A fixed-bucket histogram as {count, sum, mean, buckets: [{le, count}...]}, bucket counts
// cumulative as Prometheus shows them; the last le is "+Inf".
template <class H, size_t N>
nlohmann::ordered_json histogram_json(const H& h, const std::array<double, N>& bounds) {
  nlohmann::ordered_json buckets = nlohmann::ordered_json::array();
  uint64_t cumulative = 0;
  for (size_t b = 0; b <= N; ++b) {
    cumulative += h.counts[b];
    nlohmann::ordered_json le = b < N ? nlohmann::ordered_json(bounds[b]) : nlohmann::ordered_json("+Inf");
    buckets.push_back({{"le", le}, {"count", cumulative}});
  }
  return {{"count", h.count}, {"sum", h.sum}, {"mean", h.mean()}, {"buckets", buckets}};
}

}  // namespace

nlohmann::ordered_json expert_json(const engine::ExpertCacheReport& r) {
  return {
      {"moe_expert_requests_total", {{"hit", r.expert_requests_hit}, {"miss", r.expert_requests_miss}}},
      {"moe_expert_hit_rate", r.hit_rate},
      {"moe_expert_bytes_read_total", r.expert_bytes_read},
      {"moe_expert_requested_bytes_total", r.expert_requested_bytes},
      {"moe_expert_read_seconds_total", r.read_seconds},
      {"moe_io_stall_seconds_total", r.io_stall_seconds},
      {"moe_evictions_total", r.evictions},
      {"moe_resident_experts", r.resident_experts},
      {"moe_cache_slots", r.slots},
      {"moe_cache_bytes", r.cache_bytes},
      {"moe_expert_read_seconds", histogram_json(r.read_time, engine::kExpertReadSecondsBounds)},
      {"moe_experts_per_layer_step", histogram_json(r.experts_per_layer_step, engine::kExpertsPerLayerStepBounds)},
  };
}

nlohmann::ordered_json expert_decode_json(const engine::ExpertDecodeReport& d) {
  return {
      {"tokens", d.tokens},
      {"seconds", d.seconds},
      {"hit_rate", d.hit_rate},
      {"requested_expert_bytes_per_token", d.requested_bytes_per_token},
      {"expert_bytes_read_per_token", d.bytes_read_per_token},
      {"miss_bytes_bound_per_token", d.miss_bytes_bound_per_token},
      {"stall_fraction", d.stall_fraction},
      {"experts_per_layer_step", d.experts_per_layer_step},
      {"read_seconds_per_expert", d.read_seconds_per_expert},
      {"disk_bound_tokens_per_second", d.disk_bound_tokens_per_second},
  };
}

}  // namespace spillway::cli
