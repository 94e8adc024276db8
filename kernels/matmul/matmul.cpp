// matmul driver: activations in the weight type's dot format (quantized once into the
// caller's scratch, shared by every matrix of a matmul_multi), then units of weight rows of
// every matrix handed out to the pool's threads through one atomic counter (a descheduled
// thread does not hold the others up). Inside a unit, blocks of activation rows sweep the
// unit's weights while they stay in cache.
//
// Per-output arithmetic is fixed by the dot contracts (kernel_table.h), so neither the
// unit sizes, the thread count, m, nor the weight layout change any result bit.
#include <algorithm>
#include <atomic>
#include <cassert>
#include <cstdint>
#include <vector>

#include "kernels/kernel_table.h"
#include "kernels/quant/quant_blocks.h"
#include "kernels/thread_pool.h"

namespace spillway::kernels {

namespace {
// Below this many multiply-adds the pool's wake-up costs more than it saves.
constexpr int64_t kSerialWorkLimit = 64 * 1024;
// Below this many activation values quantization runs on the calling thread.
constexpr int64_t kSerialQuantizeLimit = 64 * 1024;
// Row-major Q8_0 / Q4_0 weights are packed into tiles on the fly, this many blocks of up to
// kMaxTilesPerUnit tiles at a time, in a stack buffer.
constexpr int64_t kPackBlocks = 32;
constexpr int kMaxTilesPerUnit = 4;
// A GEMV on Q8_0 / Q4_0 tiles pairs tile t with tile t + n/2 of a unit (two weight streams),
// so a unit's size is also how far apart the streams run and how long each stays
// sequential: with units of up to 16 tiles instead of 4 the GEMVs read DRAM faster, by 10-30%
// at 1,024 columns and less at 2,048 (bench/README.md, "Longer runs for the two GEMV
// streams"). Still at least 4 units a thread (tiles_per_unit).
constexpr int64_t kMaxPairedTilesPerUnit = 16;
// Float weights: rows per unit when several activation rows share them (~128 KiB of F16
// weights at d = 2048, an L2-resident block).
constexpr int64_t kFloatRowsPerUnit = 32;
constexpr int kMaxJobs = 4;
// Up to this many activation rows, a tile of weights is swept by all of them before the next.
constexpr int64_t kFewActivationRows = 4 * kTileActs;

// Units for n items split over threads: about `per_thread` units per thread, each at most
// max_items and at least 1 item.
int64_t items_per_unit(int64_t n, int threads, int64_t per_thread, int64_t max_items) {
  return std::clamp<int64_t>(n / (int64_t(threads) * per_thread), 1, max_items);
}

// Runs fn(u) for u in [0, n_units) on the pool's threads. Thread t owns the contiguous
// range [n t / T, n (t + 1) / T) and walks it in order (one sequential stream through the
// weights, which the hardware prefetchers follow); a thread done with its range takes units
// from the others' ranges, so a descheduled thread does not hold the step up.
template <class Fn>
void run_split(ThreadPool& pool, int64_t n_units, Fn&& fn) {
  constexpr int kMaxRanges = 64;
  const int n_threads = pool.size();
  if (n_threads > kMaxRanges) {
    std::atomic<int64_t> next{0};
    pool.run_on_all([&](int) {
      for (int64_t u; (u = next.fetch_add(1, std::memory_order_relaxed)) < n_units;) fn(u);
    });
    return;
  }
  struct alignas(64) Range {
    std::atomic<int64_t> next;
    int64_t end;
  };
  Range ranges[kMaxRanges];
  for (int t = 0; t < n_threads; ++t) {
    ranges[t].next.store(n_units * t / n_threads, std::memory_order_relaxed);
    ranges[t].end = n_units * (t + 1) / n_threads;
  }
  pool.run_on_all([&](int thread) {
    for (int k = 0; k < n_threads; ++k) {
      Range& r = ranges[(thread + k) % n_threads];
      for (int64_t u; (u = r.next.fetch_add(1, std::memory_order_relaxed)) < r.end;) fn(u);
    }
  });
}

// Everything one unit of work needs: the kernels, the shared activations, the shape.
struct Context {
  const KernelTable& kt;
  const float* x;        // fp32 activations [m, cols]
  const uint8_t* xq;     // quantized activations (Q8 groups or Q8_K rows), or null
  int64_t m;
  int threads;
};

// ---- float weights -------------------------------------------------------------------------

int64_t float_rows_per_unit(const WeightMatrix& w, const Context& c) {
  const int64_t rows = items_per_unit(w.rows, c.threads, 4, c.m == 1 ? w.rows : kFloatRowsPerUnit);
  return (rows + kFloatDotW - 1) / kFloatDotW * kFloatDotW;
}

void float_unit(const Context& c, const WeightMatrix& w, float* y, int64_t u) {
  const int index = dot_kind(w.type).index;
  const FloatDotFn dot = c.kt.float_dot[index];
  const FloatTileDotFn tile_dot = c.kt.float_tile_dot[index];
  const int64_t rows = w.rows, cols = w.cols;
  const size_t rb = size_t(row_bytes(w.type, cols));
  const auto* wdata = static_cast<const uint8_t*>(w.data);
  // Tiled: groups of kFloatDotW rows up to here, the rest row-major.
  const int64_t tiled_rows = w.layout == WeightLayout::Tiled ? rows / kFloatDotW * kFloatDotW : 0;
  const int64_t per_unit = float_rows_per_unit(w, c);
  const int64_t r0 = u * per_unit, r1 = std::min(rows, r0 + per_unit);
  // Activation rows i .. i + kFloatDotX - 1 against the groups from row j: one group, or two
  // (float_tile2_dot) where the ISA has the kernel and both are tiled groups of this unit.
  // One activation row is read as it is, several transposed (the block of rows i at c.xq,
  // value k of row i + r at [k * kFloatDotX + r]). Returns the weight rows done.
  const FloatTileDotFn tile2_dot = c.kt.float_tile2_dot[index];
  const int64_t tiled_end = std::min(r1, tiled_rows);
  auto rows_group = [&](int64_t j, int64_t i, int flags) -> int64_t {
    const int nx = static_cast<int>(std::min<int64_t>(kFloatDotX, c.m - i));
    const float* x = c.m == 1 ? c.x : reinterpret_cast<const float*>(c.xq) + i * cols;
    const size_t x_step = c.m == 1 ? 1 : kFloatDotX;
    float* yj = y + i * rows + j;
    if (tile2_dot != nullptr && j + 2 * kFloatDotW <= tiled_end) {
      tile2_dot(wdata + j * rb, x, x_step, nx, cols, yj, size_t(rows), flags);
      return 2 * kFloatDotW;
    }
    if (j < tiled_rows) {
      tile_dot(wdata + j * rb, x, x_step, nx, cols, yj, size_t(rows), flags);
    } else {
      const int nw = static_cast<int>(std::min<int64_t>(kFloatDotW, r1 - j));
      dot(wdata + j * rb, rb, nw, x, x_step, nx, cols, yj, size_t(rows));
    }
    return kFloatDotW;
  };
  const FloatTilePairFn pair = c.kt.float_tile_pair[index];
  if (c.m == 1 && pair != nullptr && r0 < tiled_rows) {
    // Decode: groups g and g + n/2 of the unit's tiled groups together, two weight streams.
    const int64_t half = (tiled_end - r0) / kFloatDotW / 2;
    for (int64_t g = 0; g < half; ++g) {
      const int64_t j0 = r0 + g * kFloatDotW, j1 = j0 + half * kFloatDotW;
      const void* groups[2] = {wdata + j0 * rb, wdata + j1 * rb};
      float* ys[2] = {y + j0, y + j1};
      pair(groups, c.x, cols, ys);
    }
    for (int64_t j = r0 + 2 * half * kFloatDotW; j < r1;) j += rows_group(j, 0, kTileStream);
    return;
  }
  if (c.m <= kFewActivationRows) {
    // Decode and batched decode: the group(s) read once from DRAM by the first activation
    // block and reused from cache by the others, the last of which prefetches the next.
    for (int64_t j = r0; j < r1;) {
      int64_t done = 0;
      for (int64_t i = 0; i < c.m; i += kFloatDotX) {
        const bool last = i + kFloatDotX >= c.m && c.m > kFloatDotX;
        done = rows_group(j, i, (i == 0 ? kTileStream : 0) | (last && j + kFloatDotW < tiled_rows ? kTilePrefetchNext : 0));
      }
      j += done;
    }
    return;
  }
  // Prefill: each block of activation rows sweeps the unit's groups (in L2).
  for (int64_t i = 0; i < c.m; i += kFloatDotX) {
    for (int64_t j = r0; j < r1;) j += rows_group(j, i, 0);
  }
}

// ---- Q8_0 / Q4_0 tiles ---------------------------------------------------------------------

int64_t tiles_per_unit(const WeightMatrix& w, const Context& c) {
  // (Row-major weights are packed per unit into stack buffers of kMaxTilesPerUnit tiles.)
  const bool paired = c.m == 1 && w.layout == WeightLayout::Tiled;
  return items_per_unit(w.rows / kTileRows, c.threads, c.m == 1 ? 4 : 2,
                        paired ? kMaxPairedTilesPerUnit : kMaxTilesPerUnit);
}

int64_t tile_units(const WeightMatrix& w, const Context& c) {
  const int64_t full = w.rows / kTileRows, per_unit = tiles_per_unit(w, c);
  return (full + per_unit - 1) / per_unit + (w.rows % kTileRows ? 1 : 0);
}

void tile_unit(const Context& c, const WeightMatrix& w, float* y, int64_t u) {
  const TileDotFn dot = c.kt.tile_dot[dot_kind(w.type).index];
  const int64_t rows = w.rows, cols = w.cols, nb = cols / kQK8_0, m = c.m;
  const size_t rb = size_t(row_bytes(w.type, cols));
  const size_t group_bytes = q8_group_bytes(cols);
  const auto* wdata = static_cast<const uint8_t*>(w.data);
  const int64_t full_tiles = rows / kTileRows, per_unit = tiles_per_unit(w, c);
  const int64_t n_tile_units = (full_tiles + per_unit - 1) / per_unit;
  if (u < n_tile_units) {
    const int64_t t0 = u * per_unit, t1 = std::min(full_tiles, t0 + per_unit);
    const int n_tiles = static_cast<int>(t1 - t0);
    if (w.layout == WeightLayout::Tiled) {
      // Tile t of the unit (kernel: tile_dot) or tiles t, t + 1 (tile2_dot) x the activation
      // group at row i.
      auto tile_group = [&](int t, int64_t i, int flags, TileDotFn kernel = nullptr) {
        const int nx = static_cast<int>(std::min<int64_t>(kTileActs, m - i));
        const uint8_t* tile = wdata + (t0 + t) * kTileRows * rb;
        (kernel ? kernel : dot)(reinterpret_cast<const uint16_t*>(tile), tile + nb * kTileRows * sizeof(uint16_t), nb,
                                q8_group(c.xq + (i / kTileActs) * group_bytes, cols), nx,
                                y + i * rows + (t0 + t) * kTileRows, size_t(rows), flags);
      };
      const TileDotFn dot2 = c.kt.tile2_dot[dot_kind(w.type).index];
      const TileDotPairFn pair = c.kt.tile_dot_pair[dot_kind(w.type).index];
      if (m == 1 && pair != nullptr) {
        // Decode: tiles t and t + n_tiles / 2 of the unit together, two weight streams.
        const int half = n_tiles / 2;
        const size_t scale_bytes = nb * kTileRows * sizeof(uint16_t);  // a tile: wd[nb][16], then codes
        for (int t = 0; t < half; ++t) {
          const uint8_t* first = wdata + (t0 + t) * kTileRows * rb;
          const uint8_t* second = wdata + (t0 + t + half) * kTileRows * rb;
          const uint16_t* wd[2] = {reinterpret_cast<const uint16_t*>(first), reinterpret_cast<const uint16_t*>(second)};
          const uint8_t* codes[2] = {first + scale_bytes, second + scale_bytes};
          float* ys[2] = {y + (t0 + t) * kTileRows, y + (t0 + t + half) * kTileRows};
          pair(wd, codes, nb, q8_group(c.xq, cols), ys);
        }
        if (n_tiles % 2) tile_group(n_tiles - 1, 0, kTileStream);
        return;
      }
      if (m <= kFewActivationRows) {
        // Batched decode: each tile read once from DRAM by the first activation group and
        // reused from L1 by the others, the last of which prefetches the next tile.
        for (int t = 0; t < n_tiles; ++t) {
          for (int64_t i = 0; i < m; i += kTileActs) {
            const bool last = i + kTileActs >= m;
            tile_group(t, i, i == 0 ? kTileStream : (last && (t0 + t + 1) < full_tiles ? kTilePrefetchNext : 0));
          }
        }
      } else {
        // Prefill: each activation group stays in L1 across the unit's tiles (in L2), two
        // tiles a call where the ISA has tile2_dot (each broadcast activation feeds both).
        for (int64_t i = 0; i < m; i += kTileActs) {
          int t = 0;
          if (dot2 != nullptr) {
            for (; t + 1 < n_tiles; t += 2) tile_group(t, i, i == 0 ? kTileStream : 0, dot2);
          }
          for (; t < n_tiles; ++t) tile_group(t, i, i == 0 ? kTileStream : 0);
        }
      }
      return;
    }
    // Row-major weights: pack kPackBlocks blocks of the unit's tiles, sweep every activation
    // row over them, carry the outputs in y to the next blocks.
    alignas(64) uint16_t wd[kMaxTilesPerUnit][kPackBlocks * kTileRows];
    alignas(64) uint8_t codes[kMaxTilesPerUnit][kPackBlocks * kTileRows * 4 * 8];
    for (int64_t b0 = 0; b0 < nb; b0 += kPackBlocks) {
      const int64_t nbc = std::min(kPackBlocks, nb - b0);
      for (int t = 0; t < n_tiles; ++t) {
        pack_tile(w.type, wdata + (t0 + t) * kTileRows * rb, rb, kTileRows, b0, nbc, wd[t], codes[t]);
      }
      for (int64_t i = 0; i < m; i += kTileActs) {
        const int nx = static_cast<int>(std::min<int64_t>(kTileActs, m - i));
        const Q8Group xg = q8_group(c.xq + (i / kTileActs) * group_bytes, cols, b0);
        for (int t = 0; t < n_tiles; ++t) {
          dot(wd[t], codes[t], nbc, xg, nx, y + i * rows + (t0 + t) * kTileRows, size_t(rows),
              b0 > 0 ? kTileAccumulate : 0);
        }
      }
    }
    return;
  }
  // The rows after the last full tile (row-major in both layouts): zero-padded tiles,
  // outputs through a [kTileActs][16] buffer.
  const int tail_rows = static_cast<int>(rows % kTileRows);
  const uint8_t* tail = wdata + full_tiles * kTileRows * rb;
  alignas(64) uint16_t wd[kPackBlocks * kTileRows];
  alignas(64) uint8_t codes[kPackBlocks * kTileRows * 4 * 8];
  alignas(64) float out[kTileActs * kTileRows];
  for (int64_t i = 0; i < m; i += kTileActs) {
    const int nx = static_cast<int>(std::min<int64_t>(kTileActs, m - i));
    for (int64_t b0 = 0; b0 < nb; b0 += kPackBlocks) {
      const int64_t nbc = std::min(kPackBlocks, nb - b0);
      pack_tile(w.type, tail, rb, tail_rows, b0, nbc, wd, codes);
      dot(wd, codes, nbc, q8_group(c.xq + (i / kTileActs) * group_bytes, cols, b0), nx, out, kTileRows,
          b0 > 0 ? kTileAccumulate : 0);
    }
    for (int a = 0; a < nx; ++a) {
      for (int r = 0; r < tail_rows; ++r) y[(i + a) * rows + full_tiles * kTileRows + r] = out[a * kTileRows + r];
    }
  }
}

// ---- K-quants ------------------------------------------------------------------------------

int64_t kquant_rows_per_unit(const WeightMatrix& w, const Context& c) {
  const int64_t w_row_bytes = row_bytes(w.type, w.cols);
  return items_per_unit(w.rows, c.threads, 4, c.m == 1 ? w.rows : std::max<int64_t>(1, (64 << 10) / w_row_bytes));
}

// Tiled Q4_K / Q5_K / Q6_K: units of up to kMaxTilesPerUnit tiles, then one unit for the
// row-major rows after the last full tile.
bool kquant_tiled(const WeightMatrix& w) { return w.layout == WeightLayout::Tiled && has_kquant_tiles(w.type); }

// K-quant tiles with the ISA's kquant_unpack_min_rows or more activation rows, where it unpacks
// them (kernel_table.h): a unit's tiles are unpacked once into a per-thread buffer of at most
// kUnpackedUnitBytes (or one tile), which stays in L2 beside a block of activation rows while
// every block sweeps it (bench/README.md, "K-quant tiles unpacked once per matmul").
constexpr int64_t kUnpackedUnitBytes = 192 << 10;

bool kquant_unpacks(const WeightMatrix& w, const Context& c) {
  if (!kquant_tiled(w)) return false;
  const int kind = dot_kind(w.type).index;  // 0..2 for the tiled kinds
  return c.kt.kquant_unpacked_dot[kind] != nullptr && c.m >= c.kt.kquant_unpack_min_rows[kind];
}

size_t unpacked_tile_bytes(const WeightMatrix& w) {
  return size_t(w.cols / kQK_K) * kKQuantUnpackedBlockBytes[dot_kind(w.type).index];
}

int64_t kquant_tiles_per_unit(const WeightMatrix& w, const Context& c) {
  int64_t max_tiles = kMaxTilesPerUnit;
  if (kquant_unpacks(w, c)) {
    max_tiles = std::clamp<int64_t>(kUnpackedUnitBytes / int64_t(unpacked_tile_bytes(w)), 1, kMaxTilesPerUnit);
  }
  return items_per_unit(w.rows / kTileRows, c.threads, c.m == 1 ? 4 : 2, max_tiles);
}

// This thread's buffer for unpacked tiles, 64-byte aligned, grown once to the largest unit.
uint8_t* unpack_buffer(size_t bytes) {
  thread_local std::vector<uint8_t> buffer;
  if (buffer.size() < bytes + 64) buffer.resize(bytes + 64);
  const auto address = reinterpret_cast<uintptr_t>(buffer.data());
  return buffer.data() + ((64 - address % 64) % 64);
}

int64_t kquant_units(const WeightMatrix& w, const Context& c) {
  if (kquant_tiled(w)) {
    const int64_t full = w.rows / kTileRows, per_unit = kquant_tiles_per_unit(w, c);
    return (full + per_unit - 1) / per_unit + (w.rows % kTileRows ? 1 : 0);
  }
  const int64_t per_unit = kquant_rows_per_unit(w, c);
  return (w.rows + per_unit - 1) / per_unit;
}

// Rows [r0, r1) of row-major K-quant weights at wdata.
void kquant_rows(const Context& c, const WeightMatrix& w, const uint8_t* wdata, int64_t r0, int64_t r1, float* y) {
  const DotRowsFn dot = c.kt.kquant_dot[dot_kind(w.type).index];
  const int64_t rows = w.rows, cols = w.cols, m = c.m;
  const size_t x_stride = q8_k_row_stride(cols);
  const int64_t w_row_bytes = row_bytes(w.type, cols);
  int64_t act_tile = std::max<int64_t>(kMaxDotRows, (256 << 10) / int64_t(x_stride));
  act_tile = std::min(m, act_tile / kMaxDotRows * kMaxDotRows);
  for (int64_t i0 = 0; i0 < m; i0 += act_tile) {
    const int64_t i1 = std::min(m, i0 + act_tile);
    for (int64_t j = r0; j < r1; ++j) {
      const uint8_t* w_row = wdata + j * w_row_bytes;
      for (int64_t i = i0; i < i1; i += kMaxDotRows) {
        const int nx = static_cast<int>(std::min<int64_t>(kMaxDotRows, i1 - i));
        dot(w_row, c.xq + i * x_stride, x_stride, nx, cols, y + i * rows + j, size_t(rows));
      }
    }
  }
}

void kquant_unit(const Context& c, const WeightMatrix& w, float* y, int64_t u) {
  const auto* wdata = static_cast<const uint8_t*>(w.data);
  if (!kquant_tiled(w)) {
    const int64_t per_unit = kquant_rows_per_unit(w, c);
    const int64_t r0 = u * per_unit, r1 = std::min(w.rows, r0 + per_unit);
    kquant_rows(c, w, wdata, r0, r1, y);
    return;
  }
  const int64_t rows = w.rows, m = c.m, nb = w.cols / kQK_K;
  const size_t x_stride = q8_k_row_stride(w.cols);
  const size_t tile_bytes = size_t(kTileRows) * size_t(row_bytes(w.type, w.cols));
  const int64_t full_tiles = rows / kTileRows, per_unit = kquant_tiles_per_unit(w, c);
  const int64_t n_tile_units = (full_tiles + per_unit - 1) / per_unit;
  if (u >= n_tile_units) {  // the rows after the last full tile stay row-major
    kquant_rows(c, w, wdata, full_tiles * kTileRows, rows, y);
    return;
  }
  const int kind = dot_kind(w.type).index;
  const KQuantTileDotFn dot1 = c.kt.kquant_tile_dot[kind], dot2 = c.kt.kquant_tile2_dot[kind];
  const int64_t t0 = u * per_unit, t1 = std::min(full_tiles, t0 + per_unit);
  // With several activation rows, two tiles a call where the ISA has such a kernel (each
  // broadcast activation feeds both); a GEMV keeps one tile a call (it waits on memory).
  const int pair = m > 1 && dot2 != nullptr ? 2 : 1;
  // Activation rows a call: kKQuantTileActs with a paired kernel; without one (AVX2) the
  // previous 4, which measured 4% faster there at m = 16.
  const int64_t group = dot2 != nullptr ? kKQuantTileActs : kMaxDotRows;
  auto tile_group = [&](int64_t t, int nt, int64_t i, int flags) {
    const int nx = static_cast<int>(std::min<int64_t>(group, m - i));
    (nt == 2 ? dot2 : dot1)(wdata + t * tile_bytes, nb, c.xq + i * x_stride, x_stride, nx, y + i * rows + t * kTileRows,
                            size_t(rows), flags);
  };
  if (kquant_unpacks(w, c)) {
    const size_t unpacked_bytes = unpacked_tile_bytes(w);
    uint8_t* unpacked = unpack_buffer(size_t(t1 - t0) * unpacked_bytes);
    for (int64_t t = t0; t < t1; ++t) c.kt.kquant_unpack[kind](wdata + t * tile_bytes, nb, unpacked + (t - t0) * unpacked_bytes);
    for (int64_t i = 0; i < m; i += kKQuantTileActs) {
      const int nx = static_cast<int>(std::min<int64_t>(kKQuantTileActs, m - i));
      for (int64_t t = t0; t < t1; ++t) {
        c.kt.kquant_unpacked_dot[kind](unpacked + (t - t0) * unpacked_bytes, nb, c.xq + i * x_stride, x_stride, nx,
                                       y + i * rows + t * kTileRows, size_t(rows));
      }
    }
    return;
  }
  if (m <= kFewActivationRows) {
    // Decode and batched decode: each tile (pair) read once from DRAM by the first activation
    // rows and reused from cache by the others, the last of which prefetches the next.
    for (int64_t t = t0; t < t1;) {
      const int nt = t + pair <= t1 ? pair : 1;
      for (int64_t i = 0; i < m; i += group) {
        const bool last = i + group >= m;
        tile_group(t, nt, i, i == 0 ? kTileStream : (last && t + nt < full_tiles ? kTilePrefetchNext : 0));
      }
      t += nt;
    }
    return;
  }
  // Prefill: each block of activation rows stays in L1 across the unit's tiles (in L2).
  for (int64_t i = 0; i < m; i += group) {
    for (int64_t t = t0; t < t1;) {
      const int nt = t + pair <= t1 ? pair : 1;
      tile_group(t, nt, i, i == 0 ? kTileStream : 0);
      t += nt;
    }
  }
}

// ---- the driver ------------------------------------------------------------------------------

int64_t units_of(const WeightMatrix& w, const Context& c) {
  switch (dot_kind(w.type).family) {
    case DotFamily::Float: {
      const int64_t per_unit = float_rows_per_unit(w, c);
      return (w.rows + per_unit - 1) / per_unit;
    }
    case DotFamily::Tile: return tile_units(w, c);
    case DotFamily::KQuant: return kquant_units(w, c);
  }
  return 0;
}

void run_unit(const Context& c, const WeightMatrix& w, float* y, int64_t u) {
  switch (dot_kind(w.type).family) {
    case DotFamily::Float: return float_unit(c, w, y, u);
    case DotFamily::Tile: return tile_unit(c, w, y, u);
    case DotFamily::KQuant: return kquant_unit(c, w, y, u);
  }
}

// The Q8 activation groups' code offset (kernel_table.h, corr) for Q8_0 / Q4_0 weights.
int32_t q8_code_offset(DType t) { return t == DType::Q8_0 ? 128 : 8; }

// Runs the prologue on each of the m activation rows and quantizes them into scratch in the
// format of weight type t (F32: several rows transposed in blocks of kFloatDotX, see
// float_unit; one row is used as it is).
void prepare_activations(const KernelTable& kt, DType t, const float* x, int64_t m, int64_t cols, uint8_t* xq,
                         ThreadPool& pool, bool serial, RowPrologue prologue) {
  const ActivationFormat format = activation_format(t);
  if (format == ActivationFormat::F32) {
    if (m == 1) {
      if (prologue.fn) prologue.fn(prologue.ctx, 0);
      return;
    }
    auto* out = reinterpret_cast<float*>(xq);
    const int64_t blocks = (m + kFloatDotX - 1) / kFloatDotX;
    auto block = [&](int64_t b) {
      const int64_t i0 = b * kFloatDotX, n = std::min<int64_t>(kFloatDotX, m - i0);
      if (prologue.fn) {
        for (int64_t i = i0; i < i0 + n; ++i) prologue.fn(prologue.ctx, i);
      }
      kt.transpose_rows(x + i0 * cols, size_t(cols), static_cast<int>(n), cols, out + i0 * cols);
    };
    if (serial || blocks == 1 || m * cols < kSerialQuantizeLimit) {
      for (int64_t b = 0; b < blocks; ++b) block(b);
    } else {
      pool.parallel_for(blocks, [&](int64_t begin, int64_t end) {
        for (int64_t b = begin; b < end; ++b) block(b);
      });
    }
    return;
  }
  auto quantize = [&](int64_t i) {
    if (prologue.fn) prologue.fn(prologue.ctx, i);
    if (format == ActivationFormat::Q8) {
      kt.quantize_q8(x + i * cols, cols, q8_code_offset(t), xq + (i / kTileActs) * q8_group_bytes(cols),
                     static_cast<int>(i % kTileActs));
    } else {
      uint8_t* row = xq + i * q8_k_row_stride(cols);
      const int64_t full = cols / kQK_K * kQK_K;
      if (full > 0) kt.quantize_q8_K(x + i * cols, row, full);
      if (full < cols) {  // 32-value block types: the last block zero-padded to 256
        float padded[kQK_K] = {};
        std::copy(x + i * cols + full, x + (i + 1) * cols, padded);
        kt.quantize_q8_K(padded, row + full / kQK_K * sizeof(BlockQ8_K), kQK_K);
      }
    }
  };
  if (serial || m == 1 || m * cols < kSerialQuantizeLimit) {
    for (int64_t i = 0; i < m; ++i) quantize(i);
  } else {
    pool.parallel_for(m, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) quantize(i);
    });
  }
}

