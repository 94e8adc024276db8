// Which decoder layers stay in memory and which are streamed from disk each step, under a
// memory budget (DESIGN.md, "The four ideas" §1).
//
//   resident layers N = floor((budget - non-layer - staging - read cache - runtime reserve
//                              - KV reserve) / bytes per layer * safety)
//
// budget: --memory-budget, or "auto" = what the memory probe says is available at start
// (the cgroup limit minus its working set, or MemAvailable without a limit). staging: the
// streamer's slots (ResidencySizes::staging_bytes: pieces held + read ahead, each the
// size of the largest streamed piece, i.e. matrix; WeightResidency::measure), only when
// some layer is streamed. KV
// reserve by priority: max-throughput 512 tokens, balanced 1024, max-context the whole
// context. The non-layer set (embeddings, final norm, output) is always resident.
//
// Pure arithmetic: no I/O; the caller supplies sizes and the memory reading.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"

namespace spillway::engine {

enum class ResidencyPriority { MaxThroughput, Balanced, MaxContext };
enum class ResidencyPlacement { First, Last, Interleaved };

struct ResidencyOptions {
  std::optional<int64_t> memory_budget_bytes;  // nullopt: auto
  ResidencyPriority priority = ResidencyPriority::Balanced;
  double safety_factor = 0.9;  // fraction of the room filled with resident layers
  // nullopt: as many as the budget allows ("auto"); a number: exactly that many (clamped
  // to the layer count; "all" is the layer count).
  std::optional<int32_t> resident_layers;
  ResidencyPlacement placement = ResidencyPlacement::First;
  int32_t prefetch_depth = 2;  // streamed layers read ahead of the one computing
  // An explicit KV cache size (serve --kv-cache-bytes): reserved instead of the priority's.
  std::optional<int64_t> kv_reserve_bytes;
  // Keep the file's row-major layout instead of retiling (bench: isolates the cost of the
  // residency machinery from the speed of the layout).
  bool keep_file_layout = false;
  // MoE models (expert_cache.h): the expert tier takes the routed experts out of the layer
  // units into a RAM cache of expert slots. nullopt ("auto"): on when the whole model does
  // not fit the budget, with the room left after the resident layers as cache; -1: off;
  // >= 0: on with this many bytes of cache.
  std::optional<int64_t> expert_cache_bytes;
  bool expert_cache_lfu = false;  // the cache's policy: least frequently used, else LRU + floor
  // How streamed weights are read: nullopt measures O_DIRECT against buffered reads at start
  // (read_mode_probe.h); true forces O_DIRECT (where the filesystem allows it), false
  // buffered reads + POSIX_FADV_DONTNEED.
  std::optional<bool> direct_io;
  // Streamed matrices larger than this stream as row ranges of at most this many bytes
  // (WeightResidencyOptions::row_piece_bytes); 0: whole matrices.
  uint64_t row_piece_bytes = 4ull << 20;
};

struct ResidencySizes {
  int64_t non_layer_bytes = 0;
  std::vector<int64_t> layer_bytes;   // per decoder layer, as held in memory
  int64_t kv_bytes_per_token = 0;
  int32_t context_tokens = 0;         // the full context, for max-context
  int64_t runtime_reserve_bytes = 0;  // activations, logits, tokenizer, allocator slack
  // The streamer's staging slots when any layer is streamed (WeightResidency::UnitSizes).
  int64_t staging_bytes = 0;
  int32_t staging_slots = 0;
  // Page cache buffered reads of streamed pieces hold at once (read_mode_probe.h,
  // buffered_read_cache_bytes); 0 when reads are O_DIRECT. Counted only when something streams.
  int64_t read_cache_bytes = 0;
};

struct ResidencyPlan {
  int64_t budget_bytes = 0;
  bool budget_is_auto = false;
  std::vector<bool> resident;          // per layer
  int32_t resident_layers = 0;
  int32_t streamed_layers = 0;
  int64_t non_layer_bytes = 0;
  int64_t resident_layer_bytes = 0;    // sum over resident layers
  int64_t staging_bytes = 0;           // 0 when nothing is streamed
  int64_t read_cache_bytes = 0;        // page cache of buffered streaming; 0 when nothing is streamed
  int64_t kv_reserve_bytes = 0;
  int64_t runtime_reserve_bytes = 0;
  int64_t streamed_bytes_per_step = 0; // read from disk by every forward step
  // The expert tier (MoE models): on or off, the cache's bytes when on, and the routed
  // experts' bytes (all of them, as slots would hold them) it caches.
  bool expert_tier = false;
  bool expert_cache_lfu = false;
  int64_t expert_cache_bytes = 0;
  int64_t routed_expert_bytes = 0;
};

Result<ResidencyPlan> plan_residency(const ResidencySizes& sizes, const ResidencyOptions& options,
                                     int64_t auto_budget_bytes);

// The layers a placement keeps resident when n of n_layers fit.
std::vector<bool> place_resident_layers(int32_t n_layers, int32_t n, ResidencyPlacement placement);

// Flag spellings: "max-throughput" | "balanced" | "max-context"; "first" | "last" |
// "interleaved".
std::optional<ResidencyPriority> parse_residency_priority(std::string_view text);
std::optional<ResidencyPlacement> parse_residency_placement(std::string_view text);
std::string_view residency_placement_name(ResidencyPlacement p);

}  // namespace spillway::engine
