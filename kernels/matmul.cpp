// matmul driver: activations in the weight type's dot format (quantized into the caller's
// scratch), then units of weight rows handed out to the pool's threads through an atomic
// counter (a descheduled thread does not hold the others up). Inside a unit, blocks of
// activation rows sweep the unit's weights while they stay in cache.
//
// Per-output arithmetic is fixed by the dot contracts (kernel_table.h), so neither the
// unit sizes, the thread count, m, nor the weight layout change any result bit.
#include <algorithm>
#include <atomic>
#include <cassert>

#include "kernels/kernel_table.h"
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
// Float weights: rows per unit when several activation rows share them (~128 KiB of F16
// weights at d = 2048, an L2-resident block).
constexpr int64_t kFloatRowsPerUnit = 32;

// Calls fn(unit) for every unit in [0, n_units), spread over the pool's threads.
template <class Fn>
void run_units(ThreadPool& pool, bool serial, int64_t n_units, Fn&& fn) {
  if (serial || n_units == 1) {
    for (int64_t u = 0; u < n_units; ++u) fn(u);
    return;
  }
  std::atomic<int64_t> next{0};
  pool.run_on_all([&](int) {
    for (;;) {
      const int64_t u = next.fetch_add(1, std::memory_order_relaxed);
      if (u >= n_units) return;
      fn(u);
    }
  });
}

// Units for n items split over threads: about `per_thread` units per thread, each at most
// max_items and at least 1 item.
int64_t items_per_unit(int64_t n, int threads, int64_t per_thread, int64_t max_items) {
  return std::clamp<int64_t>(n / (int64_t(threads) * per_thread), 1, max_items);
}

// Quantizes m activation rows into scratch (stride bytes apart) with fn(row_in, row_out).
template <class Fn>
void quantize_rows(ThreadPool& pool, bool serial, int64_t m, int64_t cols, Fn&& fn) {
  if (serial || m == 1 || m * cols < kSerialQuantizeLimit) {
    for (int64_t i = 0; i < m; ++i) fn(i);
  } else {
    pool.parallel_for(m, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) fn(i);
    });
  }
}

void matmul_float(const KernelTable& kt, const WeightMatrix& w, const float* x, int64_t m, float* y,
                  ThreadPool& pool, bool serial) {
  const FloatDotFn dot = kt.float_dot[dot_kind(w.type).index];
  const int64_t rows = w.rows, cols = w.cols;
  const size_t rb = size_t(row_bytes(w.type, cols));
  const auto* wdata = static_cast<const uint8_t*>(w.data);
  const int threads = serial ? 1 : pool.size();
  const int64_t unit_rows =
      items_per_unit(rows, threads, 4, m == 1 ? rows : kFloatRowsPerUnit) + kFloatDotW - 1;
  const int64_t rows_per_unit = unit_rows / kFloatDotW * kFloatDotW;
  const int64_t n_units = (rows + rows_per_unit - 1) / rows_per_unit;
  run_units(pool, serial, n_units, [&](int64_t u) {
    const int64_t r0 = u * rows_per_unit, r1 = std::min(rows, r0 + rows_per_unit);
    for (int64_t i = 0; i < m; i += kFloatDotX) {
      const int nx = static_cast<int>(std::min<int64_t>(kFloatDotX, m - i));
      for (int64_t j = r0; j < r1; j += kFloatDotW) {
        const int nw = static_cast<int>(std::min<int64_t>(kFloatDotW, r1 - j));
        dot(wdata + j * rb, rb, nw, x + i * cols, size_t(cols), nx, cols, y + i * rows + j, size_t(rows));
      }
    }
  });
}

