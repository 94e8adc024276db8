#include "engine/residency/weight_streamer.h"

#include <algorithm>
#include <atomic>
#include <cassert>
#include <cstring>

#include <fmt/format.h>

namespace spillway::engine {

namespace {
constexpr uint64_t kA = DirectReader::kAlignment;
double seconds_between(std::chrono::steady_clock::time_point a, std::chrono::steady_clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}
}  // namespace

Status read_stream_unit(const std::vector<const DirectReader*>& files, const StreamUnit& unit,
                        uint8_t* dst, const StreamerOptions& options) {
  // The unit's ranges as requests of at most chunk_bytes (aligned but for each range's
  // first), served by up to read_threads threads (the calling one among them).
  struct Part {
    int32_t file_index;
    uint64_t offset, size, dst;
  };
  std::vector<Part> parts;
  const uint64_t chunk = std::max<uint64_t>(options.chunk_bytes / kA * kA, kA);
  for (const UnitRange& r : unit.ranges) {
    assert(r.file_index >= 0 && r.file_index < static_cast<int32_t>(files.size()));
    assert(r.buffer_offset % kA == 0);
    assert(r.buffer_offset + DirectReader::span_bytes(r.file_offset, r.bytes) <=
           (unit.buffer_bytes + kA - 1) / kA * kA);
    const uint64_t start = r.file_offset / kA * kA, end = r.file_offset + r.bytes;
    for (uint64_t at = start; at < end;) {
      const uint64_t stop = end - at > chunk ? at + chunk : end;
      const uint64_t offset = at == start ? r.file_offset : at;
      parts.push_back({r.file_index, offset, stop - offset, r.buffer_offset + (at - start)});
      at = stop;
    }
  }
  std::atomic<size_t> next{0};
  std::mutex mu;
  Status failed;
  auto work = [&] {
    for (size_t i = next.fetch_add(1); i < parts.size(); i = next.fetch_add(1)) {
      const Part& p = parts[i];
      auto landed = files[p.file_index]->read(p.offset, p.size, dst + p.dst);
      if (!landed) {
        std::lock_guard lk(mu);
        if (failed.ok()) failed = landed.error();
        next.store(parts.size());
        return;
      }
    }
  };
  const auto helpers = static_cast<size_t>(std::max(options.read_threads, 1) - 1);
  std::vector<std::thread> threads;
  for (size_t t = 0; t < std::min(helpers, parts.size() > 0 ? parts.size() - 1 : 0); ++t) threads.emplace_back(work);
  work();
  for (std::thread& t : threads) t.join();
  return failed;
}

WeightStreamer::WeightStreamer(std::vector<const DirectReader*> files, int32_t slots,
                               uint64_t slot_bytes, UnitPrepare prepare, StreamerOptions options)
    : files_(std::move(files)),
      slot_bytes_(slot_bytes),
      prepare_(std::move(prepare)),
      options_(options),
      slots_(std::max(slots, 1)) {
  options_.read_threads = std::max(options_.read_threads, 1);
  options_.chunk_bytes = std::max<uint64_t>(options_.chunk_bytes / kA * kA, kA);
  for (Slot& s : slots_) {
    s.buffer = AlignedBytes::allocate(slot_bytes_);
    std::memset(s.buffer.data.get(), 0, slot_bytes_);
  }
  for (int32_t i = 0; i < options_.read_threads; ++i) readers_.emplace_back([this] { reader_loop(); });
}

WeightStreamer::~WeightStreamer() {
  {
    std::lock_guard lk(mu_);
    stop_ = true;
  }
  work_.notify_all();
  for (std::thread& t : readers_) t.join();
}

void WeightStreamer::restart_locked(size_t order_index) {
  ++generation_;
  for (int32_t s : issued_) {
    // A slot still loading is freed by a reader when its last request ends (its generation
    // no longer matches; its queued requests are skipped); the others are free now.
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

int32_t WeightStreamer::issued_position_locked(int32_t id) const {
  for (size_t i = 0; i < issued_.size(); ++i) {
    if (slots_[issued_[i]].unit_id == id) return static_cast<int32_t>(i);
  }
  return -1;
}

void WeightStreamer::issue_locked(int32_t slot_index, const StreamUnit* unit, size_t order_index) {
  Slot& slot = slots_[slot_index];
  assert(unit->buffer_bytes <= slot_bytes_);
  slot.unit = unit;
  slot.unit_id = unit->id;
  slot.order_index = order_index;
  slot.generation = generation_;
  slot.failed = false;
  slot.error.clear();
  slot.pending = 0;
  issued_.push_back(slot_index);
  const uint64_t chunk = options_.chunk_bytes;
  for (const UnitRange& r : unit->ranges) {
    const uint64_t start = r.file_offset / kA * kA;
    const uint64_t end = r.file_offset + r.bytes;
    for (uint64_t at = start; at < end; at = end - at > chunk ? at + chunk : end) {
      Request q;
      q.slot = slot_index;
      q.generation = generation_;
      q.file_index = r.file_index;
      q.offset = at == start ? r.file_offset : at;
      q.size = (end - at > chunk ? at + chunk : end) - q.offset;
      q.dst = r.buffer_offset + (at - start);
      q.useful = q.size;
      requests_.push_back(q);
      ++slot.pending;
    }
  }
  if (slot.pending == 0) {
    slot.state = SlotState::Ready;  // nothing to read
    ++stats_.units_read;
    unit_ready_.notify_all();
  } else {
    slot.state = SlotState::Loading;
  }
}

void WeightStreamer::fill_locked() {
  bool queued = false;
  for (size_t i = 0; i < slots_.size(); ++i) {
    if (slots_[i].state != SlotState::Free) continue;
    if (!demand_.empty()) {
      const StreamUnit* unit = demand_.front();
      demand_.pop_front();
      issue_locked(static_cast<int32_t>(i), unit, kDemanded);
    } else if (!order_.empty()) {
      const size_t index = next_to_read_;
      next_to_read_ = (next_to_read_ + 1) % order_.size();
      issue_locked(static_cast<int32_t>(i), order_[index], index);
    } else {
      break;
    }
    queued = true;
  }
  if (queued) work_.notify_all();
}

void WeightStreamer::demand(std::vector<const StreamUnit*> units) {
  std::lock_guard lk(mu_);
  // Demanded units already issued and not consumed are read again: simpler than keeping
  // them, and the caller demands what it needs once per step.
  restart_locked(cycle_resume_index_locked());
  demand_.clear();
  for (const StreamUnit* u : units) {
    assert(u->buffer_bytes <= slot_bytes_);
    demand_.push_back(u);
  }
  fill_locked();
}

void WeightStreamer::set_schedule(std::vector<const StreamUnit*> order) {
  std::lock_guard lk(mu_);
  for ([[maybe_unused]] const StreamUnit* u : order) assert(u->buffer_bytes <= slot_bytes_);
  order_ = std::move(order);
  demand_.clear();
  restart_locked(0);
  fill_locked();
}

void WeightStreamer::reader_loop() {
  std::unique_lock lk(mu_);
  while (true) {
    work_.wait(lk, [&] { return stop_ || !requests_.empty(); });
    if (stop_) return;
    const Request q = requests_.front();
    requests_.pop_front();
    Slot& slot = slots_[q.slot];
    // A restart discarded the unit, or an earlier request of it failed: skip the read.
    const bool skip = q.generation != generation_ || slot.failed;
    Status st;
    if (!skip) {
      if (in_flight_++ == 0) busy_since_ = Clock::now();
      lk.unlock();
      auto landed = files_[q.file_index]->read(q.offset, q.size, slot.buffer.data.get() + q.dst);
      if (!landed) st = landed.error();
      lk.lock();
      if (--in_flight_ == 0) stats_.read_seconds += seconds_between(busy_since_, Clock::now());
      if (st.ok()) {
        stats_.bytes_read += q.useful;
      } else if (!slot.failed) {
        slot.failed = true;
        slot.error = st.error().message;
      }
    }
    if (--slot.pending > 0) continue;
    // The unit's last request: prepare it, then hand it to the engine.
    if (slot.generation == generation_ && !slot.failed && prepare_) {
      lk.unlock();
      prepare_(*slot.unit, slot.buffer.data.get());
      lk.lock();
    }
    if (slot.generation != generation_) {
      slot.state = SlotState::Free;  // discarded by a restart while it loaded
      fill_locked();
      continue;
    }
    slot.state = slot.failed ? SlotState::Failed : SlotState::Ready;
    if (!slot.failed) ++stats_.units_read;
    unit_ready_.notify_all();
  }
}

Result<const uint8_t*> WeightStreamer::acquire(int32_t id) {
  const StreamUnit* failed_read = nullptr;
  bool demanded = false;
  Result<const uint8_t*> got = acquire_once(id, &failed_read, &demanded);
  if (got.ok() || failed_read == nullptr) return got;
  if (demanded) {
    // Read it again ahead of the rest of the demand, the demanded units already issued
    // after it included (the restart discards their reads).
    std::lock_guard lk(mu_);
    std::deque<const StreamUnit*> again{failed_read};
    for (int32_t s : issued_) {
      if (slots_[s].order_index == kDemanded) again.push_back(slots_[s].unit);
    }
    again.insert(again.end(), demand_.begin(), demand_.end());
    const size_t resume = cycle_resume_index_locked();
    demand_ = std::move(again);
    restart_locked(resume);
    fill_locked();
  }
  return acquire_once(id, &failed_read, &demanded);
}

Result<const uint8_t*> WeightStreamer::acquire_once(int32_t id, const StreamUnit** failed_read,
                                                    bool* failed_demanded) {
  std::unique_lock lk(mu_);
  const auto start = Clock::now();
  const int32_t at = issued_position_locked(id);
  const bool in_window = at == 0 || (at > 0 && slots_[issued_[at]].order_index != kDemanded);
  if (!in_window) {
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
        ++stats_.restarts;
      }
    } else {
      auto it = std::find_if(order_.begin(), order_.end(),
                             [&](const StreamUnit* u) { return u->id == id; });
      if (it == order_.end()) {
        return Error{fmt::format("weight streamer: unit {} is not in the streaming schedule", id)};
      }
      const auto index = static_cast<size_t>(it - order_.begin());
      demand_.clear();
      if (!issued_.empty() || next_to_read_ != index) {
        restart_locked(index);
        ++stats_.restarts;
      }
    }
    fill_locked();
    if (issued_position_locked(id) < 0) {
      // No slot to read it into, and none will free up while the engine holds them all
      // (slots still loading discarded units free themselves: wait for those).
      const bool all_held = std::all_of(slots_.begin(), slots_.end(),
                                        [](const Slot& s) { return s.state == SlotState::InUse; });
      if (all_held) {
        return Error{fmt::format("weight streamer: unit {} needs a staging slot but all {} are held", id,
                                 slots_.size())};
      }
    }
  }
  bool waited = false;
  int32_t pos = -1;
  unit_ready_.wait(lk, [&] {
    pos = issued_position_locked(id);
    const bool ready = pos >= 0 && (slots_[issued_[pos]].state == SlotState::Ready ||
                                    slots_[issued_[pos]].state == SlotState::Failed);
    waited |= !ready;
    return ready;
  });
  if (waited) stats_.stall_seconds += seconds_between(start, Clock::now());
  const int32_t s = issued_[pos];
  issued_.erase(issued_.begin() + pos);
  Slot& slot = slots_[s];
  if (slot.state == SlotState::Failed) {
    slot.state = SlotState::Free;
    *failed_read = slot.unit;
    *failed_demanded = slot.order_index == kDemanded;
    std::string message = std::move(slot.error);
    fill_locked();
    return Error{std::move(message)};
  }
  slot.state = SlotState::InUse;
  return static_cast<const uint8_t*>(slot.buffer.data.get());
}

void WeightStreamer::release(int32_t id) {
  std::lock_guard lk(mu_);
  for (Slot& slot : slots_) {
    if (slot.state == SlotState::InUse && slot.unit_id == id) {
      slot.state = SlotState::Free;
      break;
    }
  }
  fill_locked();
}

StreamerStats WeightStreamer::stats() const {
  std::lock_guard lk(mu_);
  StreamerStats s = stats_;
  // Reads in flight now: their busy stretch so far (read_seconds grows only when the
  // readers go idle, which a steady stream may not do before stats are read).
  if (in_flight_ > 0) s.read_seconds += seconds_between(busy_since_, Clock::now());
  return s;
}

}  // namespace spillway::engine
