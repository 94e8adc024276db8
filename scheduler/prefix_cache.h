// A token-level prefix cache over FULL KV blocks, shared by all requests.
//
// Each full block of a token sequence has a chained hash: hash(parent block's hash, the
// block's block_size token ids), so a block's hash names its whole prefix. A registered
// block maps hash -> block id; the block also keeps its own token ids, which a lookup
// compares, so a hit needs a 64-bit hash collision of the prefix *and* identical block
// tokens to be wrong (negligible; KV content is a function of the prefix tokens only).
//
// Cached blocks live in the KvBlockManager: referenced ones are shared by their sequences,
// unreferenced ones wait in its LRU and are forgotten here when it evicts them (on_evict).
// When the same content is registered twice (two sequences computed the same prefix
// concurrently), the first block stays registered and the second stays private.
//
// End blocks (hybrid models' next chat turn): a finished sequence may also register its
// last, partially filled block as the end block of its last full block (insert_end_block).
// A later prompt that repeats those tokens and goes on takes the block over
// (take_end_block): the taker writes it further, so it leaves the cache and serves one next
// turn. An end block waits in the block manager's LRU like any cached block and is
// forgotten when evicted.
//
// Thread contract: engine thread only.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

#include "scheduler/kv_block_manager.h"

namespace spillway::scheduler {

// An end block a prompt can resume from (lookup_end_block).
struct EndBlockMatch {
  int32_t block = -1;
  int32_t tokens = 0;  // tokens it holds (0 < tokens < block_size)
  uint64_t hash = 0;   // names the whole prefix up to its last token (as insert_end_block returned)
};

struct PrefixMatch {
  std::vector<int32_t> blocks;  // block ids of the matched leading full blocks, in order
  int32_t tokens = 0;           // blocks.size() * block_size
};

class PrefixCache final : public EvictionListener {
 public:
  // enabled = false: lookups miss and nothing is registered.
  PrefixCache(KvBlockManager& blocks, int32_t block_size, bool enabled);
  ~PrefixCache() override;
  PrefixCache(const PrefixCache&) = delete;
  PrefixCache& operator=(const PrefixCache&) = delete;

  bool enabled() const { return enabled_; }
  int32_t block_size() const { return block_size_; }

  // Extends `hashes` (the chained hashes of tokens' full blocks, computed so far) to cover
  // every full block of tokens.
  void extend_hashes(std::span<const int32_t> tokens, std::vector<uint64_t>& hashes) const;

  // The longest run of leading full blocks of tokens that is cached, leaving at least the
  // last token uncached (so the step that computes it produces logits). hashes: as
  // extend_hashes() leaves them. Does not acquire the blocks.
  PrefixMatch lookup(std::span<const int32_t> tokens, std::span<const uint64_t> hashes) const;

  // Registers full block `index` of a sequence (tokens: the sequence's tokens, covering
  // the block; hashes[index] its chained hash), computed into KV block `block`, which the
  // caller holds a reference to. No-op when disabled or when that content is registered.
  void insert(std::span<const int32_t> tokens, std::span<const uint64_t> hashes, int32_t index,
              int32_t block);

  // Registers `block`, which holds KV for tokens[full_blocks * block_size, tokens.size())
  // (fewer than block_size tokens, at least one), as the end block of the sequence's first
  // full_blocks blocks (hashes covers them). The caller holds a reference to the block and
  // releases it afterwards (the block then waits in the LRU). Returns the hash naming the
  // prefix up to its last token, or nullopt (nothing registered) when disabled or when the
  // same end block is registered already.
  std::optional<uint64_t> insert_end_block(std::span<const int32_t> tokens, std::span<const uint64_t> hashes,
                                           int32_t full_blocks, int32_t block);
  // The longest registered end block of tokens' first full_blocks blocks whose tokens
  // `tokens` repeats, leaving at least the last token uncached; nullopt when none.
  std::optional<EndBlockMatch> lookup_end_block(std::span<const int32_t> tokens, std::span<const uint64_t> hashes,
                                                int32_t full_blocks) const;
  // The end block leaves the cache (the caller acquired it and writes it further).
  void take_end_block(int32_t block);

  // Registered full blocks (referenced or not); registered end blocks.
  int32_t size() const { return static_cast<int32_t>(by_hash_.size()); }
  int32_t end_blocks() const { return static_cast<int32_t>(end_by_parent_.size()); }

  void on_evict(int32_t block) override;

 private:
  bool block_tokens_equal(int32_t block, const int32_t* tokens) const;
  uint64_t parent_hash(std::span<const uint64_t> hashes, int32_t full_blocks) const;
  void forget_end_block(int32_t block);

  KvBlockManager& blocks_;
  int32_t block_size_;
  bool enabled_;
  std::unordered_map<uint64_t, int32_t> by_hash_;
  std::vector<uint64_t> block_hash_;    // per block id, valid while registered
  std::vector<int32_t> block_tokens_;   // [n_blocks][block_size], valid while registered
  // End blocks: parent hash -> block; per block its parent hash and tokens (empty: none).
  std::unordered_multimap<uint64_t, int32_t> end_by_parent_;
  std::vector<uint64_t> end_parent_;
  std::vector<std::vector<int32_t>> end_tokens_;
};

}  // namespace spillway::scheduler
