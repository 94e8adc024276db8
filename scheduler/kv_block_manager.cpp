#include "scheduler/kv_block_manager.h"

#include <cassert>

namespace spillway::scheduler {

KvBlockManager::KvBlockManager(int32_t n_blocks)
    : ref_count_(n_blocks, 0),
      cached_(n_blocks, 0),
      lru_prev_(n_blocks, -1),
      lru_next_(n_blocks, -1),
      in_lru_(n_blocks, 0) {
  assert(n_blocks >= 0);
  free_.reserve(n_blocks);
  // Highest id at the bottom so that blocks are handed out 0, 1, 2, ... at first.
  for (int32_t b = n_blocks - 1; b >= 0; --b) free_.push_back(b);
}

int32_t KvBlockManager::available_after_acquiring(std::span<const int32_t> hits) const {
  int32_t evictable_hits = 0;
  for (int32_t b : hits) evictable_hits += in_lru_[b];
  return available_blocks() - evictable_hits;
}

bool KvBlockManager::allocate(int32_t n, std::vector<int32_t>& out) {
  assert(n >= 0);
  if (n > available_blocks()) return false;
  for (int32_t i = 0; i < n; ++i) {
    int32_t block;
    if (!free_.empty()) {
      block = free_.back();
      free_.pop_back();
    } else {
      block = lru_head_;
      assert(block >= 0);
      lru_remove(block);
      --n_cached_unreferenced_;
      if (listener_) listener_->on_evict(block);
      cached_[block] = 0;
    }
    assert(ref_count_[block] == 0 && !cached_[block]);
    ref_count_[block] = 1;
    out.push_back(block);
  }
  return true;
}

void KvBlockManager::acquire(int32_t block) {
  assert(block >= 0 && block < n_blocks());
  if (ref_count_[block] == 0) {
    assert(in_lru_[block]);  // only cached blocks can be found while unreferenced
    lru_remove(block);
    --n_cached_unreferenced_;
  }
  ++ref_count_[block];
}

void KvBlockManager::release(int32_t block) {
  assert(block >= 0 && block < n_blocks() && ref_count_[block] > 0);
  if (--ref_count_[block] > 0) return;
  if (cached_[block]) {
    lru_push_back(block);
    ++n_cached_unreferenced_;
  } else {
    free_.push_back(block);
  }
}

void KvBlockManager::set_cached(int32_t block, bool cached) {
  assert(block >= 0 && block < n_blocks());
  if (cached_[block] == static_cast<uint8_t>(cached)) return;
  cached_[block] = cached;
  if (!cached && in_lru_[block]) {
    lru_remove(block);
    --n_cached_unreferenced_;
    free_.push_back(block);
  }
  // A block marked cached while unreferenced would be unreachable for allocation: the
  // prefix cache only marks blocks a live sequence holds.
  assert(!cached || ref_count_[block] > 0);
}

void KvBlockManager::lru_remove(int32_t block) {
  assert(in_lru_[block]);
  const int32_t prev = lru_prev_[block], next = lru_next_[block];
  (prev >= 0 ? lru_next_[prev] : lru_head_) = next;
  (next >= 0 ? lru_prev_[next] : lru_tail_) = prev;
  lru_prev_[block] = lru_next_[block] = -1;
  in_lru_[block] = 0;
}

void KvBlockManager::lru_push_back(int32_t block) {
  assert(!in_lru_[block]);
  lru_prev_[block] = lru_tail_;
  lru_next_[block] = -1;
  (lru_tail_ >= 0 ? lru_next_[lru_tail_] : lru_head_) = block;
  lru_tail_ = block;
  in_lru_[block] = 1;
}

}  // namespace spillway::scheduler
