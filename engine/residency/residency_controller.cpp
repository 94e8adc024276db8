#include "engine/residency/residency_controller.h"

#include <algorithm>
#include <cmath>

namespace spillway::engine {

ResidencyController::ResidencyController(WeightResidency& residency, const MemorySource& source,
                                         PressurePolicy policy, Clock clock)
    : residency_(residency),
      source_(source),
      policy_(policy),
      clock_(clock ? std::move(clock) : Clock([] { return std::chrono::steady_clock::now(); })) {
  last_check_ = clock_();
  calm_since_ = last_check_;
  started_ = last_check_;
}

int64_t PressurePolicy::floor_for(int64_t limit_bytes) const {
  if (floor_fraction_of_limit <= 0 || limit_bytes <= 0) return floor_bytes;
  return std::min(floor_bytes, static_cast<int64_t>(floor_fraction_of_limit * static_cast<double>(limit_bytes)));
}

int64_t PressurePolicy::readmit_margin_for(int64_t limit_bytes) const {
  if (readmit_margin_fraction_of_limit <= 0 || limit_bytes <= 0) return readmit_margin_bytes;
  return std::min(readmit_margin_bytes,
                  static_cast<int64_t>(readmit_margin_fraction_of_limit * static_cast<double>(limit_bytes)));
}

PressurePolicy default_pressure_policy() {
  PressurePolicy p;
  p.floor_fraction_of_limit = 0.10;
  p.readmit_margin_fraction_of_limit = 0.10;
  p.confirm_checks = 2;
  return p;
}

const char* ResidencyController::pressure_reason(const MemoryReading& r) {
  const int64_t floor = policy_.floor_for(r.limit_bytes);
  const bool limit_lowered = last_limit_ > 0 && r.limit_bytes < last_limit_;
  last_limit_ = r.limit_bytes;
  if (r.available_bytes < floor) {
    ++below_floor_checks_;
  } else {
    below_floor_checks_ = 0;
  }
  if (r.pressure_some_avg10 > policy_.psi_threshold) return "PSI";
  if (below_floor_checks_ == 0) return nullptr;
  if (r.available_bytes < floor / 2) return "below half the floor";
  if (limit_lowered) return "limit lowered";
  if (below_floor_checks_ >= std::max(policy_.confirm_checks, 1)) return "below the floor";
  return nullptr;
}

void ResidencyController::record(const ResidencyAction& a, const MemoryReading& r, const char* reason,
                                 std::chrono::steady_clock::time_point now) {
  if (a.shed + a.readmitted + a.expert_slots_shed + a.expert_slots_readmitted == 0) return;
  if (events_.size() >= kMaxEvents) return;
  ResidencyEvent e;
  e.seconds = std::chrono::duration<double>(now - started_).count();
  e.step = steps_ - 1;
  e.layers_shed = a.shed;
  e.layers_readmitted = a.readmitted;
  e.expert_slots_shed = a.expert_slots_shed;
  e.expert_slots_readmitted = a.expert_slots_readmitted;
  e.resident_layers_after = residency_.resident_layers();
  e.available_bytes = r.available_bytes;
  e.floor_bytes = policy_.floor_for(r.limit_bytes);
  e.pressure_some_avg10 = r.pressure_some_avg10;
  e.reason = reason;
  events_.push_back(e);
}

int32_t ResidencyController::shed(const MemoryReading& r) {
  const int32_t resident = residency_.resident_layers();
  if (resident == 0) return 0;
  auto n = static_cast<int32_t>(std::ceil(resident * policy_.shed_fraction));
  // Far below the floor (e.g. the limit was lowered): shed enough to get back above it.
  const int64_t deficit = policy_.floor_for(r.limit_bytes) - r.available_bytes;
  if (deficit > 0) {
    int64_t layer = 1;
    for (int32_t l = 0; l < residency_.n_layers(); ++l) layer = std::max(layer, residency_.layer_bytes(l));
    n = std::max<int32_t>(n, static_cast<int32_t>((deficit + layer - 1) / layer));
  }
  // Starting to stream allocates the staging slots: shed enough layers to free more than
  // they take.
  if (residency_.staging_bytes() == 0) {
    int64_t smallest = INT64_MAX;
    for (int32_t l = 0; l < residency_.n_layers(); ++l) {
      if (residency_.is_resident(l)) smallest = std::min(smallest, residency_.layer_bytes(l));
    }
    smallest = std::max<int64_t>(smallest, 1);
    const int64_t staging = residency_.staging_bytes_when_streaming();
    n = std::max(n, static_cast<int32_t>(staging / smallest) + 1);
  }
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
    if (r.available_bytes < policy_.floor_for(r.limit_bytes) + policy_.readmit_margin_for(r.limit_bytes) + bytes) {
      return 0;
    }
    if (residency_.resident_weight_bytes() + bytes > policy_.max_resident_bytes) return 0;
    return residency_.make_resident(l).ok() ? 1 : 0;
  }
  return 0;
}

ResidencyAction ResidencyController::on_step() {
  ResidencyAction action;
  const auto now = clock_();
  ++steps_;
  ++steps_since_check_;
  const double since = std::chrono::duration<double>(now - last_check_).count();
  if (steps_since_check_ < policy_.check_every_steps && since < policy_.check_every_seconds) {
    return action;
  }
  steps_since_check_ = 0;
  last_check_ = now;
  action.checked = true;
  last_ = source_.read();
  const int64_t floor = policy_.floor_for(last_.limit_bytes);
  const char* reason = pressure_reason(last_);
  if (reason) {
    calm_ = false;
    if (const int32_t can = residency_.expert_cache_shrinkable_slots(); can > 0) {
      auto n = static_cast<int32_t>(std::ceil(can * policy_.shed_fraction));
      const int64_t deficit = floor - last_.available_bytes;
      const int64_t slot = std::max<int64_t>(residency_.expert_slot_bytes(), 1);
      if (deficit > 0) n = std::max<int32_t>(n, static_cast<int32_t>((deficit + slot - 1) / slot));
      action.expert_slots_shed = residency_.shrink_expert_cache(std::max(n, 1));
      expert_slots_shed_total_ += action.expert_slots_shed;
      record(action, last_, reason, now);
      return action;
    }
    action.shed = shed(last_);
    shed_total_ += action.shed;
    record(action, last_, reason, now);
    return action;
  }
  if (below_floor_checks_ > 0) {
    calm_ = false;  // a dip not yet confirmed: neither shed nor re-admit
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
      if (last_.available_bytes >= floor + policy_.readmit_margin_for(last_.limit_bytes) + bytes) {
        action.expert_slots_readmitted = residency_.grow_expert_cache(n);
        expert_slots_readmit_total_ += action.expert_slots_readmitted;
      }
    }
    record(action, last_, "calm", now);
  }
  return action;
}

}  // namespace spillway::engine
