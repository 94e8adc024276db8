// The pool of KV blocks and their reference counts (DESIGN.md "KV cache").
//
// Every block is in exactly one state:
// - free:    unreferenced, no content worth keeping;
// - used:    referenced by at least one live sequence (ref_count > 0);
// - cached:  unreferenced but holding prefix-cache content (evictable). Cached blocks sit
//            in an LRU list in the order they were released; they are evicted (oldest
//            first) only when allocate() runs out of free blocks.
// A block carries content (is "cached") once the prefix cache marks it so; the prefix
// cache is told of each eviction through the EvictionListener.
//
// Allocation failure is a value (allocate() returns false), never an exception.
// Thread contract: engine thread only. No allocation after construction except `out`.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace spillway::scheduler {

class EvictionListener {
 public:
  virtual ~EvictionListener() = default;
  // The cached block is about to be reused: forget its content.
  virtual void on_evict(int32_t block) = 0;
};

class KvBlockManager {
 public:
  explicit KvBlockManager(int32_t n_blocks);

  void set_eviction_listener(EvictionListener* listener) { listener_ = listener; }

  int32_t n_blocks() const { return static_cast<int32_t>(ref_count_.size()); }
  int32_t free_blocks() const { return static_cast<int32_t>(free_.size()); }
  int32_t cached_blocks() const { return n_cached_unreferenced_; }
  int32_t used_blocks() const { return n_blocks() - free_blocks() - cached_blocks(); }
  // Blocks allocate() could hand out now (free + evictable cached).
  int32_t available_blocks() const { return free_blocks() + cached_blocks(); }

  // How many blocks allocate() could still hand out after `hits` (blocks about to be
  // acquired, some possibly cached and unreferenced) are acquired.
  int32_t available_after_acquiring(std::span<const int32_t> hits) const;

  // Appends n fresh blocks (ref_count 1, not cached) to out. Free blocks first, then
  // LRU-evicted cached blocks. Returns false and changes nothing when fewer than n exist.
  bool allocate(int32_t n, std::vector<int32_t>& out);
  // One more reference to a used or cached block (a prefix hit, a fork).
  void acquire(int32_t block);
  // Drops one reference. At zero the block becomes cached (most recently used end of the
  // LRU) if it holds cached content, else free.
  void release(int32_t block);

  int32_t ref_count(int32_t block) const { return ref_count_[block]; }
  bool is_cached(int32_t block) const { return cached_[block] != 0; }
  // Marks a block as holding (or no longer holding) prefix-cache content. An unreferenced
  // block unmarked this way becomes free.
  void set_cached(int32_t block, bool cached);

 private:
  void lru_remove(int32_t block);
  void lru_push_back(int32_t block);

  EvictionListener* listener_ = nullptr;
  std::vector<int32_t> ref_count_;
  std::vector<uint8_t> cached_;
  std::vector<int32_t> free_;  // stack of free block ids
  // Intrusive doubly linked LRU of cached unreferenced blocks; -1 terminates.
  std::vector<int32_t> lru_prev_, lru_next_;
  std::vector<uint8_t> in_lru_;
  int32_t lru_head_ = -1, lru_tail_ = -1;
  int32_t n_cached_unreferenced_ = 0;
};

}  // namespace spillway::scheduler