// Whether every matrix reads the same activation bytes, so one activation pass and one pool
// call serve them all: the same width, and the same dot format (Q8 groups of the same code
// offset; Q8_K rows, whichever K-quant; float rows transposed for m > 1), except that float
// weights at m = 1 read x as it is and go with anything. *lead: the matrix whose format the
// shared pass prepares.
bool share_activations(std::span<const WeightMatrix* const> ws, int64_t m, const WeightMatrix** lead) {
  *lead = ws[0];
  bool found = false;
  for (const WeightMatrix* w : ws) {
    if (w->cols != ws[0]->cols) return false;
    const ActivationFormat format = activation_format(w->type);
    if (m == 1 && format == ActivationFormat::F32) continue;
    if (!found) {
      *lead = w, found = true;
      continue;
    }
    if (format != activation_format((*lead)->type)) return false;
    if (format == ActivationFormat::Q8 && q8_code_offset(w->type) != q8_code_offset((*lead)->type)) return false;
  }
  return true;
}
}  // namespace

size_t matmul_scratch_bytes(const WeightMatrix& w, int64_t m) {
  switch (activation_format(w.type)) {
    case ActivationFormat::F32:  // several rows transposed in blocks of kFloatDotX
      return m > 1 ? size_t((m + kFloatDotX - 1) / kFloatDotX) * kFloatDotX * size_t(w.cols) * sizeof(float) : 0;
    case ActivationFormat::Q8: return size_t((m + kTileActs - 1) / kTileActs) * q8_group_bytes(w.cols);
    case ActivationFormat::Q8_K: return size_t(m) * q8_k_row_stride(w.cols);
  }
  return 0;
}

