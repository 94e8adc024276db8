// Paged KV storage: a fixed pool of blocks, each holding block_size token rows of K and V
// for every attention layer. Layers are indexed by attention ordinal
// (LayerSpec::attention_ordinal): a hybrid model allocates K/V for its attention layers only. Which sequence owns which block is the scheduler's business
// (scheduler/kv_block_manager.h); the engine only reads and writes through block tables.
//
// Layout per layer, elements of `type` (F16 or F32): head-major, so that one head's part of
// a block is one contiguous run (block_size * head_dim elements) and a sequence whose blocks
// are consecutive is one run per head, which attention streams (one call per kv head):
//   K: [n_kv_heads][n_blocks][head_dim][block_size] (one dim of a block's tokens contiguous,
//      which the attention kernel reads as a vector of keys);
//   V: [n_kv_heads][n_blocks][block_size][head_dim] (a token's head row contiguous).
// Thread contract: the forward writes rows of the tokens it computes and reads rows of
// their contexts; callers guarantee no two sequences in flight share a block being written.
#pragma once

#include <cstdint>
#include <memory>
#include <span>

#include "engine/model/model_config.h"
#include "kernels/kernels.h"

namespace spillway::engine {

class KvCache {
 public:
  KvCache(int32_t n_layers, int32_t n_kv_heads, int32_t head_dim, int32_t block_size,
          int32_t n_blocks, kernels::DType type = kernels::DType::F16);
  // The cache of a model: one layer per attention layer, with its kv heads and head size
  // (the same for every attention layer of the architectures we run; asserted).
  KvCache(const ModelConfig& config, int32_t block_size, int32_t n_blocks,
          kernels::DType type = kernels::DType::F16);

  // Bytes one token row takes across all layers, K and V.
  static int64_t bytes_per_token(int32_t n_layers, int32_t n_kv_heads, int32_t head_dim,
                                 kernels::DType type);
  // The same for a model's attention layers.
  static int64_t bytes_per_token(const ModelConfig& config, kernels::DType type);

  int32_t block_size() const { return block_size_; }
  int32_t n_blocks() const { return n_blocks_; }
  int64_t bytes() const { return 2 * layer_elems_ * n_layers_ * elem_bytes_; }

  // Stores k and v ([n_kv_heads * head_dim] floats each) of the token at `position` of the
  // sequence whose blocks are block_table.
  void write(int32_t layer, std::span<const int32_t> block_table, int64_t position,
             const float* k, const float* v);

  // Copies every layer's K and V rows of block src into block dst (e.g. a shared prefix
  // given to another sequence).
  void copy_block(int32_t src, int32_t dst);

  kernels::KvView k_view(int32_t layer, std::span<const int32_t> block_table) const;
  kernels::KvView v_view(int32_t layer, std::span<const int32_t> block_table) const;

 private:
  kernels::KvView view(const uint8_t* base, int32_t layer,
                       std::span<const int32_t> block_table) const;

  // Elements of one head's part of a block; where that part of (layer, head, block) starts.
  int64_t head_block_elems() const { return int64_t{block_size_} * head_dim_; }
  int64_t head_start(int32_t layer, int32_t head, int32_t block) const {
    return layer * layer_elems_ + (int64_t{head} * n_blocks_ + block) * head_block_elems();
  }

  int32_t n_layers_, n_kv_heads_, head_dim_, block_size_, n_blocks_;
  kernels::DType type_;
  int64_t elem_bytes_;
  int64_t layer_elems_;   // n_blocks * block_size * n_kv_heads * head_dim
  struct Free {
    void operator()(uint8_t* p) const;
  };
  std::unique_ptr<uint8_t[], Free> k_;  // calloc'd
  std::unique_ptr<uint8_t[], Free> v_;
};

}  // namespace spillway::engine
