#include "scheduler/state_snapshots.h"

#include <cassert>

namespace spillway::scheduler {

StateSnapshotIndex::StateSnapshotIndex(int32_t n_snapshots) : n_snapshots_(n_snapshots) {
  for (int32_t s = n_snapshots - 1; s >= 0; --s) free_.push_back(s);
}

std::optional<int32_t> StateSnapshotIndex::find(uint64_t hash) {
  auto it = by_hash_.find(hash);
  if (it == by_hash_.end()) return std::nullopt;
  lru_.splice(lru_.begin(), lru_, it->second);
  return it->second->slot;
}

int32_t StateSnapshotIndex::take_slot() {
  assert(enabled());
  if (!free_.empty()) {
    const int32_t s = free_.back();
    free_.pop_back();
    return s;
  }
  assert(!lru_.empty());
  const Entry victim = lru_.back();
  lru_.pop_back();
  by_hash_.erase(victim.hash);
  return victim.slot;
}

void StateSnapshotIndex::insert(uint64_t hash, int32_t slot) {
  if (auto it = by_hash_.find(hash); it != by_hash_.end()) {  // saved twice concurrently
    give_back(slot);
    return;
  }
  lru_.push_front({hash, slot});
  by_hash_[hash] = lru_.begin();
}

void StateSnapshotIndex::give_back(int32_t slot) { free_.push_back(slot); }

void StateSnapshotIndex::forget(uint64_t hash) {
  auto it = by_hash_.find(hash);
  if (it == by_hash_.end()) return;
  free_.push_back(it->second->slot);
  lru_.erase(it->second);
  by_hash_.erase(it);
}

}  // namespace spillway::scheduler
