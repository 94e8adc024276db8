// Adapts the resident set to memory pressure, between forward steps (DESIGN.md §1).
//
// Every `check_every_steps` steps or `check_every_seconds`, whichever comes first, it reads
// the MemorySource. Under pressure — available memory below the floor, or PSI "some avg10"
// above its threshold — it sheds 25% of the resident layers, highest index first (more
// when available memory is far below the floor, e.g. after the cgroup limit was lowered at
// run time: enough layers to get back above it). When pressure has stayed low for
// `readmit_after_seconds` and there is room for a layer plus a margin, it re-admits one
// streamed layer per check, lowest index first, never beyond `max_resident_bytes`.
// The first shed also allocates the streaming buffers (prefetch depth + 1 layers), so it
// sheds at least that many + 1 layers: shedding fewer would use more memory, not less.
// With the expert tier of a MoE model, pressure sheds expert-cache slots first (the same
// fraction of them, or enough for the deficit), layers only once the cache is at its
// fewest slots; calm re-admits layers first, then a quarter of the shed slots per check.
//
// Thread contract: on_step() runs on the engine thread, between steps (it changes which
// layers the forward streams). Counters are read on the same thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>

#include "engine/platform/memory_probe.h"
#include "engine/residency/weight_residency.h"

namespace spillway::engine {

struct PressurePolicy {
  int64_t floor_bytes = 300ll << 20;          // shed below this much available memory
  double psi_threshold = 40.0;                // shed when PSI some avg10 exceeds this (%)
  double shed_fraction = 0.25;                // of the resident layers
  int64_t readmit_margin_bytes = 256ll << 20; // room beyond floor + layer needed to re-admit
  double readmit_after_seconds = 10.0;        // low pressure this long before re-admitting
  int32_t check_every_steps = 64;
  double check_every_seconds = 1.0;
  int64_t max_resident_bytes = INT64_MAX;     // weights kept resident never exceed this
};

struct ResidencyAction {
  int32_t shed = 0;
  int32_t readmitted = 0;
  int32_t expert_slots_shed = 0;
  int32_t expert_slots_readmitted = 0;
  bool checked = false;  // memory was read this step
};

class ResidencyController {
 public:
  using Clock = std::function<std::chrono::steady_clock::time_point()>;

  // source and residency must outlive the controller. clock: steady_clock::now unless a
  // test injects one.
  ResidencyController(WeightResidency& residency, const MemorySource& source,
                      PressurePolicy policy, int32_t prefetch_depth, Clock clock = {});

  // Call after every forward step.
  ResidencyAction on_step();

  const MemoryReading& last_reading() const { return last_; }
  int64_t shed_total() const { return shed_total_; }
  int64_t readmit_total() const { return readmit_total_; }
  int64_t expert_slots_shed_total() const { return expert_slots_shed_total_; }
  int64_t expert_slots_readmit_total() const { return expert_slots_readmit_total_; }

 private:
  bool under_pressure(const MemoryReading& r) const;
  int32_t shed(const MemoryReading& r);
  int32_t readmit(const MemoryReading& r);

  WeightResidency& residency_;
  const MemorySource& source_;
  PressurePolicy policy_;
  int32_t prefetch_depth_;
  Clock clock_;
  int32_t steps_since_check_ = 0;
  std::chrono::steady_clock::time_point last_check_;
  std::chrono::steady_clock::time_point calm_since_;
  bool calm_ = false;
  MemoryReading last_;
  int64_t shed_total_ = 0;
  int64_t readmit_total_ = 0;
  int64_t expert_slots_shed_total_ = 0;
  int64_t expert_slots_readmit_total_ = 0;
};

}  // namespace spillway::engine
