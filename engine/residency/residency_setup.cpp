#include "engine/residency/residency_setup.h"

#include <algorithm>
#include <chrono>

#include <fmt/format.h>

#include "engine/platform/direct_reader.h"
#include "engine/platform/read_mode_probe.h"
#include "engine/residency/residency_controller.h"
#include "engine/state/kv_cache.h"
#include "engine/state/recurrent_state.h"

namespace spillway::engine {

namespace {

std::string mib(double bytes) { return fmt::format("{:.1f} MiB", bytes / 1048576.0); }

// What the process holds besides weights, staging, KV and workspaces: code and libraries,
// thread stacks, malloc's arenas and fragmentation, the tokenizer's tables (by vocabulary).
// Measured (bench/README.md, "Models bigger than memory", issue #21 read path): a 1.1B
// Q8_0 model, vocabulary 32000, streaming in a 557 MiB cgroup, batch 16: peak RSS 417.5 MiB
// of which weights + staging 381.4 MiB, workspaces + KV ~8 MiB: ~28 MiB. Was a fixed 64 MiB.
constexpr int64_t kProcessSlackBytes = 24ll << 20;
constexpr int64_t kSlackBytesPerVocabEntry = 256;

}  // namespace

int64_t runtime_reserve_bytes(const ModelConfig& c, const ResidencyDemand& d) {
  const int64_t t = d.max_batch_tokens;
  const int64_t per_token = 2 * c.n_embd + 2 * c.q_dim() + 2 * c.kv_dim() + 2 * c.n_ff;
  const int64_t logits = std::min<int64_t>(t, 64) * (c.n_vocab + c.n_embd);
  const int64_t attention = static_cast<int64_t>(d.threads) * (d.context_tokens + 16);
  // Activations quantized to int8 blocks for quantized matmuls: ~1 byte per element.
  const int64_t matmul_scratch = t * std::max<int64_t>(c.n_ff, c.n_embd) * 2;
  const int64_t recurrent_state = RecurrentState::slot_bytes(c) * std::max<int32_t>(d.state_slots, 0) +
                                  RecurrentState::state_bytes(c) * std::max<int32_t>(d.state_snapshots, 0);
  const int64_t slack = kProcessSlackBytes + kSlackBytesPerVocabEntry * c.n_vocab;
  return (t * per_token + logits + attention) * 4 + matmul_scratch + recurrent_state + slack;
}

Result<double> measure_disk_read_bandwidth(const std::string& path, uint64_t bytes) {
  auto reader = DirectReader::open(path);
  if (!reader) return reader.error();
  constexpr uint64_t kChunk = 16ull << 20;
  bytes = std::min(bytes, (*reader)->file_size());
  if (bytes == 0) return 0.0;
  AlignedBytes buffer = AlignedBytes::allocate(DirectReader::span_bytes(0, kChunk) + DirectReader::kAlignment);
  // From the end of the file backwards: the weights there are the least likely to have
  // just been read (the header and first layers were, at load).
  const uint64_t size = (*reader)->file_size();
  const auto start = std::chrono::steady_clock::now();
  uint64_t done = 0;
  while (done < bytes) {
    const uint64_t n = std::min(kChunk, bytes - done);
    const uint64_t offset = size - done - n;
    auto r = (*reader)->read(offset, n, buffer.data.get());
    if (!r) return r.error();
    done += n;
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return seconds > 0 ? static_cast<double>(done) / seconds : 0.0;
}

Result<ResidencySetup> set_up_residency(const Model& model, const ResidencyOptions& options,
                                        const ResidencyDemand& demand, const MemorySource& memory,
                                        const WeightLoadProgress& progress) {
  const ModelConfig& c = model.config();
  ResidencySetup setup;
  setup.memory_at_start = memory.read();
  setup.pressure_floor_bytes = default_pressure_policy().floor_for(setup.memory_at_start.limit_bytes);
  // Auto: what the probe says is available, less the floor the controller sheds under.
  const int64_t auto_budget =
      std::max<int64_t>(0, setup.memory_at_start.available_bytes - setup.pressure_floor_bytes);

  // Sizes as the residency will hold them: lay the units out without reading anything.
  WeightResidencyOptions weight_options{.prefetch_depth = options.prefetch_depth,
                                        .keep_file_layout = options.keep_file_layout};
  weight_options.row_piece_bytes = options.row_piece_bytes;
  if (options.direct_io) {
    weight_options.direct_io = *options.direct_io;
    weight_options.read_mode_probe_bytes = 0;
  }
  auto units = WeightResidency::measure(model, weight_options);
  if (!units) return units.error();
  ResidencySizes sizes;
  sizes.non_layer_bytes = units->non_layer_bytes;
  sizes.layer_bytes = units->layer_bytes;
  sizes.staging_bytes = units->staging_bytes;
  sizes.staging_slots = units->staging_slots;
  // Buffered reads (chosen, or possible under auto until measured below) hold page cache
  // while streaming.
  if (!options.direct_io.value_or(false)) {
    sizes.read_cache_bytes = static_cast<int64_t>(buffered_read_cache_bytes(
        model.source().files().front(), weight_options.stream.read_threads, weight_options.stream.chunk_bytes));
  }
  sizes.kv_bytes_per_token =
      KvCache::bytes_per_token(c, kernels::DType::F16);
  sizes.context_tokens = demand.context_tokens;
  sizes.runtime_reserve_bytes = runtime_reserve_bytes(c, demand);

  auto plan = plan_residency(sizes, options, auto_budget);
  const bool moe = std::any_of(c.layers.begin(), c.layers.end(), [](const LayerSpec& s) { return s.ffn == FfnKind::Moe; });
  const int64_t want_cache = options.expert_cache_bytes.value_or(-2);  // -2: auto
  // Auto read mode where something will stream (layers, or the experts of an MoE model):
  // measure it now, so that the plan counts the buffered reads' page cache only when they
  // are the choice; O_DIRECT gives those bytes to resident layers.
  const bool streams = !plan || plan->streamed_layers > 0 || (moe && want_cache >= 0);
  if (!options.direct_io && streams && weight_options.read_mode_probe_bytes > 0) {
    ASSIGN_OR_RETURN(const ReadModeChoice choice,
                     choose_read_mode(model.source().files().front(), weight_options.read_mode_probe_bytes,
                                      weight_options.stream.read_threads, weight_options.stream.chunk_bytes));
    weight_options.direct_io = choice.direct;
    weight_options.read_mode_probe_bytes = 0;  // measured: WeightResidency::create takes the choice
    setup.read_mode_summary = choice.summary();
    if (choice.direct) {
      sizes.read_cache_bytes = 0;
      plan = plan_residency(sizes, options, auto_budget);
    }
  }
  // A plan that streams keeps the model file in use for good: then untied token embeddings
  // stay on disk too (a row read per token), and their bytes go to resident layers.
  if (!plan || plan->streamed_layers > 0) {
    weight_options.embeddings_on_disk = true;
    ASSIGN_OR_RETURN(const WeightResidency::UnitSizes lean, WeightResidency::measure(model, weight_options));
    if (lean.non_layer_bytes < sizes.non_layer_bytes) {
      sizes.non_layer_bytes = lean.non_layer_bytes;
      plan = plan_residency(sizes, options, auto_budget);
    } else {
      weight_options.embeddings_on_disk = false;
    }
  }

  // MoE: the expert tier when asked for, or (auto) when the model does not fit whole.
  if (!moe || want_cache == -1 || (want_cache < 0 && plan && plan->streamed_layers == 0)) {
    if (!plan) return plan.error();
    setup.plan = std::move(*plan);
  } else {
    ASSIGN_OR_RETURN(const ExpertCache::Sizes experts, ExpertCache::measure(model));
    weight_options.expert_cache_bytes = 0;
    auto apart = WeightResidency::measure(model, weight_options);
    if (!apart) return apart.error();
    sizes.layer_bytes = apart->layer_bytes;
    sizes.staging_bytes = apart->staging_bytes;
    sizes.staging_slots = apart->staging_slots;
    auto tier_plan = plan_residency(sizes, options, auto_budget);
    if (!tier_plan) return tier_plan.error();
    setup.plan = std::move(*tier_plan);
    int64_t cache = want_cache;
    if (cache < 0) {
      const int64_t used = setup.plan.non_layer_bytes + setup.plan.runtime_reserve_bytes + setup.plan.kv_reserve_bytes +
                           setup.plan.resident_layer_bytes + setup.plan.staging_bytes +
                           setup.plan.read_cache_bytes;
      cache = static_cast<int64_t>(static_cast<double>(setup.plan.budget_bytes - used) * options.safety_factor);
    }
    // At least the fewest slots (the largest top-k), at most every routed expert.
    cache = std::clamp<int64_t>(cache, experts.slot_bytes * experts.min_slots, experts.routed_expert_bytes);
    weight_options.expert_cache_bytes = cache;
    weight_options.expert_cache_policy = options.expert_cache_lfu ? ExpertCachePolicy::Lfu : ExpertCachePolicy::LruFloor;
    setup.plan.expert_tier = true;
    setup.plan.expert_cache_lfu = options.expert_cache_lfu;
    setup.plan.expert_cache_bytes = cache / experts.slot_bytes * experts.slot_bytes;
    setup.plan.routed_expert_bytes = experts.routed_expert_bytes;
  }

  setup.prefetch_depth = options.prefetch_depth;
  // Before the weights are allocated: the measurement's 16 MiB buffer is not in the plan, and
  // on top of the resident set it raised the start's high-water mark by as much.
  if (setup.plan.streamed_layers > 0 || setup.plan.expert_tier) {
    const std::string& file = model.source().files().front();
    const auto probe = std::max<uint64_t>(setup.plan.expert_tier ? 64ull << 20 : 0,
                                          static_cast<uint64_t>(setup.plan.streamed_bytes_per_step));
    auto bandwidth = measure_disk_read_bandwidth(file, std::min<uint64_t>(256ull << 20, probe));
    if (!bandwidth) return bandwidth.error();
    setup.disk_bytes_per_second = *bandwidth;
  }
  auto weights = WeightResidency::create(model, setup.plan.resident, weight_options, progress);
  if (!weights) return weights.error();
  setup.weights = std::move(*weights);
  return setup;
}

std::vector<std::string> ResidencySetup::describe(const Model& model) const {
  std::vector<std::string> lines;
  const MemoryReading& m = memory_at_start;
  lines.push_back(fmt::format(
      "memory: {} available of {} ({}), PSI some avg10 {:.2f}%", mib(m.available_bytes), mib(m.limit_bytes),
      m.cgroup_limited ? fmt::format("cgroup limit; {} unreclaimable, {} page cache counted reclaimable",
                                     mib(m.unreclaimable_bytes), mib(m.reclaimable_bytes))
                       : std::string("no cgroup limit: MemAvailable"),
      m.pressure_some_avg10));
  lines.push_back(fmt::format(
      "residency budget {} ({}): non-layer weights {}, KV reserve {}, runtime reserve {}",
      mib(plan.budget_bytes),
      plan.budget_is_auto ? fmt::format("auto: available less the pressure floor {}", mib(pressure_floor_bytes))
                          : std::string("--memory-budget"),
      mib(plan.non_layer_bytes), mib(plan.kv_reserve_bytes), mib(plan.runtime_reserve_bytes)));
  std::string map;
  for (bool r : plan.resident) map += r ? 'R' : 's';
  if (plan.streamed_layers > 0) {
    const int64_t used = plan.non_layer_bytes + plan.kv_reserve_bytes + plan.runtime_reserve_bytes +
                         plan.staging_bytes + plan.read_cache_bytes + plan.resident_layer_bytes;
    lines.push_back(fmt::format("budget use: staging {} + read cache {} (page cache of buffered reads) + "
                                "resident layers {}; {} left (under one layer, or the safety factor's share)",
                                mib(plan.staging_bytes), mib(plan.read_cache_bytes), mib(plan.resident_layer_bytes),
                                mib(plan.budget_bytes - used)));
  }
  lines.push_back(fmt::format("layers: {} resident ({}), {} streamed [{}]", plan.resident_layers,
                              mib(plan.resident_layer_bytes), plan.streamed_layers, map));
  if (plan.streamed_layers > 0) {
    const double per_step = static_cast<double>(plan.streamed_bytes_per_step);
    lines.push_back(fmt::format(
        "streaming: {} per forward step through {} staging buffers ({}), {} I/O; disk read "
        "bandwidth measured at start {:.0f} MB/s: at most {:.2f} forward steps/s (decode "
        "tok/s for one sequence)",
        mib(per_step), weights ? weights->staging_slots() : prefetch_depth + 1,
        mib(static_cast<double>(plan.staging_bytes)),
        weights && weights->direct_io() ? "O_DIRECT" : "buffered+DONTNEED",
        disk_bytes_per_second / 1e6, disk_bytes_per_second / per_step));
    const std::string& read_mode = !read_mode_summary.empty() || !weights ? read_mode_summary : weights->read_mode_summary();
    if (!read_mode.empty()) lines.push_back(read_mode);
  } else {
    lines.push_back(fmt::format("streaming: none, all {} layers of {} resident",
                                model.config().n_layers, model.source().path()));
  }
  if (plan.expert_tier) {
    const ExpertCacheStats s = weights ? weights->expert_cache_stats() : ExpertCacheStats{};
    lines.push_back(fmt::format(
        "experts: routed experts ({}) in a RAM cache of {} slots ({}, {:.0f}% of them), {}; misses read with {} "
        "parallel reads",
        mib(static_cast<double>(plan.routed_expert_bytes)), s.slots, mib(static_cast<double>(plan.expert_cache_bytes)),
        100.0 * static_cast<double>(plan.expert_cache_bytes) / static_cast<double>(std::max<int64_t>(plan.routed_expert_bytes, 1)),
        plan.expert_cache_lfu ? "least frequently used" : "LRU with a per-layer floor of 2 x top-k", 8));
  }
  return lines;
}

}  // namespace spillway::engine
