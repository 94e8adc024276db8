// Streams residency units (the large matrices of streamed decoder layers, in the order the
// forward consumes them; demanded units ahead of that) from disk into a ring of staging
// slots, ahead of the compute that needs them.
//
// The engine consumes streamed units in a fixed cyclic order (every forward step walks the
// streamed layers' matrices in consumption order, then the next step starts again), so the
// streamer simply reads that order ahead into every free slot: while one matrix computes,
// the next `slots - held` load, and the first ones of the next step load while the last
// ones of this step compute and sampling runs. Each unit is read once per pass of the cycle,
// i.e. once per forward step whatever the number of tokens in the step.
//
// Reads: every unit is cut into aligned requests of at most chunk_bytes, queued in unit
// order and served by read_threads threads, so several large requests are in flight at
// once (across unit boundaries too); the device's queue stays busy while compute runs.
//
// In front of the cycle sits a demand queue: units the engine will need next in an order
// only it knows. demand() puts them ahead of the cyclic prefetch, which then resumes where
// it was.
//
// Thread contract: set_schedule(), demand(), acquire() and release() are called by one
// thread (the engine thread); the reader threads are internal. acquire() blocks until the
// unit is loaded. Reads go through DirectReader, so streamed bytes do not pile up in the
// page cache.
#pragma once

#include <chrono>
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
  int32_t id = 0;                // the caller's name for it (e.g. an index into its pieces)
  std::vector<UnitRange> ranges;
  uint64_t buffer_bytes = 0;     // staging bytes this unit needs
};


struct StreamerStats {
  uint64_t bytes_read = 0;       // cumulative file bytes of the units' ranges
  double read_seconds = 0;       // cumulative wall time with at least one read in flight
  double stall_seconds = 0;      // cumulative engine-thread time blocked in acquire()
  uint64_t units_read = 0;
  uint64_t restarts = 0;         // prefetched units discarded by an out-of-order acquire
};

// Runs on a reader thread after a unit was read into `buffer` (e.g. rearranging its weights
// into the layout the kernels read), before the engine can acquire it. May run on several
// reader threads at once for different units: must only touch the buffer and state no
// other thread uses (thread-local scratch).
using UnitPrepare = std::function<void(const StreamUnit& unit, uint8_t* buffer)>;

struct StreamerOptions {
  int32_t read_threads = 4;           // requests in flight at most
  uint64_t chunk_bytes = 2ull << 20;  // largest request (a multiple of kAlignment)
};

// Reads every range of `unit` into dst (DirectReader::kAlignment-aligned, unit.buffer_bytes
// long) in requests of at most options.chunk_bytes on up to options.read_threads threads
// (the caller's among them); returns when all landed, or the first error. Used for loading
// resident units.
// The default: one request per range, on the calling thread.
inline constexpr StreamerOptions kOneRequestPerRange{.read_threads = 1, .chunk_bytes = ~uint64_t{0}};
Status read_stream_unit(const std::vector<const DirectReader*>& files, const StreamUnit& unit,
                        uint8_t* dst, const StreamerOptions& options = kOneRequestPerRange);

class WeightStreamer {
 public:
  // files: indexed by UnitRange::file_index; must outlive the streamer. slots >= 1 buffers of
  // slot_bytes each are allocated and made resident (written once) up front: the first step
  // fills every slot anyway, and memory the residency plan counts on must be the process's
  // before it serves, not taken at the first step by whoever allocated in between (a cgroup
  // peer that took that room would make the first step an OOM kill). prepare: optional, see
  // UnitPrepare.
  WeightStreamer(std::vector<const DirectReader*> files, int32_t slots, uint64_t slot_bytes,
                 UnitPrepare prepare = {}, StreamerOptions options = {});
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

  // The staging buffer holding unit `id`, once loaded. A cyclic unit already issued (loading
  // or loaded, inside the read-ahead window) is handed out even out of the expected order,
  // without disturbing the stream (the units before it stay for their own acquire).
  // Otherwise, if `id` is not the next unit expected (the next demanded one, else the
  // cycle's next), the prefetched units are discarded and streaming restarts at `id` (a
  // demanded id: the demand queue from it on; a cyclic id: the pending demand is dropped
  // and the cycle restarts there).
  // A unit whose read failed is read once more before the error is returned: a prefetch
  // that met a transient fault (e.g. read ahead for a step that then failed elsewhere) does
  // not fail the next step. An Error when the read failed twice (it names the file), or
  // when every slot is held by the engine (acquire more units at once than there are slots).
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
    int32_t pending = 0;     // requests not finished
    bool failed = false;
    std::string error;
  };
  struct Request {  // one aligned read of part of a unit's range
    int32_t slot = 0;
    uint64_t generation = 0;
    int32_t file_index = 0;
    uint64_t offset = 0;   // file offset (aligned, except a range's first request keeps it)
    uint64_t size = 0;
    uint64_t dst = 0;      // offset in the slot's buffer of the aligned-down offset
    uint64_t useful = 0;   // bytes of the unit's range inside this request
  };
  static constexpr size_t kDemanded = static_cast<size_t>(-1);
  using Clock = std::chrono::steady_clock;

  void reader_loop();
  // Issues the next units into every free slot (queues their requests); caller holds mu_.
  void fill_locked();
  // One attempt of acquire(); *failed_read: the unit whose read failed (else left alone).
  Result<const uint8_t*> acquire_once(int32_t id, const StreamUnit** failed_read, bool* failed_demanded);
  void issue_locked(int32_t slot_index, const StreamUnit* unit, size_t order_index);
  void restart_locked(size_t order_index);  // caller holds mu_
  // Where the cycle resumes after a restart: the first issued cyclic unit not consumed yet.
  size_t cycle_resume_index_locked() const;
  // Position in issued_ of the first slot holding `id`, or -1.
  int32_t issued_position_locked(int32_t id) const;

  std::vector<const DirectReader*> files_;
  uint64_t slot_bytes_;
  UnitPrepare prepare_;
  StreamerOptions options_;
  std::vector<Slot> slots_;

  mutable std::mutex mu_;
  std::condition_variable work_;        // requests queued, or stop
  std::condition_variable unit_ready_;  // a slot finished loading
  std::vector<const StreamUnit*> order_;
  size_t next_to_read_ = 0;             // index into order_
  std::deque<const StreamUnit*> demand_;  // read before order_
  std::deque<int32_t> issued_;          // slot indices in consumption order
  std::deque<Request> requests_;        // in issue order
  uint64_t generation_ = 0;             // bumped by every restart
  int32_t in_flight_ = 0;               // requests being read
  Clock::time_point busy_since_;
  bool stop_ = false;
  StreamerStats stats_;
  std::vector<std::thread> readers_;
};

}  // namespace spillway::engine
