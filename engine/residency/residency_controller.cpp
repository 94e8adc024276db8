#include "engine/residency/residency_controller.h"

#include <algorithm>
#include <cmath>

namespace spillway::engine {

ResidencyController::ResidencyController(WeightResidency& residency, const MemorySource& source,
                                         PressurePolicy policy, int32_t prefetch_depth,
                                         Clock clock)
    : residency_(residency),
      source_(source),
      policy_(policy),
      prefetch_depth_(prefetch_depth),
      clock_(clock ? std::move(clock) : Clock([] { return std::chrono::steady_clock::now(); })) {
  last_check_ = clock_();
  calm_since_ = last_check_;
}

bool ResidencyController::under_pressure(const MemoryReading& r) const {
  return r.available_bytes < policy_.floor_bytes || r.pressure_some_avg10 > policy_.psi_threshold;
}

int32_t ResidencyController::shed(const MemoryReading& r) {
  const int32_t resident = residency_.resident_layers();
  if (resident == 0) return 0;
  auto n = static_cast<int32_t>(std::ceil(resident * policy_.shed_fraction));
  // Far below the floor (e.g. the limit was lowered): shed enough to get back above it.
  const int64_t deficit = policy_.floor_bytes - r.available_bytes;
  if (deficit > 0) {
    int64_t layer = 1;
    for (int32_t l = 0; l < residency_.n_layers(); ++l) layer = std::max(layer, residency_.layer_bytes(l));
    n = std::max<int32_t>(n, static_cast<int32_t>((deficit + layer - 1) / layer));
  }
  // Starting to stream allocates prefetch_depth + 1 staging buffers.
  if (residency_.staging_bytes() == 0) n = std::max(n, prefetch_depth_ + 2);
  n = std::min(n, resident);
  int32_t done = 0;
  for (int32_t l = residency_.n_layers() - 1; l >= 0 && done < n; --l) {
    if (!residency_.is_resident(l)) continue;
    residency_.make_streamed(l);
    ++done;
  }
  return done;
}

int32_t ResidencyController::readmit(const MemoryReading& r) {
  for (int32_t l = 0; l < residency_.n_layers(); ++l) {
    if (residency_.is_resident(l)) continue;
    const int64_t bytes = residency_.layer_bytes(l);
    if (r.available_bytes < policy_.floor_bytes + policy_.readmit_margin_bytes + bytes) return 0;
    if (residency_.resident_weight_bytes() + bytes > policy_.max_resident_bytes) return 0;
    return residency_.make_resident(l).ok() ? 1 : 0;
  }
  return 0;
}

ResidencyAction ResidencyController::on_step() {
  ResidencyAction action;
  const auto now = clock_();
  ++steps_since_check_;
  const double since = std::chrono::duration<double>(now - last_check_).count();
  if (steps_since_check_ < policy_.check_every_steps && since < policy_.check_every_seconds) {
    return action;
  }
  steps_since_check_ = 0;
  last_check_ = now;
  action.checked = true;
  last_ = source_.read();
  if (under_pressure(last_)) {
    calm_ = false;
    if (const int32_t can = residency_.expert_cache_shrinkable_slots(); can > 0) {
      auto n = static_cast<int32_t>(std::ceil(can * policy_.shed_fraction));
      const int64_t deficit = policy_.floor_bytes - last_.available_bytes;
      const int64_t slot = std::max<int64_t>(residency_.expert_slot_bytes(), 1);
      if (deficit > 0) n = std::max<int32_t>(n, static_cast<int32_t>((deficit + slot - 1) / slot));
      action.expert_slots_shed = residency_.shrink_expert_cache(std::max(n, 1));
      expert_slots_shed_total_ += action.expert_slots_shed;
      return action;
    }
    action.shed = shed(last_);
    shed_total_ += action.shed;
    return action;
  }
  if (!calm_) {
    calm_ = true;
    calm_since_ = now;
  }
  if (std::chrono::duration<double>(now - calm_since_).count() >= policy_.readmit_after_seconds) {
    action.readmitted = readmit(last_);
    readmit_total_ += action.readmitted;
    const int32_t missing = residency_.expert_cache_missing_slots();
    if (action.readmitted == 0 && missing > 0) {
      const int32_t n = std::max<int32_t>(1, static_cast<int32_t>(std::ceil(missing * 0.25)));
      const int64_t bytes = n * residency_.expert_slot_bytes();
      if (last_.available_bytes >= policy_.floor_bytes + policy_.readmit_margin_bytes + bytes) {
        action.expert_slots_readmitted = residency_.grow_expert_cache(n);
        expert_slots_readmit_total_ += action.expert_slots_readmitted;
      }
    }
  }
  return action;
}

}  // namespace spillway::engine