void matmul_tiles(const KernelTable& kt, const WeightMatrix& w, const float* x, int64_t m, float* y,
                  void* scratch, ThreadPool& pool, bool serial) {
  const TileDotFn dot = kt.tile_dot[dot_kind(w.type).index];
  const int64_t rows = w.rows, cols = w.cols, nb = cols / kQK8_0;
  const size_t rb = size_t(row_bytes(w.type, cols));
  const auto* wdata = static_cast<const uint8_t*>(w.data);
  const bool tiled = w.layout == WeightLayout::Tiles16;

  // Activation groups of kTileActs rows, group g at xq + g * group_bytes.
  const size_t group_bytes = q8_group_bytes(cols);
  auto* xq = static_cast<uint8_t*>(scratch);
  const int32_t offset = w.type == DType::Q8_0 ? 128 : 8;
  quantize_rows(pool, serial, m, cols, [&](int64_t i) {
    kt.quantize_q8(x + i * cols, cols, offset, xq + (i / kTileActs) * group_bytes, static_cast<int>(i % kTileActs));
  });

  const int64_t full_tiles = rows / kTileRows;
  const int tail_rows = static_cast<int>(rows % kTileRows);
  const int threads = serial ? 1 : pool.size();
  const int64_t tiles_per_unit = items_per_unit(full_tiles, threads, m == 1 ? 4 : 2, kMaxTilesPerUnit);
  const int64_t tile_units = (full_tiles + tiles_per_unit - 1) / tiles_per_unit;
  const int64_t n_units = tile_units + (tail_rows > 0 ? 1 : 0);

  run_units(pool, serial, n_units, [&](int64_t u) {
    if (u < tile_units) {
      const int64_t t0 = u * tiles_per_unit, t1 = std::min(full_tiles, t0 + tiles_per_unit);
      const int n_tiles = static_cast<int>(t1 - t0);
      if (tiled) {
        for (int64_t i = 0; i < m; i += kTileActs) {
          const int nx = static_cast<int>(std::min<int64_t>(kTileActs, m - i));
          const Q8Group xr = q8_group(xq + (i / kTileActs) * group_bytes, cols);
          for (int t = 0; t < n_tiles; ++t) {
            const uint8_t* tile = wdata + (t0 + t) * kTileRows * rb;
            const auto* wd = reinterpret_cast<const uint16_t*>(tile);
            dot(wd, tile + nb * kTileRows * sizeof(uint16_t), nb, xr, nx, y + i * rows + (t0 + t) * kTileRows,
                size_t(rows), false);
          }
        }
        return;
      }
      // Row-major weights: pack kPackBlocks blocks of the unit's tiles, sweep every
      // activation row over them, carry the outputs in y to the next blocks.
      alignas(64) uint16_t wd[kMaxTilesPerUnit][kPackBlocks * kTileRows];
      alignas(64) uint8_t codes[kMaxTilesPerUnit][kPackBlocks * kTileRows * 4 * 8];
      for (int64_t b0 = 0; b0 < nb; b0 += kPackBlocks) {
        const int64_t nbc = std::min(kPackBlocks, nb - b0);
        for (int t = 0; t < n_tiles; ++t) {
          pack_tile(w.type, wdata + (t0 + t) * kTileRows * rb, rb, kTileRows, b0, nbc, wd[t], codes[t]);
        }
        for (int64_t i = 0; i < m; i += kTileActs) {
          const int nx = static_cast<int>(std::min<int64_t>(kTileActs, m - i));
          const Q8Group xr = q8_group(xq + (i / kTileActs) * group_bytes, cols, b0);
          for (int t = 0; t < n_tiles; ++t) {
            dot(wd[t], codes[t], nbc, xr, nx, y + i * rows + (t0 + t) * kTileRows, size_t(rows), b0 > 0);
          }
        }
      }
      return;
    }
    // The rows after the last full tile (row-major in both layouts): zero-padded tiles,
    // outputs through a [kTileActs][16] buffer.
    const uint8_t* tail = wdata + full_tiles * kTileRows * rb;
    alignas(64) uint16_t wd[kPackBlocks * kTileRows];
    alignas(64) uint8_t codes[kPackBlocks * kTileRows * 4 * 8];
    alignas(64) float out[kTileActs * kTileRows];
    for (int64_t i = 0; i < m; i += kTileActs) {
      const int nx = static_cast<int>(std::min<int64_t>(kTileActs, m - i));
      for (int64_t b0 = 0; b0 < nb; b0 += kPackBlocks) {
        const int64_t nbc = std::min(kPackBlocks, nb - b0);
        pack_tile(w.type, tail, rb, tail_rows, b0, nbc, wd, codes);
        dot(wd, codes, nbc, q8_group(xq + (i / kTileActs) * group_bytes, cols, b0), nx, out, kTileRows, b0 > 0);
      }
      for (int a = 0; a < nx; ++a) {
        for (int r = 0; r < tail_rows; ++r) y[(i + a) * rows + full_tiles * kTileRows + r] = out[a * kTileRows + r];
      }
    }
  });
}

