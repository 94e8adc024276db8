// Adapts the resident set to memory pressure, between forward steps (DESIGN.md §1).
//
// Every `check_every_steps` steps or `check_every_seconds`, whichever comes first, it reads
// the MemorySource. Under pressure — available memory below the floor, or PSI "some avg10"
// above its threshold — it sheds 25% of the resident layers, highest index first (more
// when available memory is far below the floor, e.g. after the cgroup limit was lowered at
// run time: enough layers to get back above it). When pressure has stayed low for
// `readmit_after_seconds` and there is room for a layer plus a margin, it re-admits one
// streamed layer per check, lowest index first, never beyond `max_resident_bytes`.
// The floor and the re-admit margin may scale with the limit (floor_fraction_of_limit),
// so that a small cgroup is not "under pressure" by a floor meant for a large machine.
// Hysteresis (issue #21): a reading just under the floor (between half the floor and the
// floor) sheds only when `confirm_checks` consecutive checks saw it, so one dip from the
// run's own transient use does not shed a plan the budget allows; PSI over its threshold,
// a reading under half the floor or a lowered limit shed at once. The plan keeps the floor
// out of the auto budget (residency_setup.cpp), so its steady state sits above it.
// The first shed also allocates the streaming buffers (WeightResidency's staging slots), so
// it sheds at least the layers they take + 1: shedding fewer would use more memory, not less.
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
#include <vector>

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
  // > 0: the floor is min(floor_bytes, this x the reading's limit), the re-admit margin
  // min(readmit_margin_bytes, this x the limit); 0: the fixed byte values.
  double floor_fraction_of_limit = 0;
  double readmit_margin_fraction_of_limit = 0;
  // Consecutive checks below the floor (but above half of it) before shedding; 1: at once.
  int32_t confirm_checks = 1;

  // The floor and margin in effect for a reading with this limit (bytes; limit <= 0:
  // unknown, the fixed values).
  int64_t floor_for(int64_t limit_bytes) const;
  int64_t readmit_margin_for(int64_t limit_bytes) const;
};

// What `serve`, `run` and `bench` use: floor min(300 MiB, 10% of the limit), re-admit margin
// min(256 MiB, 10% of the limit), a mild dip confirmed on 2 checks.
PressurePolicy default_pressure_policy();

// One shed or re-admission, for logs and `bench` (seconds since the controller started).
struct ResidencyEvent {
  double seconds = 0;
  int64_t step = 0;  // on_step() calls before this one
  int32_t layers_shed = 0;
  int32_t layers_readmitted = 0;
  int32_t expert_slots_shed = 0;
  int32_t expert_slots_readmitted = 0;
  int32_t resident_layers_after = 0;
  int64_t available_bytes = 0;
  int64_t floor_bytes = 0;
  double pressure_some_avg10 = 0;
  const char* reason = "";  // "PSI", "below half the floor", "limit lowered", "below the floor", "calm"
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
                      PressurePolicy policy, Clock clock = {});

  // Call after every forward step.
  ResidencyAction on_step();

  const MemoryReading& last_reading() const { return last_; }
  int64_t shed_total() const { return shed_total_; }
  int64_t readmit_total() const { return readmit_total_; }
  int64_t expert_slots_shed_total() const { return expert_slots_shed_total_; }
  int64_t expert_slots_readmit_total() const { return expert_slots_readmit_total_; }
  // The first kMaxEvents sheds and re-admissions, in order.
  static constexpr size_t kMaxEvents = 256;
  const std::vector<ResidencyEvent>& events() const { return events_; }
  const PressurePolicy& policy() const { return policy_; }

 private:
  // Why this reading is pressure (nullptr: it is not, yet); counts confirmations.
  const char* pressure_reason(const MemoryReading& r);
  void record(const ResidencyAction& a, const MemoryReading& r, const char* reason,
              std::chrono::steady_clock::time_point now);
  int32_t shed(const MemoryReading& r);
  int32_t readmit(const MemoryReading& r);

  WeightResidency& residency_;
  const MemorySource& source_;
  PressurePolicy policy_;
  Clock clock_;
  int32_t steps_since_check_ = 0;
  int64_t steps_ = 0;
  int32_t below_floor_checks_ = 0;
  int64_t last_limit_ = 0;
  std::chrono::steady_clock::time_point started_;
  std::vector<ResidencyEvent> events_;
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
