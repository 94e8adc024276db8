// matmul driver: activation quantization into the caller's scratch, then weight-row
// chunks handed out to the pool's threads; inside a chunk, a tile of activation rows is
// swept against each weight row while both stay in cache.
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
// Cache budgets of one inner tile (bytes of weights, bytes of activations).
constexpr int64_t kWeightTileBytes = 64 * 1024;
constexpr int64_t kActivationTileBytes = 256 * 1024;
}  // namespace

size_t matmul_scratch_bytes(const WeightMatrix& w, int64_t m) {
  const ActivationFormat f = activation_format(w.type);
  if (f == ActivationFormat::F32) return 0;
  return size_t(m) * activation_row_stride(f, w.cols);
}

void matmul(const KernelTable& kt, const WeightMatrix& w, const float* x, int64_t m, float* y,
            void* scratch, ThreadPool& pool) {
  if (m <= 0 || w.rows <= 0) return;
  assert(w.cols % block_elems(w.type) == 0);
  const DotRowsFn dot = kt.dot[static_cast<int>(weight_slot(w.type))];
  const int64_t rows = w.rows, cols = w.cols;
  const bool serial = pool.size() == 1 || rows * cols * m < kSerialWorkLimit;

  // Activations in the weight type's dot format.
  const ActivationFormat format = activation_format(w.type);
  const uint8_t* xa = reinterpret_cast<const uint8_t*>(x);
  size_t x_stride = size_t(cols) * sizeof(float);
  if (format != ActivationFormat::F32) {
    assert(scratch != nullptr);
    x_stride = activation_row_stride(format, cols);
    const QuantizeActivationsFn quantize =
        format == ActivationFormat::Q8_0 ? kt.quantize_q8_0 : kt.quantize_q8_K;
    auto* out = static_cast<uint8_t*>(scratch);
    auto quantize_rows = [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) quantize(x + i * cols, out + i * x_stride, cols);
    };
    if (serial || m * cols < kSerialQuantizeLimit || m == 1) {
      quantize_rows(0, m);
    } else {
      pool.parallel_for(m, quantize_rows);
    }
    xa = out;
  }

  const auto* wdata = static_cast<const uint8_t*>(w.data);
  const int64_t w_row_bytes = row_bytes(w.type, cols);
  const int n_threads = serial ? 1 : pool.size();
  // Chunk of weight rows: small enough to stay in L2 while the activation tile sweeps it,
  // and at least a few chunks per thread so a descheduled thread does not stall the rest.
  int64_t chunk = m == 1 ? rows : std::max<int64_t>(1, kWeightTileBytes / std::max<int64_t>(1, w_row_bytes));
  chunk = std::min(chunk, std::max<int64_t>(1, rows / (int64_t(n_threads) * 4)));
  const int64_t n_chunks = (rows + chunk - 1) / chunk;
  int64_t act_tile = std::max<int64_t>(kMaxDotRows, kActivationTileBytes / int64_t(x_stride));
  act_tile = std::min(m, act_tile / kMaxDotRows * kMaxDotRows);

  std::atomic<int64_t> next_chunk{0};
  auto run_chunks = [&](int) {
    for (;;) {
      const int64_t c = next_chunk.fetch_add(1, std::memory_order_relaxed);
      if (c >= n_chunks) return;
      const int64_t r0 = c * chunk, r1 = std::min(rows, r0 + chunk);
      for (int64_t i0 = 0; i0 < m; i0 += act_tile) {
        const int64_t i1 = std::min(m, i0 + act_tile);
        for (int64_t j = r0; j < r1; ++j) {
          const uint8_t* w_row = wdata + j * w_row_bytes;
          for (int64_t i = i0; i < i1; i += kMaxDotRows) {
            const int nx = static_cast<int>(std::min<int64_t>(kMaxDotRows, i1 - i));
            dot(w_row, xa + i * x_stride, x_stride, nx, cols, y + i * rows + j, size_t(rows));
          }
        }
      }
    }
  };
  if (n_threads == 1) {
    run_chunks(0);
  } else {
    pool.run_on_all(run_chunks);
  }
}

}  // namespace spillway::kernels
