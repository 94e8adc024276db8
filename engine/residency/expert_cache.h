// The RAM tier of routed MoE experts (issue #16, "Expert tier"): a fixed number of
// equal-sized slots, each holding one expert ({layer, expert}: its gate, up and down
// matrices, read from the model file and retiled like a resident layer). The forward asks
// for the experts one MoE layer's tokens route to (acquire); hits are served from their
// slots, misses are read into free or evicted slots by a pool of reader threads in parallel
// (pread through DirectReader: O_DIRECT where the filesystem allows it), all of a layer's
// misses at once. The experts of the layer being computed stay pinned until release.
//
// Policy (ExpertCachePolicy): least recently used, with a per-layer floor of 2 x top-k slots
// (a layer holding no more than its floor loses slots only to itself) when the cache has
// room for every layer's floor, otherwise plain LRU; or least frequently used. Any slot count >= max_pin() works: callers with more
// distinct experts than that run them in waves (release between waves).
//
// The slots hold the same bytes the file holds, in the layout a resident layer would use,
// so outputs are bit-identical to the mapped model whatever the cache size.
//
// Thread contract: acquire/release/stats from one thread (the engine thread); the reader
// threads are internal.
#pragma once

#include <condition_variable>
#include <deque>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <thread>
#include <vector>

#include "common/result.h"
#include "engine/model/model.h"
#include "engine/platform/direct_reader.h"
#include "engine/residency/expert_tier_histogram.h"
#include "engine/residency/weight_streamer.h"

namespace spillway::engine {

// Which cached expert a miss replaces (tools/expert_trace.h replays both offline).
enum class ExpertCachePolicy {
  LruFloor,  // least recently used, with the per-layer floor described above
  Lfu,       // least frequently requested since start, least recently used among equals
};

struct ExpertCacheOptions {
  ExpertCachePolicy policy = ExpertCachePolicy::LruFloor;
  int64_t cache_bytes = 0;    // slot memory; rounded down to whole slots, at least min_slots
  int32_t read_threads = 8;   // parallel reads in flight (queue depth)
  bool retile = true;         // the kernels' tiled layout where they have one
};

struct ExpertCacheStats {
  uint64_t hits = 0;
  uint64_t misses = 0;
  uint64_t bytes_read = 0;    // file bytes read for misses
  uint64_t requested_bytes = 0;  // file bytes of every expert requested (hits and misses)
  uint64_t evictions = 0;     // a cached expert replaced by another
  double read_seconds = 0;    // summed over the reader threads
  double stall_seconds = 0;   // engine thread waiting for misses
  int32_t slots = 0;
  int32_t resident_experts = 0;
  int64_t cache_bytes = 0;
  int64_t slot_bytes = 0;     // one expert's slot (the largest expert's bytes, staging-aligned)
  // One observation per missed expert's read (pread + retile, seconds; failed reads too).
  ExpertReadSecondsHistogram read_time;
  // One observation per MoE layer and forward step: the distinct experts its tokens routed
  // to (all waves together), recorded when the layer is finished (finish_layer).
  ExpertsPerLayerStepHistogram experts_per_layer_step;
};

// The counters as JSON-ready name/value pairs with the Prometheus names of issue #16 (no
// `spillway_` prefix): what `spillway run --json` and `bench --json` report. `before`: a
// snapshot to subtract from the cumulative counters (zeros: since start).
struct ExpertCacheReport {
  uint64_t expert_requests_hit = 0, expert_requests_miss = 0, expert_bytes_read = 0, evictions = 0;
  uint64_t expert_requested_bytes = 0;
  double io_stall_seconds = 0, read_seconds = 0, hit_rate = 0;
  int32_t resident_experts = 0, slots = 0;
  int64_t cache_bytes = 0;
  ExpertReadSecondsHistogram read_time;                   // since `before`
  ExpertsPerLayerStepHistogram experts_per_layer_step;    // since `before`
};
ExpertCacheReport expert_cache_report(const ExpertCacheStats& now, const ExpertCacheStats& before = {});
// sum += now - before for the cumulative counters and histograms; the sizes (slots,
// resident experts, bytes) are taken from `now`. For summing separate spans of steps.
void accumulate_expert_stats(ExpertCacheStats& sum, const ExpertCacheStats& now, const ExpertCacheStats& before);

// The expert tier over a run of decode steps (`bench --json`, bench/moe_streaming.py): what
// a token cost in routed-expert I/O and what that bounds the speed to. Inputs: the cache's
// counters before and after the steps, the tokens decoded, their wall seconds, and the
// disk's sequential read bandwidth (bytes/s; 0: unknown, no bound).
struct ExpertDecodeReport {
  double tokens = 0, seconds = 0;
  double hit_rate = 0;                      // hits / (hits + misses)
  double requested_bytes_per_token = 0;     // file bytes of the routed experts the tokens used
  double bytes_read_per_token = 0;          // expert bytes read from disk
  double miss_bytes_bound_per_token = 0;    // (1 - hit rate) x requested: what reads may be
  double stall_fraction = 0;                // engine-thread wait for misses / wall seconds
  double experts_per_layer_step = 0;        // mean distinct experts a MoE layer ran per step
  double read_seconds_per_expert = 0;       // mean time one miss took to arrive
  // disk bandwidth / bytes read per token: the decode speed the expert reads alone allow
  // (the bound "disk bandwidth x hit rate implies"); 0 without a bandwidth or without reads.
  double disk_bound_tokens_per_second = 0;
};
ExpertDecodeReport expert_decode_report(const ExpertCacheStats& now, const ExpertCacheStats& before,
                                        double tokens, double seconds, double disk_bytes_per_second);

class ExpertCache {
 public:
  // Slot size and the fewest slots a cache of this model may have (the largest top-k).
  struct Sizes {
    int64_t slot_bytes = 0;
    int32_t min_slots = 0;
    int32_t floor_slots = 0;  // per-layer floor x MoE layers: LRU floors apply from here
    int64_t routed_expert_bytes = 0;  // all routed experts, as slots would hold them
  };
  static Result<Sizes> measure(const Model& model);

