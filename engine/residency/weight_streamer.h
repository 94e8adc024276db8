// Streams residency units (decoder layers; later MoE experts) from disk into a small ring
// of staging buffers on an I/O thread, ahead of the compute that needs them.
//
// The engine consumes streamed units in a fixed cyclic order (every forward step walks the
// streamed layers in index order, then the next step starts again), so the I/O thread
// simply reads that order ahead into every free slot: while layer i computes, the next
// `slots - 1` streamed layers load, and the first ones of the next step load while the
// last ones of this step compute and sampling runs. Each unit is read once per pass of
// the cycle, i.e. once per forward step whatever the number of tokens in the step.
//
// In front of the cycle sits a demand queue: units the engine will need next in an order
// only it knows (MoE experts chosen by the router). demand() puts them ahead of the
// cyclic prefetch, which then resumes where it was.
//
// Thread contract: set_schedule(), demand(), acquire() and release() are called by one
// thread (the engine thread); the I/O thread is internal. acquire() blocks until the unit is loaded.
// Reads go through DirectReader, so streamed bytes do not pile up in the page cache.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/result.h"
#include "engine/platform/direct_reader.h"

namespace spillway::engine {

// One file range of a unit. Its aligned span is read to buffer_offset of the unit's staging
// buffer, so its first byte lands at buffer_offset + file_offset % DirectReader::kAlignment.
// buffer_offset must be a multiple of DirectReader::kAlignment, and the span
// (DirectReader::span_bytes) must fit before the next range.
struct UnitRange {
  int32_t file_index = 0;
  uint64_t file_offset = 0;
  uint64_t bytes = 0;
  uint64_t buffer_offset = 0;
};

struct StreamUnit {
  int32_t id = 0;                // the caller's name for it (layer index)
  std::vector<UnitRange> ranges;
  uint64_t buffer_bytes = 0;     // staging bytes this unit needs
};

// Reads every range of `unit` into dst (DirectReader::kAlignment-aligned, unit.buffer_bytes
// long). Used by the streamer's I/O thread and for loading resident units.
Status read_stream_unit(const std::vector<const DirectReader*>& files, const StreamUnit& unit,
                        uint8_t* dst);

struct StreamerStats {
  uint64_t bytes_read = 0;       // cumulative
  double read_seconds = 0;       // cumulative I/O thread time inside reads
  double stall_seconds = 0;      // cumulative engine-thread time blocked in acquire()
  uint64_t units_read = 0;
};

// Runs on the I/O thread after a unit was read into `buffer` (e.g. rearranging its weights
// into the layout the kernels read), before the engine can acquire it. Must only touch the
// buffer and state no other thread uses.
using UnitPrepare = std::function<void(const StreamUnit& unit, uint8_t* buffer)>;

class WeightStreamer {
 public:
  // files: indexed by UnitRange::file_index; must outlive the streamer. slots >= 1 buffers of
  // slot_bytes each are allocated up front. prepare: optional, see UnitPrepare.
  WeightStreamer(std::vector<const DirectReader*> files, int32_t slots, uint64_t slot_bytes,
                 UnitPrepare prepare = {});
  ~WeightStreamer();
  WeightStreamer(const WeightStreamer&) = delete;
  WeightStreamer& operator=(const WeightStreamer&) = delete;

  // The cyclic order to stream (empty: nothing). Units must outlive their use here and fit
  // a slot. Discards what was prefetched; reading restarts at order[0].
  void set_schedule(std::vector<const StreamUnit*> order);

  // Reads `units` next, in this order, ahead of the cycle (each must fit a slot, outlive its
  // use, and have an id no unit of the cycle has). Cyclic units prefetched but not yet
  // acquired are discarded and read again after the demanded ones.
  void demand(std::vector<const StreamUnit*> units);

  // The staging buffer holding unit `id`, once loaded. If `id` is not the next unit expected
  // (the next demanded one, else the cycle's next), the prefetched units are discarded and
  // streaming restarts at `id` (a demanded id: the demand queue from it on; a cyclic id:
  // the pending demand is dropped and the cycle restarts there).
  // An Error when the read failed (it names the file).
  Result<const uint8_t*> acquire(int32_t id);
  // The engine is done with the unit acquired last under this id: its slot is refilled.
  void release(int32_t id);

  StreamerStats stats() const;
  int32_t slots() const { return static_cast<int32_t>(slots_.size()); }
  uint64_t slot_bytes() const { return slot_bytes_; }

 private:
  enum class SlotState { Free, Loading, Ready, Failed, InUse };
  struct Slot {
    AlignedBytes buffer;
    SlotState state = SlotState::Free;
    int32_t unit_id = -1;
    uint64_t generation = 0;
    const StreamUnit* unit = nullptr;
    size_t order_index = 0;  // its index in order_; kDemanded for a demanded unit
    std::string error;
  };
  static constexpr size_t kDemanded = static_cast<size_t>(-1);

  void io_loop();
  void restart_locked(size_t order_index);  // caller holds mu_
  // Where the cycle resumes after a restart: the first issued cyclic unit not consumed yet.
  size_t cycle_resume_index_locked() const;

  std::vector<const DirectReader*> files_;
  uint64_t slot_bytes_;
  UnitPrepare prepare_;
  std::vector<Slot> slots_;

  mutable std::mutex mu_;
  std::condition_variable io_wake_;     // a slot became free, the schedule changed, or stop
  std::condition_variable unit_ready_;  // a slot finished loading
  std::vector<const StreamUnit*> order_;
  size_t next_to_read_ = 0;             // index into order_
  std::deque<const StreamUnit*> demand_;  // read before order_
  std::deque<int32_t> issued_;          // slot indices in consumption order
  uint64_t generation_ = 0;             // bumped by every restart
  bool stop_ = false;
  StreamerStats stats_;
  std::thread io_thread_;
};

}  // namespace spillway::engine
