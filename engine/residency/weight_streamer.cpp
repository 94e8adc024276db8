#include "engine/residency/weight_streamer.h"

#include <algorithm>
#include <cassert>
#include <chrono>

#include <fmt/format.h>

namespace spillway::engine {

namespace {
using Clock = std::chrono::steady_clock;
double seconds_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}
}  // namespace

Status read_stream_unit(const std::vector<const DirectReader*>& files, const StreamUnit& unit,
                        uint8_t* dst) {
  for (const UnitRange& r : unit.ranges) {
    assert(r.file_index >= 0 && r.file_index < static_cast<int32_t>(files.size()));
    assert(r.buffer_offset % DirectReader::kAlignment == 0);
    assert(r.buffer_offset + DirectReader::span_bytes(r.file_offset, r.bytes) <=
           (unit.buffer_bytes + DirectReader::kAlignment - 1) / DirectReader::kAlignment *
               DirectReader::kAlignment);
    auto landed = files[r.file_index]->read(r.file_offset, r.bytes, dst + r.buffer_offset);
    if (!landed) return landed.error();
  }
  return {};
}

WeightStreamer::WeightStreamer(std::vector<const DirectReader*> files, int32_t slots,
                               uint64_t slot_bytes, UnitPrepare prepare)
    : files_(std::move(files)),
      slot_bytes_(slot_bytes),
      prepare_(std::move(prepare)),
      slots_(std::max(slots, 1)) {
  for (Slot& s : slots_) s.buffer = AlignedBytes::allocate(slot_bytes_);
  io_thread_ = std::thread([this] { io_loop(); });
}

WeightStreamer::~WeightStreamer() {
  {
    std::lock_guard lk(mu_);
    stop_ = true;
  }
  io_wake_.notify_all();
  io_thread_.join();
}

void WeightStreamer::restart_locked(size_t order_index) {
  ++generation_;
  for (int32_t s : issued_) {
    // A slot still loading is freed by the I/O thread when its read ends (its generation
    // no longer matches); the others are free now.
    if (slots_[s].state != SlotState::Loading) slots_[s].state = SlotState::Free;
  }
  issued_.clear();
  next_to_read_ = order_.empty() ? 0 : order_index % order_.size();
}

size_t WeightStreamer::cycle_resume_index_locked() const {
  for (int32_t s : issued_) {
    if (slots_[s].order_index != kDemanded) return slots_[s].order_index;
  }
  return next_to_read_;
}

void WeightStreamer::demand(std::vector<const StreamUnit*> units) {
  {
    std::lock_guard lk(mu_);
    // Demanded units already issued and not consumed are read again: simpler than keeping
    // them, and the caller demands what it needs once per step.
    restart_locked(cycle_resume_index_locked());
    demand_.clear();
    for (const StreamUnit* u : units) {
      assert(u->buffer_bytes <= slot_bytes_);
      demand_.push_back(u);
    }
  }
  io_wake_.notify_all();
}

void WeightStreamer::set_schedule(std::vector<const StreamUnit*> order) {
  {
    std::lock_guard lk(mu_);
    for ([[maybe_unused]] const StreamUnit* u : order) assert(u->buffer_bytes <= slot_bytes_);
    order_ = std::move(order);
    demand_.clear();
    restart_locked(0);
  }
  io_wake_.notify_all();
}