void matmul_multi(const KernelTable& kt, std::span<const WeightMatrix* const> ws, const float* x, int64_t m,
                  std::span<float* const> ys, void* scratch, ThreadPool& pool, RowPrologue prologue) {
  assert(ws.size() == ys.size() && !ws.empty());
  if (m <= 0) return;
  const WeightMatrix* lead = nullptr;
  const bool shared = ws.size() <= size_t(kMaxJobs) && share_activations(ws, m, &lead);
  int64_t work = 0;
  for (const WeightMatrix* w : ws) {
    assert(w->cols % block_elems(w->type) == 0);
    assert(w->layout == WeightLayout::Rows || has_tiled_layout(w->type, w->cols));
    work += w->rows * w->cols * m;
  }
  if (!shared) {
    for (size_t j = 0; j < ws.size(); ++j) {
      matmul_multi(kt, ws.subspan(j, 1), x, m, ys.subspan(j, 1), scratch, pool, j == 0 ? prologue : RowPrologue{});
    }
    return;
  }
  const DType type = lead->type;
  const int64_t cols = lead->cols;
  const bool serial = pool.size() == 1 || work < kSerialWorkLimit;
  auto* xq = static_cast<uint8_t*>(scratch);
  assert(scratch != nullptr || (activation_format(type) == ActivationFormat::F32 && m == 1));
  prepare_activations(kt, type, x, m, cols, xq, pool, serial, prologue);
  const Context c{kt, x, xq, m, serial ? 1 : pool.size()};
  int64_t first_unit[kMaxJobs + 1] = {0};
  for (size_t j = 0; j < ws.size(); ++j) first_unit[j + 1] = first_unit[j] + units_of(*ws[j], c);
  const int64_t n_units = first_unit[ws.size()];
  auto run = [&](int64_t u) {
    size_t j = 0;
    while (u >= first_unit[j + 1]) ++j;
    run_unit(c, *ws[j], ys[j], u - first_unit[j]);
  };
  if (serial || n_units == 1) {
    for (int64_t u = 0; u < n_units; ++u) run(u);
    return;
  }
  run_split(pool, n_units, run);
}

void matmul(const KernelTable& kt, const WeightMatrix& w, const float* x, int64_t m, float* y,
            void* scratch, ThreadPool& pool) {
  if (w.rows <= 0) return;
  const WeightMatrix* ws[] = {&w};
  float* ys[] = {y};
  matmul_multi(kt, ws, x, m, ys, scratch, pool);
}

}  // namespace spillway::kernels