  // files: the model's files (ModelSource::files order), outliving the cache.
  static Result<std::unique_ptr<ExpertCache>> create(const Model& model, std::vector<const DirectReader*> files,
                                                     const ExpertCacheOptions& options);
  ~ExpertCache();
  ExpertCache(const ExpertCache&) = delete;
  ExpertCache& operator=(const ExpertCache&) = delete;

  // Pins experts `ids` (distinct, at most max_pin() of them) of MoE layer `layer` and returns
  // their views in order, valid until release(layer). Reads the misses in parallel. An Error
  // when a read failed (it names the file) or the request is invalid.
  Result<std::vector<const ExpertWeights*>> acquire(int32_t layer, std::span<const int32_t> ids);
  // The same without waiting: the views at once, ready[i] = 1 for the hits; the misses are
  // being read (in request order) until wait(i) returns for them. Every miss must be
  // waited for before the next begin_acquire, release or shrink.
  Result<std::vector<const ExpertWeights*>> begin_acquire(int32_t layer, std::span<const int32_t> ids,
                                                          std::vector<uint8_t>& ready);
  // Blocks until expert `index` of the last begin_acquire is loaded. An Error (naming the
  // file) when a read of the request failed: all its misses are then forgotten and unpinned.
  Status wait(size_t index);
  void release(int32_t layer);
  // The layer is done for this forward step: release(layer), and its distinct experts of
  // the step (every begin_acquire since the last finish_layer) go into
  // stats().experts_per_layer_step. A no-op for a layer that requested nothing.
  void finish_layer(int32_t layer);
  int32_t max_pin() const { return static_cast<int32_t>(slots_.size()); }

  // Memory pressure, between steps (nothing pinned): frees up to n slots, least recently
  // used first, keeping at least min_slots(); returns how many went. grow adds up to n
  // slots back, never beyond the size the cache was created with; returns how many came.
  int32_t shrink(int32_t n);
  int32_t grow(int32_t n);
  int32_t min_slots() const { return min_slots_; }
  int32_t created_slots() const { return created_slots_; }
  int64_t slot_bytes() const { return static_cast<int64_t>(slot_bytes_); }
  ExpertCacheStats stats() const;

 private:
  struct ExpertUnit {
    StreamUnit unit;
    uint64_t offsets[3] = {};  // gate, up, down in the unit's buffer
    uint64_t file_bytes = 0;   // the expert's bytes in the file (its ranges summed)
    ExpertWeights shape;       // types, dims and layouts (data unset)
  };
  struct Slot {
    int32_t layer = -1, expert = -1;
    uint64_t last_use = 0;
    bool pinned = false;
    bool loading = false;  // a read in flight (under mu_)
    ExpertWeights weights;
    AlignedBytes memory;  // slot_bytes_, its own allocation so that shrink can free it
    uint8_t* buffer = nullptr;
  };
  struct ReadJob {
    const ExpertUnit* unit;
    uint8_t* buffer;
    int32_t slot;
  };

  ExpertCache() = default;
  Status build(const Model& model);
  int32_t pick_victim(int32_t layer) const;  // an unpinned slot, or -1
  bool better_victim(int32_t a, int32_t b) const;  // slot a goes before slot b
  void update_floors();                      // floors on only when every layer's fits
  void reader_loop();

  std::vector<const DirectReader*> files_;
  ExpertCacheOptions options_;
  std::vector<std::vector<ExpertUnit>> units_;      // [layer][expert]; empty for dense layers
  std::vector<std::vector<int32_t>> slot_of_;       // [layer][expert] -> slot or -1
  std::vector<std::vector<uint64_t>> requests_;     // [layer][expert] -> times requested (LFU)
  std::vector<int32_t> layer_slots_;                // slots each layer holds
  std::vector<int32_t> layer_floor_;                // 2 x top-k, or 0 when floors are off
  std::vector<int32_t> layer_floor_wanted_;         // 2 x top-k
  std::vector<int32_t> layer_step_experts_;         // experts requested since finish_layer
  uint64_t slot_bytes_ = 0;
  int32_t min_slots_ = 0, created_slots_ = 0;
  std::vector<Slot> slots_;
  uint64_t tick_ = 0;
  size_t retile_scratch_bytes_ = 0;

  // Reader pool.
  mutable std::mutex mu_;
  std::condition_variable work_, done_;
  std::deque<ReadJob> queue_;
  std::vector<int32_t> request_slots_;  // the last begin_acquire: per index, its miss's slot or -1
  int32_t request_layer_ = -1;
  size_t pending_ = 0;
  std::string first_error_;
  bool stop_ = false;
  std::vector<std::thread> readers_;
  ExpertCacheStats stats_;
};

}  // namespace spillway::engine