void WeightStreamer::io_loop() {
  std::unique_lock lk(mu_);
  while (true) {
    int32_t slot_index = -1;
    io_wake_.wait(lk, [&] {
      if (stop_) return true;
      if (order_.empty() && demand_.empty()) return false;
      for (size_t i = 0; i < slots_.size(); ++i) {
        if (slots_[i].state == SlotState::Free) {
          slot_index = static_cast<int32_t>(i);
          return true;
        }
      }
      return false;
    });
    if (stop_) return;
    Slot& slot = slots_[slot_index];
    const StreamUnit* unit;
    if (!demand_.empty()) {
      unit = demand_.front();
      demand_.pop_front();
      slot.order_index = kDemanded;
      slot.unit = unit;
    } else {
      unit = order_[next_to_read_];
      slot.order_index = next_to_read_;
      slot.unit = unit;
      next_to_read_ = (next_to_read_ + 1) % order_.size();
    }
    slot.state = SlotState::Loading;
    slot.unit_id = unit->id;
    slot.generation = generation_;
    slot.error.clear();
    issued_.push_back(slot_index);

    lk.unlock();
    const auto start = Clock::now();
    Status st = read_stream_unit(files_, *unit, slot.buffer.data.get());
    const double seconds = seconds_between(start, Clock::now());
    if (st.ok() && prepare_) prepare_(*unit, slot.buffer.data.get());
    lk.lock();

    stats_.read_seconds += seconds;
    if (st.ok()) {
      for (const UnitRange& r : unit->ranges) stats_.bytes_read += r.bytes;
      ++stats_.units_read;
    }
    if (slot.generation != generation_) {
      slot.state = SlotState::Free;  // discarded by a restart while it loaded
      continue;
    }
    slot.state = st.ok() ? SlotState::Ready : SlotState::Failed;
    if (!st.ok()) slot.error = st.error().message;
    unit_ready_.notify_all();
  }
}

Result<const uint8_t*> WeightStreamer::acquire(int32_t id) {
  std::unique_lock lk(mu_);
  const auto start = Clock::now();
  if (issued_.empty() || slots_[issued_.front()].unit_id != id) {
    // The demanded units not consumed yet: issued ones first, then those not read yet.
    std::deque<const StreamUnit*> pending;
    for (int32_t s : issued_) {
      if (slots_[s].order_index == kDemanded) pending.push_back(slots_[s].unit);
    }
    pending.insert(pending.end(), demand_.begin(), demand_.end());
    auto demanded = std::find_if(pending.begin(), pending.end(),
                                 [&](const StreamUnit* u) { return u->id == id; });
    if (demanded != pending.end()) {
      if (!issued_.empty() || demanded != pending.begin()) {
        const size_t resume = cycle_resume_index_locked();
        demand_.assign(demanded, pending.end());
        restart_locked(resume);
      }
    } else {
      auto it = std::find_if(order_.begin(), order_.end(),
                             [&](const StreamUnit* u) { return u->id == id; });
      if (it == order_.end()) {
        return Error{fmt::format("weight streamer: unit {} is not in the streaming schedule", id)};
      }
      const auto index = static_cast<size_t>(it - order_.begin());
      demand_.clear();
      if (!issued_.empty() || next_to_read_ != index) restart_locked(index);
    }
    io_wake_.notify_all();
  }
  bool waited = false;
  unit_ready_.wait(lk, [&] {
    const bool ready = !issued_.empty() && (slots_[issued_.front()].state == SlotState::Ready ||
                                            slots_[issued_.front()].state == SlotState::Failed);
    waited |= !ready;
    return ready;
  });
  if (waited) stats_.stall_seconds += seconds_between(start, Clock::now());
  const int32_t s = issued_.front();
  issued_.pop_front();
  Slot& slot = slots_[s];
  assert(slot.unit_id == id);
  if (slot.state == SlotState::Failed) {
    slot.state = SlotState::Free;
    std::string message = std::move(slot.error);
    lk.unlock();
    io_wake_.notify_all();
    return Error{std::move(message)};
  }
  slot.state = SlotState::InUse;
  return static_cast<const uint8_t*>(slot.buffer.data.get());
}

void WeightStreamer::release(int32_t id) {
  {
    std::lock_guard lk(mu_);
    for (Slot& slot : slots_) {
      if (slot.state == SlotState::InUse && slot.unit_id == id) {
        slot.state = SlotState::Free;
        break;
      }
    }
  }
  io_wake_.notify_all();
}

StreamerStats WeightStreamer::stats() const {
  std::lock_guard lk(mu_);
  return stats_;
}

}  // namespace spillway::engine