void matmul_kquant(const KernelTable& kt, const WeightMatrix& w, const float* x, int64_t m, float* y,
                   void* scratch, ThreadPool& pool, bool serial) {
  const DotRowsFn dot = kt.kquant_dot[dot_kind(w.type).index];
  const int64_t rows = w.rows, cols = w.cols;
  const size_t x_stride = q8_k_row_stride(cols);
  auto* xq = static_cast<uint8_t*>(scratch);
  quantize_rows(pool, serial, m, cols, [&](int64_t i) { kt.quantize_q8_K(x + i * cols, xq + i * x_stride, cols); });

  const auto* wdata = static_cast<const uint8_t*>(w.data);
  const int64_t w_row_bytes = row_bytes(w.type, cols);
  const int threads = serial ? 1 : pool.size();
  // Chunk of weight rows: small enough to stay in L2 while the activation rows sweep it.
  const int64_t chunk = items_per_unit(rows, threads, 4,
                                       m == 1 ? rows : std::max<int64_t>(1, (64 << 10) / w_row_bytes));
  const int64_t n_chunks = (rows + chunk - 1) / chunk;
  int64_t act_tile = std::max<int64_t>(kMaxDotRows, (256 << 10) / int64_t(x_stride));
  act_tile = std::min(m, act_tile / kMaxDotRows * kMaxDotRows);
  run_units(pool, serial, n_chunks, [&](int64_t c) {
    const int64_t r0 = c * chunk, r1 = std::min(rows, r0 + chunk);
    for (int64_t i0 = 0; i0 < m; i0 += act_tile) {
      const int64_t i1 = std::min(m, i0 + act_tile);
      for (int64_t j = r0; j < r1; ++j) {
        const uint8_t* w_row = wdata + j * w_row_bytes;
        for (int64_t i = i0; i < i1; i += kMaxDotRows) {
          const int nx = static_cast<int>(std::min<int64_t>(kMaxDotRows, i1 - i));
          dot(w_row, xq + i * x_stride, x_stride, nx, cols, y + i * rows + j, size_t(rows));
        }
      }
    }
  });
}

}  // namespace

size_t matmul_scratch_bytes(const WeightMatrix& w, int64_t m) {
  switch (activation_format(w.type)) {
    case ActivationFormat::F32: return 0;
    case ActivationFormat::Q8: return size_t((m + kTileActs - 1) / kTileActs) * q8_group_bytes(w.cols);
    case ActivationFormat::Q8_K: return size_t(m) * q8_k_row_stride(w.cols);
  }
  return 0;
}

void matmul(const KernelTable& kt, const WeightMatrix& w, const float* x, int64_t m, float* y,
            void* scratch, ThreadPool& pool) {
  if (m <= 0 || w.rows <= 0) return;
  assert(w.cols % block_elems(w.type) == 0);
  assert(w.layout == WeightLayout::Rows || has_tiled_layout(w.type));
  const bool serial = pool.size() == 1 || w.rows * w.cols * m < kSerialWorkLimit;
  switch (dot_kind(w.type).family) {
    case DotFamily::Float: return matmul_float(kt, w, x, m, y, pool, serial);
    case DotFamily::Tile: return matmul_tiles(kt, w, x, m, y, scratch, pool, serial);
    case DotFamily::KQuant: return matmul_kquant(kt, w, x, m, y, scratch, pool, serial);
  }
}

}  // namespace spillway::kernels
