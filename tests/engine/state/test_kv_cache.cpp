// KvCache: what write() stores is what the views address (KvView's element formula, which the
// attention kernels read through), for every layer, kv head, dim and row of scattered
// blocks; copy_block copies every layer's and head's part of a block and nothing else.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "engine/state/kv_cache.h"
#include "kernels/dtype.h"
#include "kernels/kernels.h"

namespace spillway::engine {
namespace {

constexpr int32_t kLayers = 2, kHeads = 3, kHeadDim = 5, kBlockSize = 4, kBlocks = 7;

// A distinct integer per (layer, position, head, dim), exact in F16 (< 2048); V's differ from K's.
float key_value(int32_t layer, int64_t pos, int32_t h, int32_t d) {
  return float(((layer * 16 + pos) * 4 + h) * 8 + d);
}
float value_value(int32_t layer, int64_t pos, int32_t h, int32_t d) { return -key_value(layer, pos, h, d) - 1; }

// Element (row r of the block at table index t / block_size, head h, dim d) through the view.
float element(const kernels::KvView& x, int64_t t, int32_t h, int32_t d) {
  const int64_t i = int64_t(x.block_table[t / x.block_size]) * x.block_stride + (t % x.block_size) * x.token_stride +
                    h * x.head_stride + d * x.dim_stride;
  if (x.type == kernels::DType::F32) return static_cast<const float*>(x.data)[i];
  return kernels::fp16_to_fp32(static_cast<const uint16_t*>(x.data)[i]);
}

// Writes positions [0, n) of every layer of the sequence whose blocks are `table`.
void write_positions(KvCache& kv, const std::vector<int32_t>& table, int64_t n) {
  for (int32_t layer = 0; layer < kLayers; ++layer) {
    for (int64_t pos = 0; pos < n; ++pos) {
      std::vector<float> k(kHeads * kHeadDim), v(k.size());
      for (int32_t h = 0; h < kHeads; ++h) {
        for (int32_t d = 0; d < kHeadDim; ++d) {
          k[h * kHeadDim + d] = key_value(layer, pos, h, d);
          v[h * kHeadDim + d] = value_value(layer, pos, h, d);
        }
      }
      kv.write(layer, table, pos, k.data(), v.data());
    }
  }
}

// Every element of positions [0, n) read through the views of `table` is what was written.
void expect_positions(const KvCache& kv, const std::vector<int32_t>& table, int64_t n) {
  for (int32_t layer = 0; layer < kLayers; ++layer) {
    const kernels::KvView k = kv.k_view(layer, table), v = kv.v_view(layer, table);
    for (int64_t pos = 0; pos < n; ++pos) {
      for (int32_t h = 0; h < kHeads; ++h) {
        for (int32_t d = 0; d < kHeadDim; ++d) {
          ASSERT_EQ(element(k, pos, h, d), key_value(layer, pos, h, d)) << layer << " " << pos << " " << h << " " << d;
          ASSERT_EQ(element(v, pos, h, d), value_value(layer, pos, h, d)) << layer << " " << pos << " " << h << " " << d;
        }
      }
    }
  }
}

class KvCacheLayout : public ::testing::TestWithParam<kernels::DType> {};

TEST_P(KvCacheLayout, ViewsAddressWhatWriteStored) {
  KvCache kv(kLayers, kHeads, kHeadDim, kBlockSize, kBlocks, GetParam());
  const std::vector<int32_t> table = {5, 0, 3};  // scattered, out of order
  write_positions(kv, table, 3 * kBlockSize);
  expect_positions(kv, table, 3 * kBlockSize);
  // The kernels' fast paths: K transposed (a dim's keys of a block contiguous), V rows contiguous.
  const kernels::KvView k = kv.k_view(0, table), v = kv.v_view(0, table);
  EXPECT_EQ(k.token_stride, 1);
  EXPECT_EQ(v.dim_stride, 1);
}

TEST_P(KvCacheLayout, CopyBlockCopiesEveryLayerAndHeadOnly) {
  KvCache kv(kLayers, kHeads, kHeadDim, kBlockSize, kBlocks, GetParam());
  const std::vector<int32_t> table = {2, 6, 1};
  write_positions(kv, table, 3 * kBlockSize);
  // Block 4, then block 0, receive the sequence's middle block (6): the copy reads back through
  // a table naming the copy; the source sequence is untouched.
  kv.copy_block(6, 4);
  kv.copy_block(6, 0);
  expect_positions(kv, {2, 4, 1}, 3 * kBlockSize);
  expect_positions(kv, {2, 0, 1}, 3 * kBlockSize);
  expect_positions(kv, table, 3 * kBlockSize);
  // A block nobody wrote or copied into is still zero in every layer and head.
  const std::vector<int32_t> untouched = {3};
  for (int32_t layer = 0; layer < kLayers; ++layer) {
    const kernels::KvView k = kv.k_view(layer, untouched), v = kv.v_view(layer, untouched);
    for (int64_t r = 0; r < kBlockSize; ++r) {
      for (int32_t h = 0; h < kHeads; ++h) {
        for (int32_t d = 0; d < kHeadDim; ++d) {
          ASSERT_EQ(element(k, r, h, d), 0.0f);
          ASSERT_EQ(element(v, r, h, d), 0.0f);
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Types, KvCacheLayout, ::testing::Values(kernels::DType::F32, kernels::DType::F16),
                         [](const auto& info) { return std::string(kernels::dtype_name(info.param)); });

}  // namespace
}  // namespace spillway::engine
