#include "scheduler/prefix_cache.h"

#include <algorithm>
#include <cassert>

namespace spillway::scheduler {

namespace {

uint64_t mix64(uint64_t x) {  // splitmix64 finalizer
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  x ^= x >> 31;
  return x;
}

uint64_t chain_hash(uint64_t parent, const int32_t* tokens, int32_t n) {
  uint64_t h = mix64(parent ^ 0x9e3779b97f4a7c15ULL);
  for (int32_t i = 0; i < n; ++i) {
    h = mix64(h + 0x9e3779b97f4a7c15ULL + static_cast<uint32_t>(tokens[i]));
  }
  return h;
}

constexpr uint64_t kRootHash = 0x5350494c4c574159ULL;  // "SPILLWAY"
constexpr uint64_t kEndSalt = 0x7461696c7461696cULL;  // "tailtail": an end block's hash is no full block's

}  // namespace

PrefixCache::PrefixCache(KvBlockManager& blocks, int32_t block_size, bool enabled)
    : blocks_(blocks),
      block_size_(block_size),
      enabled_(enabled),
      block_hash_(blocks.n_blocks(), 0),
      block_tokens_(enabled ? size_t(blocks.n_blocks()) * block_size : 0, 0),
      end_parent_(enabled ? blocks.n_blocks() : 0, 0),
      end_tokens_(enabled ? blocks.n_blocks() : 0) {
  assert(block_size > 0);
  if (enabled_) by_hash_.reserve(blocks.n_blocks());
  blocks_.set_eviction_listener(this);
}

PrefixCache::~PrefixCache() { blocks_.set_eviction_listener(nullptr); }

void PrefixCache::extend_hashes(std::span<const int32_t> tokens,
                                std::vector<uint64_t>& hashes) const {
  const size_t n_full = tokens.size() / block_size_;
  while (hashes.size() < n_full) {
    const uint64_t parent = hashes.empty() ? kRootHash : hashes.back();
    hashes.push_back(chain_hash(parent, tokens.data() + hashes.size() * block_size_, block_size_));
  }
}

bool PrefixCache::block_tokens_equal(int32_t block, const int32_t* tokens) const {
  const int32_t* stored = block_tokens_.data() + size_t(block) * block_size_;
  return std::equal(stored, stored + block_size_, tokens);
}

PrefixMatch PrefixCache::lookup(std::span<const int32_t> tokens,
                                std::span<const uint64_t> hashes) const {
  PrefixMatch match;
  if (!enabled_ || tokens.empty()) return match;
  // Leave the last token to compute.
  const size_t max_blocks = std::min(hashes.size(), (tokens.size() - 1) / block_size_);
  for (size_t i = 0; i < max_blocks; ++i) {
    const auto it = by_hash_.find(hashes[i]);
    if (it == by_hash_.end()) break;
    if (!block_tokens_equal(it->second, tokens.data() + i * block_size_)) break;
    match.blocks.push_back(it->second);
  }
  match.tokens = static_cast<int32_t>(match.blocks.size()) * block_size_;
  return match;
}

void PrefixCache::insert(std::span<const int32_t> tokens, std::span<const uint64_t> hashes,
                         int32_t index, int32_t block) {
  if (!enabled_) return;
  assert(index >= 0 && size_t(index) < hashes.size());
  assert(size_t(index + 1) * block_size_ <= tokens.size());
  assert(blocks_.ref_count(block) > 0);
  if (blocks_.is_cached(block)) return;  // already registered (a shared hit)
  const auto [it, inserted] = by_hash_.emplace(hashes[index], block);
  if (!inserted) return;  // the same content is registered in another block
  block_hash_[block] = hashes[index];
  std::copy_n(tokens.data() + size_t(index) * block_size_, block_size_,
              block_tokens_.data() + size_t(block) * block_size_);
  blocks_.set_cached(block, true);
}

uint64_t PrefixCache::parent_hash(std::span<const uint64_t> hashes, int32_t full_blocks) const {
  assert(full_blocks >= 0 && size_t(full_blocks) <= hashes.size());
  return full_blocks == 0 ? kRootHash : hashes[full_blocks - 1];
}

std::optional<uint64_t> PrefixCache::insert_end_block(std::span<const int32_t> tokens,
                                                      std::span<const uint64_t> hashes, int32_t full_blocks,
                                                      int32_t block) {
  if (!enabled_) return std::nullopt;
  const size_t begin = size_t(full_blocks) * block_size_;
  assert(begin < tokens.size() && tokens.size() < begin + block_size_);
  assert(blocks_.ref_count(block) > 0 && !blocks_.is_cached(block));
  const uint64_t parent = parent_hash(hashes, full_blocks);
  const std::span<const int32_t> end = tokens.subspan(begin);
  auto [first, last] = end_by_parent_.equal_range(parent);
  for (auto it = first; it != last; ++it) {
    if (std::ranges::equal(end_tokens_[it->second], end)) return std::nullopt;
  }
  end_by_parent_.emplace(parent, block);
  end_parent_[block] = parent;
  end_tokens_[block].assign(end.begin(), end.end());
  blocks_.set_cached(block, true);
  return chain_hash(parent ^ kEndSalt, end.data(), static_cast<int32_t>(end.size()));
}

std::optional<EndBlockMatch> PrefixCache::lookup_end_block(std::span<const int32_t> tokens,
                                                           std::span<const uint64_t> hashes,
                                                           int32_t full_blocks) const {
  if (!enabled_ || size_t(full_blocks) > hashes.size()) return std::nullopt;
  const size_t begin = size_t(full_blocks) * block_size_;
  const uint64_t parent = parent_hash(hashes, full_blocks);
  std::optional<EndBlockMatch> best;
  auto [first, last] = end_by_parent_.equal_range(parent);
  for (auto it = first; it != last; ++it) {
    const std::vector<int32_t>& end = end_tokens_[it->second];
    if (begin + end.size() >= tokens.size()) continue;  // leave the last token to compute
    if (best && int32_t(end.size()) <= best->tokens) continue;
    if (!std::equal(end.begin(), end.end(), tokens.begin() + begin)) continue;
    best = EndBlockMatch{it->second, static_cast<int32_t>(end.size()),
                         chain_hash(parent ^ kEndSalt, end.data(), static_cast<int32_t>(end.size()))};
  }
  return best;
}

void PrefixCache::take_end_block(int32_t block) {
  assert(!end_tokens_[block].empty() && blocks_.ref_count(block) > 0);
  forget_end_block(block);
  blocks_.set_cached(block, false);
}

void PrefixCache::forget_end_block(int32_t block) {
  auto [first, last] = end_by_parent_.equal_range(end_parent_[block]);
  for (auto it = first; it != last; ++it) {
    if (it->second == block) {
      end_by_parent_.erase(it);
      break;
    }
  }
  end_tokens_[block].clear();
}

void PrefixCache::on_evict(int32_t block) {
  if (!end_tokens_[block].empty()) {
    forget_end_block(block);
    return;
  }
  const auto it = by_hash_.find(block_hash_[block]);
  assert(it != by_hash_.end() && it->second == block);
  if (it != by_hash_.end() && it->second == block) by_hash_.erase(it);
}

}  // namespace spillway::scheduler
