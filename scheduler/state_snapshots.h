// The prefix cache's half for hybrid models: which recurrent-state snapshots exist, keyed
// by the chained hash of the KV block that ends where the snapshot was taken (the hash
// names the whole prefix, prefix_cache.h). The runner holds the snapshot bytes in
// n_snapshots numbered snapshot slots (StepBatch::state_saves / state_restores); this index
// decides which slot holds which prefix, least recently used first out.
//
// A lookup that wants to resume a sequence after k cached KV blocks takes the deepest
// snapshot at a block boundary <= k (so a prompt whose last cached boundary fell into
// request-unique tokens still reuses the shallower shared prefix).
//
// Slots are in one of three states: free, indexed (in the LRU, findable), or held by the
// scheduler outside the index (a save in flight, or a running sequence's tail snapshot,
// which it re-saves at every block boundary past its prompt and publishes with insert()
// when it finishes or is preempted). A finished sequence's exact end (PrefixCache end
// blocks) is indexed under its end block's hash as soon as it finishes, its save being the
// first thing the next step does (StepBatch::end_saves).
//
// Thread contract: engine thread only (inside the Scheduler).
#pragma once

#include <cstdint>
#include <list>
#include <optional>
#include <unordered_map>
#include <vector>

namespace spillway::scheduler {

class StateSnapshotIndex {
 public:
  explicit StateSnapshotIndex(int32_t n_snapshots);

  bool enabled() const { return n_snapshots_ > 0; }
  int32_t size() const { return static_cast<int32_t>(by_hash_.size()); }
  bool contains(uint64_t hash) const { return by_hash_.contains(hash); }
  // The snapshot slot holding the state after the block with this hash (and marks it most
  // recently used), or nullopt.
  std::optional<int32_t> find(uint64_t hash);
  // Whether take_slot() can give a slot (one is free or indexed).
  bool can_take() const { return !free_.empty() || !lru_.empty(); }
  // A slot to save a new snapshot into: a free one, else the least recently used one
  // (forgotten now). The caller registers it with insert() once the save happened.
  // Requires can_take().
  int32_t take_slot();
  // The slot now holds the state after the block with this hash (a slot taken with
  // take_slot); when that hash is indexed already, the slot goes back to the free list.
  void insert(uint64_t hash, int32_t slot);
  int32_t n_snapshots() const { return n_snapshots_; }
  // A slot taken but not saved (its step failed): back to the free list.
  void give_back(int32_t slot);
  // The snapshot of this hash is no longer wanted (used up, or its save failed): its slot
  // goes back to the free list. No-op when not indexed.
  void forget(uint64_t hash);

 private:
  struct Entry {
    uint64_t hash;
    int32_t slot;
  };
  int32_t n_snapshots_;
  std::vector<int32_t> free_;
  std::list<Entry> lru_;  // front = most recently used
  std::unordered_map<uint64_t, std::list<Entry>::iterator> by_hash_;
};

}  // namespace spillway::scheduler
