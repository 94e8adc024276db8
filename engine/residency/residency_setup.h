// Puts a model's weights under a memory budget: reads the memory probe, plans which
// layers stay resident (residency_plan.h), loads them, prepares streaming for the rest,
// and measures the disk's read bandwidth when anything is streamed. What `spillway run`,
// `serve` and `bench` share.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/result.h"
#include "engine/platform/memory_probe.h"
#include "engine/model/model.h"
#include "engine/residency/residency_plan.h"
#include "engine/residency/weight_residency.h"

namespace spillway::engine {

// What besides the weights the budget must hold.
struct ResidencyDemand {
  int32_t context_tokens = 0;      // the largest context a sequence may use
  int32_t max_batch_tokens = 512;  // tokens of one forward step (sizes the workspaces)
  int32_t threads = 1;
  // Recurrent-state slots the runner will hold (hybrid models: one per running sequence);
  // each costs RecurrentState::slot_bytes, reserved like the runtime's workspaces.
  int32_t state_slots = 1;
  int32_t state_snapshots = 0;  // prefix-cache snapshots of one state each
};

struct ResidencySetup {
  ResidencyPlan plan;
  std::unique_ptr<WeightResidency> weights;
  MemoryReading memory_at_start;
  // The pressure controller's floor at start (default_pressure_policy()); an auto budget
  // leaves it free so that the plan's steady state does not sit under it.
  int64_t pressure_floor_bytes = 0;
  double disk_bytes_per_second = 0;  // measured at start; 0 when nothing is streamed
  // The read-mode measurement's log line (ReadModeChoice::summary) when `auto` measured it;
  // empty when the mode was given or nothing streams.
  std::string read_mode_summary;
  int32_t prefetch_depth = 0;
  // Human-readable description of the plan, one line each, for the start-up log.
  std::vector<std::string> describe(const Model& model) const;
};

// progress: reading the resident weights (WeightResidency::create). With an auto budget the
// plan gets the available memory less the pressure floor.
Result<ResidencySetup> set_up_residency(const Model& model, const ResidencyOptions& options,
                                        const ResidencyDemand& demand, const MemorySource& memory,
                                        const WeightLoadProgress& progress = {});

// Bytes of the forward pass's workspaces and the allocator slack the plan reserves.
int64_t runtime_reserve_bytes(const ModelConfig& config, const ResidencyDemand& demand);

// Reads up to `bytes` of `path` with O_DIRECT in large requests; bytes per second.
Result<double> measure_disk_read_bandwidth(const std::string& path, uint64_t bytes);

}  // namespace spillway::engine
