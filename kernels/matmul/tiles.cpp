// The Tiled weight layouts (kernel_table.h) and the Q8 activation groups the Q8_0 / Q4_0 tile
// kernels read: offsets, packing of row-major rows into tiles (on the fly by matmul, in place
// by retile_in_place when weights are loaded).
#include <algorithm>
#include <cassert>
#include <cstring>

#include "kernels/kernel_table.h"
#include "kernels/quant/quant_blocks.h"

namespace spillway::kernels {

namespace {

// F32 / F16 / BF16, whose Tiled layout is groups of kFloatDotW rows with value k of row r at
// kFloatDotW * k + r (the others' tiles are kTileRows rows of blocks).
bool float_weights(DType t) { return block_elems(t) == 1; }

// The four code bytes of group g of a block, as one little-endian word.
uint32_t q8_0_group(const BlockQ8_0& b, int g) {
  uint32_t v;
  std::memcpy(&v, b.qs + 4 * g, 4);
  return v ^ 0x80808080u;  // int8 q -> uint8 q + 128
}
uint32_t q4_0_group(const BlockQ4_0& b, int g) {
  uint32_t v;
  std::memcpy(&v, b.qs + 4 * g, 4);
  return v;
}
}  // namespace

size_t q8_group_bytes(int64_t n) { return size_t(n / kQK8_0) * (8 + 1 + 1) * 4 * kTileActs; }

Q8Group q8_group(const void* group, int64_t n, int64_t b0) {
  const auto* p = static_cast<const uint8_t*>(group);
  const int64_t nb = n / kQK8_0;
  Q8Group g;
  g.q4 = reinterpret_cast<const int32_t*>(p) + b0 * 8 * kTileActs;
  g.d = reinterpret_cast<const float*>(p + nb * 8 * 4 * kTileActs) + b0 * kTileActs;
  g.corr = reinterpret_cast<const int32_t*>(p + nb * 9 * 4 * kTileActs) + b0 * kTileActs;
  return g;
}

size_t q8_k_row_stride(int64_t cols) {
  return (size_t((cols + kQK_K - 1) / kQK_K) * sizeof(BlockQ8_K) + 63) & ~size_t{63};
}

bool has_tiled_layout(DType t, int64_t cols) {
  switch (t) {
    case DType::Q8_0:
    case DType::Q4_0:
    case DType::Q4_K:
    case DType::Q5_K:
    case DType::Q6_K: return true;
    case DType::F32:
    case DType::F16:
    case DType::BF16: return cols % 16 == 0;
    default: return false;
  }
}

int tile_groups(DType t) {
  switch (t) {
    case DType::Q8_0: return 8;
    case DType::Q4_0: return 4;
    default: return 0;
  }
}

size_t tile_block_code_bytes(DType t) { return size_t(kTileRows) * 4 * tile_groups(t); }

void pack_tile(DType t, const uint8_t* rows, size_t row_bytes, int n_rows, int64_t b0, int64_t nbc,
               uint16_t* wd, uint8_t* codes) {
  assert(tile_groups(t) > 0 && n_rows >= 0 && n_rows <= kTileRows);
  const int groups = tile_groups(t);
  const size_t block_bytes = size_t(kernels::block_bytes(t));
  const size_t code_bytes = tile_block_code_bytes(t);
  for (int64_t b = 0; b < nbc; ++b) {
    uint16_t d[kTileRows] = {};
    uint32_t c[8][kTileRows] = {};  // [g][r]
    for (int r = 0; r < n_rows; ++r) {
      const uint8_t* block = rows + r * row_bytes + (b0 + b) * block_bytes;
      if (t == DType::Q8_0) {
        BlockQ8_0 blk;
        std::memcpy(&blk, block, sizeof blk);
        d[r] = blk.d;
        for (int g = 0; g < groups; ++g) c[g][r] = q8_0_group(blk, g);
      } else {
        BlockQ4_0 blk;
        std::memcpy(&blk, block, sizeof blk);
        d[r] = blk.d;
        for (int g = 0; g < groups; ++g) c[g][r] = q4_0_group(blk, g);
      }
    }
    std::memcpy(wd + b * kTileRows, d, sizeof d);
    std::memcpy(codes + b * code_bytes, c, code_bytes);
  }
}

size_t retile_scratch_bytes(DType t, int64_t cols) {
  if (!has_tiled_layout(t, cols)) return 0;
  return size_t(float_weights(t) ? kFloatDotW : kTileRows) * size_t(row_bytes(t, cols));
}

void retile_in_place(DType t, void* data, int64_t rows, int64_t cols, void* scratch) {
  assert(has_tiled_layout(t, cols));
  const size_t rb = size_t(row_bytes(t, cols));
  if (float_weights(t)) {
    auto retile = [&]<class E>(E*) {
      auto* base = static_cast<E*>(data);
      auto* copy = static_cast<E*>(scratch);
      for (int64_t r0 = 0; r0 + kFloatDotW <= rows; r0 += kFloatDotW) {
        E* group = base + r0 * cols;
        std::memcpy(copy, group, kFloatDotW * rb);
        for (int64_t k = 0; k < cols; ++k) {
          for (int r = 0; r < kFloatDotW; ++r) group[k * kFloatDotW + r] = copy[r * cols + k];
        }
      }
    };
    if (block_bytes(t) == 4) {
      retile(static_cast<uint32_t*>(nullptr));
    } else {
      retile(static_cast<uint16_t*>(nullptr));
    }
    return;
  }
  const int64_t nb = cols / block_elems(t);
  auto* base = static_cast<uint8_t*>(data);
  auto* copy = static_cast<uint8_t*>(scratch);
  if (has_kquant_tiles(t)) {
    for (int64_t r0 = 0; r0 + kTileRows <= rows; r0 += kTileRows) {
      uint8_t* tile = base + r0 * rb;
      std::memcpy(copy, tile, kTileRows * rb);
      pack_kquant_tile(t, copy, rb, nb, tile);
    }
    return;
  }
  for (int64_t r0 = 0; r0 + kTileRows <= rows; r0 += kTileRows) {
    uint8_t* tile = base + r0 * rb;
    std::memcpy(copy, tile, kTileRows * rb);
    auto* wd = reinterpret_cast<uint16_t*>(tile);
    pack_tile(t, copy, rb, kTileRows, 0, nb, wd, tile + nb * kTileRows * sizeof(uint16_t));
  }
}

bool tiled_rows_readable(DType t) { return float_weights(t); }

void read_tiled_row(DType t, const void* data, int64_t rows, int64_t cols, int64_t r, void* out) {
  assert(tiled_rows_readable(t) && r < rows);
  const size_t rb = size_t(row_bytes(t, cols));
  const auto* base = static_cast<const uint8_t*>(data);
  if (r >= rows / kFloatDotW * kFloatDotW) {  // past the last full group: row-major
    std::memcpy(out, base + r * rb, rb);
    return;
  }
  auto gather = [&]<class E>(E*) {
    const E* group = reinterpret_cast<const E*>(base + (r / kFloatDotW * kFloatDotW) * rb) + r % kFloatDotW;
    E* dst = static_cast<E*>(out);
    for (int64_t k = 0; k < cols; ++k) dst[k] = group[k * kFloatDotW];
  };
  if (block_bytes(t) == 4) {
    gather(static_cast<uint32_t*>(nullptr));
  } else {
    gather(static_cast<uint16_t*>(nullptr));
  }
}

}  // namespace spillway::kernels
