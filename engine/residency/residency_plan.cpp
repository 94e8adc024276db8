#include "engine/residency/residency_plan.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

namespace spillway::engine {

namespace {

int64_t kv_reserve_tokens(ResidencyPriority p, int32_t context_tokens) {
  switch (p) {
    case ResidencyPriority::MaxThroughput: return std::min<int64_t>(512, context_tokens);
    case ResidencyPriority::Balanced: return std::min<int64_t>(1024, context_tokens);
    case ResidencyPriority::MaxContext: return context_tokens;
  }
  return context_tokens;
}

std::string mib(int64_t bytes) { return fmt::format("{:.1f} MiB", bytes / 1048576.0); }

}  // namespace

std::vector<bool> place_resident_layers(int32_t n_layers, int32_t n, ResidencyPlacement placement) {
  n = std::clamp(n, 0, n_layers);
  std::vector<bool> resident(n_layers, false);
  switch (placement) {
    case ResidencyPlacement::First:
      for (int32_t i = 0; i < n; ++i) resident[i] = true;
      break;
    case ResidencyPlacement::Last:
      for (int32_t i = n_layers - n; i < n_layers; ++i) resident[i] = true;
      break;
    case ResidencyPlacement::Interleaved:
      // Spread evenly: layer floor(i * n_layers / n) for i < n (distinct since n <= n_layers),
      // so streamed layers alternate with resident ones and I/O overlaps their compute.
      for (int32_t i = 0; i < n; ++i) resident[static_cast<int64_t>(i) * n_layers / n] = true;
      break;
  }
  return resident;
}

Result<ResidencyPlan> plan_residency(const ResidencySizes& sizes, const ResidencyOptions& options,
                                     int64_t auto_budget_bytes) {
  const auto n_layers = static_cast<int32_t>(sizes.layer_bytes.size());
  if (!(options.safety_factor > 0 && options.safety_factor <= 1)) {
    return Error{fmt::format("the residency safety factor must be in (0, 1], got {}",
                             options.safety_factor)};
  }
  if (options.prefetch_depth < 1) return Error{"the prefetch depth must be at least 1"};

  ResidencyPlan plan;
  plan.budget_is_auto = !options.memory_budget_bytes.has_value();
  plan.budget_bytes = options.memory_budget_bytes.value_or(auto_budget_bytes);
  plan.non_layer_bytes = sizes.non_layer_bytes;
  plan.runtime_reserve_bytes = sizes.runtime_reserve_bytes;
  plan.kv_reserve_bytes = options.kv_reserve_bytes.value_or(
      kv_reserve_tokens(options.priority, sizes.context_tokens) * sizes.kv_bytes_per_token);
  const int64_t staging_if_streaming = sizes.staging_bytes + sizes.read_cache_bytes;
  const int64_t fixed = plan.non_layer_bytes + plan.runtime_reserve_bytes + plan.kv_reserve_bytes;

  int32_t n_resident = 0;
  if (options.resident_layers) {
    n_resident = std::clamp(*options.resident_layers, 0, n_layers);
  } else {
    int64_t all_layers = 0;
    for (int64_t b : sizes.layer_bytes) all_layers += b;
    if (fixed + all_layers <= plan.budget_bytes) {
      n_resident = n_layers;  // everything fits: no staging needed
    } else {
      const int64_t room = plan.budget_bytes - fixed - staging_if_streaming;
      if (room < 0) {
        return Error{fmt::format(
            "the memory budget of {} is too small for this model: it needs at least {} "
            "(non-layer weights {} + streaming staging {} in {} slots + read cache {} + KV reserve {} + "
            "runtime {}); raise --memory-budget or lower --residency-priority",
            mib(plan.budget_bytes), mib(fixed + staging_if_streaming), mib(plan.non_layer_bytes),
            mib(sizes.staging_bytes), sizes.staging_slots, mib(sizes.read_cache_bytes), mib(plan.kv_reserve_bytes),
            mib(plan.runtime_reserve_bytes))};
      }
      const double per_layer = n_layers == 0 ? 1.0 : static_cast<double>(all_layers) / n_layers;
      // The safety factor applies to auto budgets too: without it (tried, issue #21 read
      // path) a 2.4B model in a 1209 MiB cgroup planned 11 layers with O_DIRECT and shed 3
      // of them within the run (bench/README.md).
      n_resident = static_cast<int32_t>(
          std::floor(static_cast<double>(room) / per_layer * options.safety_factor));
      n_resident = std::clamp(n_resident, 0, n_layers - 1);
    }
  }

  plan.resident = place_resident_layers(n_layers, n_resident, options.placement);
  plan.resident_layers = n_resident;
  plan.streamed_layers = n_layers - n_resident;
  for (int32_t i = 0; i < n_layers; ++i) {
    if (plan.resident[i]) {
      plan.resident_layer_bytes += sizes.layer_bytes[i];
    } else {
      plan.streamed_bytes_per_step += sizes.layer_bytes[i];
    }
  }
  plan.staging_bytes = plan.streamed_layers > 0 ? sizes.staging_bytes : 0;
  plan.read_cache_bytes = plan.streamed_layers > 0 ? sizes.read_cache_bytes : 0;
  return plan;
}

std::optional<ResidencyPriority> parse_residency_priority(std::string_view text) {
  if (text == "max-throughput") return ResidencyPriority::MaxThroughput;
  if (text == "balanced") return ResidencyPriority::Balanced;
  if (text == "max-context") return ResidencyPriority::MaxContext;
  return std::nullopt;
}

std::optional<ResidencyPlacement> parse_residency_placement(std::string_view text) {
  if (text == "first") return ResidencyPlacement::First;
  if (text == "last") return ResidencyPlacement::Last;
  if (text == "interleaved") return ResidencyPlacement::Interleaved;
  return std::nullopt;
}

std::string_view residency_placement_name(ResidencyPlacement p) {
  switch (p) {
    case ResidencyPlacement::First: return "first";
    case ResidencyPlacement::Last: return "last";
    case ResidencyPlacement::Interleaved: return "interleaved";
  }
  return "first";
}

}  // namespace spillway::engine
