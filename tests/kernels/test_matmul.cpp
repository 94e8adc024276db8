// matmul on every ISA and weight type: exact where the data makes every sum exact,
// within tight tolerances on random data, against the scalar table and a double-precision
// reference built from dequantized weights and activations.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "kernel_test_util.h"
#include "kernels/quant/quant_blocks.h"
#include "kernels/thread_pool.h"

namespace spillway::kernels {
namespace {

using testing::AlignedBuffer;
using testing::isa_label;
using testing::kAllWeightTypes;
using testing::random_floats;
using testing::random_matrix;
using testing::TestMatrix;

// The activations the dot kernels see for weight type t, dequantized (scalar quantizer).
std::vector<float> effective_activations(DType t, const float* x, int64_t m, int64_t cols) {
  std::vector<float> out(size_t(m * cols));
  const ActivationFormat f = activation_format(t);
  if (f == ActivationFormat::F32) {
    std::memcpy(out.data(), x, out.size() * sizeof(float));
    return out;
  }
  const KernelTable& scalar = kernels_for(Isa::Scalar);
  std::vector<uint8_t> q(std::max(q8_group_bytes(cols), q8_k_row_stride(cols)));
  for (int64_t i = 0; i < m; ++i) {
    float* o = out.data() + i * cols;
    if (f == ActivationFormat::Q8) {
      scalar.quantize_q8(x + i * cols, cols, 0, q.data(), 0);
      const Q8Group g = q8_group(q.data(), cols);
      for (int64_t k = 0; k < cols; ++k) {
        const auto* bytes = reinterpret_cast<const int8_t*>(&g.q4[(k / 32 * 8 + k % 32 / 4) * kTileActs]);
        o[k] = g.d[k / 32 * kTileActs] * bytes[k % 4];
      }
    } else {  // 256-value blocks, the last one zero-padded
      std::vector<float> padded((cols + 255) / 256 * 256, 0.0f);
      std::copy(x + i * cols, x + (i + 1) * cols, padded.begin());
      scalar.quantize_q8_K(padded.data(), q.data(), int64_t(padded.size()));
      const auto* b = reinterpret_cast<const BlockQ8_K*>(q.data());
      for (int64_t k = 0; k < cols; ++k) o[k] = b[k / 256].d * b[k / 256].qs[k % 256];
    }
  }
  return out;
}

struct Reference {
  std::vector<double> y;      // [m, rows]
  std::vector<double> scale;  // sum_k |w_jk x_ik|, for relative tolerances
};

Reference reference_matmul(const TestMatrix& w, const float* x, int64_t m) {
  std::vector<float> wf(size_t(w.rows * w.cols));
  const int64_t rb = row_bytes(w.type, w.cols);
  for (int64_t r = 0; r < w.rows; ++r) dequantize_row(w.type, w.bytes.data() + r * rb, wf.data() + r * w.cols, w.cols);
  const std::vector<float> xe = effective_activations(w.type, x, m, w.cols);
  Reference ref{std::vector<double>(size_t(m * w.rows)), std::vector<double>(size_t(m * w.rows))};
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < w.rows; ++j) {
      double acc = 0, mag = 0;
      for (int64_t k = 0; k < w.cols; ++k) {
        const double p = double(wf[size_t(j * w.cols + k)]) * xe[size_t(i * w.cols + k)];
        acc += p;
        mag += std::fabs(p);
      }
      ref.y[size_t(i * w.rows + j)] = acc;
      ref.scale[size_t(i * w.rows + j)] = mag;
    }
  }
  return ref;
}

std::vector<float> run_matmul(const KernelTable& kt, const WeightMatrix& w, const std::vector<float>& x,
                              int64_t m, ThreadPool& pool) {
  AlignedBuffer<uint8_t> scratch(matmul_scratch_bytes(w, m) + 1);
  std::vector<float> y(size_t(m * w.rows), NAN);
  matmul(kt, w, x.data(), m, y.data(), scratch.data(), pool);
  return y;
}

std::vector<float> run_matmul(const KernelTable& kt, const TestMatrix& w, const std::vector<float>& x,
                              int64_t m, ThreadPool& pool) {
  return run_matmul(kt, w.view(), x, m, pool);
}

// The same bits, NaN payloads and signed zeros included.
void expect_same_bits(const std::vector<float>& a, const std::vector<float>& b, const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_EQ(std::memcmp(&a[i], &b[i], sizeof(float)), 0) << what << " i=" << i << ": " << a[i] << " vs " << b[i];
  }
}

// Weights whose dequantized values are small multiples of powers of two, so that every
// partial sum of a dot product is exact in fp32 and the summation order cannot matter.
TestMatrix exact_matrix(DType t, int64_t rows, int64_t cols, uint32_t seed) {
  std::mt19937 rng(seed);
  auto uniform = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  TestMatrix w{t, rows, cols, std::vector<uint8_t>(size_t(row_bytes(t, cols) * rows))};
  const int64_t n = rows * cols;
  uint8_t* p = w.bytes.data();
  switch (t) {
    case DType::F32:
      for (int64_t i = 0; i < n; ++i) reinterpret_cast<float*>(p)[i] = uniform(-64, 64) / 8.0f;
      break;
    case DType::F16:
      for (int64_t i = 0; i < n; ++i) reinterpret_cast<uint16_t*>(p)[i] = fp32_to_fp16(uniform(-64, 64) / 8.0f);
      break;
    case DType::BF16:
      for (int64_t i = 0; i < n; ++i) reinterpret_cast<uint16_t*>(p)[i] = fp32_to_bf16(uniform(-64, 64) / 8.0f);
      break;
    case DType::Q8_0:
      for (auto* b = reinterpret_cast<BlockQ8_0*>(p); b < reinterpret_cast<BlockQ8_0*>(p) + n / 32; ++b) {
        b->d = fp32_to_fp16(0.125f);
        for (int8_t& q : b->qs) q = static_cast<int8_t>(uniform(-8, 8));
      }
      break;
    case DType::Q4_0:
      for (auto* b = reinterpret_cast<BlockQ4_0*>(p); b < reinterpret_cast<BlockQ4_0*>(p) + n / 32; ++b) {
        b->d = fp32_to_fp16(0.25f);
        for (uint8_t& q : b->qs) q = static_cast<uint8_t>(uniform(0, 255));
      }
      break;
    case DType::Q4_K:
      for (auto* b = reinterpret_cast<BlockQ4_K*>(p); b < reinterpret_cast<BlockQ4_K*>(p) + n / 256; ++b) {
        b->d = fp32_to_fp16(1.0f / 16);
        b->dmin = fp32_to_fp16(1.0f / 32);
        for (uint8_t& s : b->scales) s = static_cast<uint8_t>(uniform(0, 255));
        for (uint8_t& q : b->qs) q = static_cast<uint8_t>(uniform(0, 255));
      }
      break;
    case DType::Q4_1:
      for (auto* b = reinterpret_cast<BlockQ4_1*>(p); b < reinterpret_cast<BlockQ4_1*>(p) + n / 32; ++b) {
        b->d = fp32_to_fp16(0.25f);
        b->m = fp32_to_fp16(-2.0f);
        for (uint8_t& q : b->qs) q = static_cast<uint8_t>(uniform(0, 255));
      }
      break;
    case DType::Q5_0:
      for (auto* b = reinterpret_cast<BlockQ5_0*>(p); b < reinterpret_cast<BlockQ5_0*>(p) + n / 32; ++b) {
        b->d = fp32_to_fp16(0.125f);
        for (uint8_t& q : b->qh) q = static_cast<uint8_t>(uniform(0, 255));
        for (uint8_t& q : b->qs) q = static_cast<uint8_t>(uniform(0, 255));
      }
      break;
    case DType::Q5_1:
      for (auto* b = reinterpret_cast<BlockQ5_1*>(p); b < reinterpret_cast<BlockQ5_1*>(p) + n / 32; ++b) {
        b->d = fp32_to_fp16(0.125f);
        b->m = fp32_to_fp16(-1.5f);
        for (uint8_t& q : b->qh) q = static_cast<uint8_t>(uniform(0, 255));
        for (uint8_t& q : b->qs) q = static_cast<uint8_t>(uniform(0, 255));
      }
      break;
    case DType::Q2_K:
      for (auto* b = reinterpret_cast<BlockQ2_K*>(p); b < reinterpret_cast<BlockQ2_K*>(p) + n / 256; ++b) {
        b->d = fp32_to_fp16(1.0f / 8);
        b->dmin = fp32_to_fp16(1.0f / 16);
        for (uint8_t& s : b->scales) s = static_cast<uint8_t>(uniform(0, 255));
        for (uint8_t& q : b->qs) q = static_cast<uint8_t>(uniform(0, 255));
      }
      break;
    case DType::Q3_K:
      for (auto* b = reinterpret_cast<BlockQ3_K*>(p); b < reinterpret_cast<BlockQ3_K*>(p) + n / 256; ++b) {
        b->d = fp32_to_fp16(1.0f / 32);
        for (uint8_t& q : b->hmask) q = static_cast<uint8_t>(uniform(0, 255));
        for (uint8_t& q : b->qs) q = static_cast<uint8_t>(uniform(0, 255));
        for (uint8_t& s : b->scales) s = static_cast<uint8_t>(uniform(0, 255));
      }
      break;
    case DType::Q5_K:
      for (auto* b = reinterpret_cast<BlockQ5_K*>(p); b < reinterpret_cast<BlockQ5_K*>(p) + n / 256; ++b) {
        b->d = fp32_to_fp16(1.0f / 32);
        b->dmin = fp32_to_fp16(1.0f / 16);
        for (uint8_t& s : b->scales) s = static_cast<uint8_t>(uniform(0, 255));
        for (uint8_t& q : b->qh) q = static_cast<uint8_t>(uniform(0, 255));
        for (uint8_t& q : b->qs) q = static_cast<uint8_t>(uniform(0, 255));
      }
      break;
    case DType::Q6_K:
      for (auto* b = reinterpret_cast<BlockQ6_K*>(p); b < reinterpret_cast<BlockQ6_K*>(p) + n / 256; ++b) {
        b->d = fp32_to_fp16(1.0f / 64);
        for (uint8_t& q : b->ql) q = static_cast<uint8_t>(uniform(0, 255));
        for (uint8_t& q : b->qh) q = static_cast<uint8_t>(uniform(0, 255));
        for (int8_t& s : b->scales) s = static_cast<int8_t>(uniform(-64, 64));
      }
      break;
  }
  return w;
}

// Integer activations in [-4, 4] with +-127 at the start of every 32 values, so that
// both activation quantizers reproduce them exactly (scale +-1).
std::vector<float> exact_activations(int64_t m, int64_t cols, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> small(-4, 4), sign(0, 1);
  std::vector<float> x(size_t(m * cols));
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(small(rng));
  for (size_t i = 0; i < x.size(); i += 32) x[i] = sign(rng) ? 127.0f : -127.0f;
  return x;
}

TEST(Matmul, ExactDataGivesIdenticalResultsOnEveryIsa) {
  ThreadPool pool(3);
  for (DType t : kAllWeightTypes) {
    const int64_t block = std::max<int64_t>(block_elems(t), 32);
    for (int64_t cols : {block, block * 4, int64_t{1024}}) {
      const TestMatrix w = exact_matrix(t, 37, cols, uint32_t(cols));
      for (int64_t m : {1, 2, 3, 5, 16}) {
        const std::vector<float> x = exact_activations(m, cols, uint32_t(m * 7 + cols));
        const Reference ref = reference_matmul(w, x.data(), m);
        for (Isa isa : supported_isas()) {
          const std::vector<float> y = run_matmul(kernels_for(isa), w, x, m, pool);
          for (size_t i = 0; i < y.size(); ++i) {
            ASSERT_EQ(double(y[i]), ref.y[i]) << isa_name(isa) << " " << dtype_name(t) << " cols=" << cols
                                              << " m=" << m << " i=" << i;
          }
        }
      }
    }
  }
}

TEST(Matmul, RandomDataMatchesScalarAndReferenceOnEveryIsa) {
  for (int threads : {1, 3}) {
    ThreadPool pool(threads);
    for (DType t : kAllWeightTypes) {
      const int64_t block = std::max<int64_t>(block_elems(t), 32);
      for (int64_t cols : {block, block * 3, block * 8}) {
        const int64_t rows = 67;  // not a multiple of any split
        const TestMatrix w = random_matrix(t, rows, cols, uint32_t(cols + int(t)));
        for (int64_t m : {1, 2, 3, 16, 33}) {
          const std::vector<float> x = random_floats(m * cols, uint32_t(m + cols));
          const Reference ref = reference_matmul(w, x.data(), m);
          const std::vector<float> scalar = run_matmul(kernels_for(Isa::Scalar), w, x, m, pool);
          for (size_t i = 0; i < scalar.size(); ++i) {
            ASSERT_NEAR(scalar[i], ref.y[i], 1e-5 * ref.scale[i] + 1e-30)
                << dtype_name(t) << " cols=" << cols << " m=" << m << " i=" << i;
          }
          // Every dot family fixes its per-output order: SIMD tables give the scalar bits.
          for (Isa isa : supported_isas()) {
            expect_same_bits(run_matmul(kernels_for(isa), w, x, m, pool), scalar,
                             isa_label(isa) + " " + std::string(dtype_name(t)) + " cols=" + std::to_string(cols) +
                                 " m=" + std::to_string(m));
          }
        }
      }
    }
  }
}

TEST(Matmul, KQuantsAreBitIdenticalToScalarOnEveryIsa) {
  // Their integer block sums are exact and scaled in the reference's order.
  ThreadPool pool(2);
  for (DType t : testing::kKQuantTypes) {
    // 32-value block types also at a width that ends in a partial Q8_K block.
    const int64_t cols = block_elems(t) == 32 ? 32 * 45 : 256 * 5;
    const TestMatrix w = random_matrix(t, 29, cols, 91);
    for (int64_t m : {1, 3, 4, 9}) {
      const std::vector<float> x = random_floats(m * cols, uint32_t(m));
      const std::vector<float> scalar = run_matmul(kernels_for(Isa::Scalar), w, x, m, pool);
      for (Isa isa : supported_isas()) {
        EXPECT_EQ(run_matmul(kernels_for(isa), w, x, m, pool), scalar) << isa_name(isa) << " " << dtype_name(t) << " m=" << m;
      }
    }
  }
}

// A matrix retiled in place: the same bytes rearranged.
struct TiledCopy {
  std::vector<uint8_t> bytes;
  WeightMatrix view;
};
TiledCopy tiled_copy(const TestMatrix& w) {
  TiledCopy c{w.bytes, w.view()};
  std::vector<uint8_t> scratch(retile_scratch_bytes(w.type, w.cols));
  retile_in_place(w.type, c.bytes.data(), w.rows, w.cols, scratch.data());
  c.view.data = c.bytes.data();
  c.view.layout = WeightLayout::Tiled;
  return c;
}

TEST(Matmul, TiledLayoutGivesTheRowMajorBitsOnEveryIsa) {
  for (int threads : {1, 2, 3}) {
    ThreadPool pool(threads);
    for (DType t : {DType::Q8_0, DType::Q4_0, DType::F32, DType::F16, DType::BF16, DType::Q4_K, DType::Q5_K,
                    DType::Q6_K}) {
      // Full tiles only, a tail of 5 rows, fewer rows than one tile; 1, 2, 35 and 40 blocks of
      // 32 (more than one on-the-fly packing chunk for Q8_0 / Q4_0); K-quants: 1, 3, 9 blocks.
      const bool k = block_elems(t) == kQK_K;
      const std::vector<int64_t> widths = k ? std::vector<int64_t>{256, 768, 256 * 9}
                                            : std::vector<int64_t>{32, 64, 32 * 35, 32 * 40};
      for (int64_t rows : {int64_t{32}, int64_t{37}, int64_t{11}, int64_t{3}, int64_t{80}}) {
        for (int64_t cols : widths) {
          ASSERT_TRUE(has_tiled_layout(t, cols));
          const TestMatrix w = random_matrix(t, rows, cols, uint32_t(rows * cols));
          const TiledCopy tiled = tiled_copy(w);
          const int64_t tile_rows = tile_groups(t) > 0 || has_kquant_tiles(t) ? kTileRows : kFloatDotW;
          if (rows >= tile_rows) {
            EXPECT_NE(tiled.bytes, w.bytes);
          } else {
            EXPECT_EQ(tiled.bytes, w.bytes);  // no full tile: everything stays row-major
          }
          // AVX2 unpacks K-quant tiles from m = 3 (Q5_K), 4 (Q4_K), 8 (Q6_K), AVX-512 from 16
          // (Q6_K), 32 (Q5_K) (its Q4_K sweep, from 256 rows: UnpackedKQuantTilesGiveTheScalarBits);
          // float weights: 9, 20, 37 leave AVX2 passes of 6 rows and AVX-512 two-group passes of
          // up to 12 unequal, 20 and 37 take two and three blocks of 16 (37: prefill order).
          for (int64_t m : {1, 3, 4, 5, 8, 9, 16, 20, 37}) {
            const std::vector<float> x = random_floats(m * cols, uint32_t(m + cols));
            const std::vector<float> scalar = run_matmul(kernels_for(Isa::Scalar), w, x, m, pool);
            for (Isa isa : supported_isas()) {
              const std::string what = isa_label(isa) + " " + std::string(dtype_name(t)) + " rows=" +
                                       std::to_string(rows) + " cols=" + std::to_string(cols) +
                                       " m=" + std::to_string(m) + " threads=" + std::to_string(threads);
              expect_same_bits(run_matmul(kernels_for(isa), w, x, m, pool), scalar, "rows " + what);
              expect_same_bits(run_matmul(kernels_for(isa), tiled.view, x, m, pool), scalar, "tiles " + what);
            }
          }
        }
      }
    }
  }
  // Float rows whose width is not a multiple of 16 have no tiled layout.
  EXPECT_FALSE(has_tiled_layout(DType::F16, 100));
  EXPECT_FALSE(has_tiled_layout(DType::Q3_K, 256));
  EXPECT_FALSE(has_tiled_layout(DType::Q5_0, 256));
}

// A tied float output matrix is retiled; the embedding lookup reads its rows back out.
TEST(Matmul, TiledFloatRowsReadBackAsTheyWere) {
  for (DType t : {DType::F32, DType::F16, DType::BF16}) {
    ASSERT_TRUE(tiled_rows_readable(t));
    const TestMatrix w = random_matrix(t, 37, 48, 7);  // two full groups and 5 row-major rows
    const TiledCopy tiled = tiled_copy(w);
    const size_t rb = size_t(row_bytes(t, w.cols));
    std::vector<uint8_t> row(rb);
    for (int64_t r = 0; r < w.rows; ++r) {
      read_tiled_row(t, tiled.bytes.data(), w.rows, w.cols, r, row.data());
      EXPECT_EQ(std::memcmp(row.data(), w.bytes.data() + r * rb, rb), 0) << dtype_name(t) << " row " << r;
    }
  }
  EXPECT_FALSE(tiled_rows_readable(DType::Q8_0));
  EXPECT_FALSE(tiled_rows_readable(DType::Q6_K));
}

// A tiled matrix of `rows` rows through the matmul driver for one activation row (where the
// driver pairs a unit's tiles or groups on ISAs with pair kernels) on 1-3 threads: the scalar
// bits.
void expect_paired_gemv_gives_the_scalar_bits(DType t, int64_t rows, int64_t cols, uint32_t seed) {
  const TestMatrix w = random_matrix(t, rows, cols, seed);
  const TiledCopy tiled = tiled_copy(w);
  const std::vector<float> x = random_floats(cols, 5);
  for (int threads : {1, 2, 3}) {
    ThreadPool pool(threads);
    const std::vector<float> scalar = run_matmul(kernels_for(Isa::Scalar), w, x, 1, pool);
    for (Isa isa : supported_isas()) {
      expect_same_bits(run_matmul(kernels_for(isa), tiled.view, x, 1, pool), scalar,
                       isa_label(isa) + " " + std::string(dtype_name(t)) + " " + std::to_string(rows) +
                           " rows, threads=" + std::to_string(threads));
    }
  }
}

TEST(Matmul, TilePairKernelsGiveEachTileItsSingleTileBits) {
  // tile_dot_pair (two tiles' blocks interleaved, one activation row) against tile_dot on each
  // tile alone, straight from the tables; then through the matmul driver, which pairs the
  // tiles of a unit for m = 1 only when units hold two or more tiles (hundreds of rows).
  for (DType t : {DType::Q8_0, DType::Q4_0}) {
    const int kind = dot_kind(t).index;
    for (int64_t nb : {1, 2, 35}) {
      const int64_t cols = 32 * nb;
      const TestMatrix w = random_matrix(t, 2 * kTileRows, cols, uint32_t(11 * nb + kind));
      const TiledCopy tiled = tiled_copy(w);
      const size_t tile_bytes = size_t(kTileRows) * size_t(row_bytes(t, cols));
      std::vector<uint8_t> xq(q8_group_bytes(cols));
      // The matmul driver's offsets (kernel_table.h): kernels that use corr need them.
      const int32_t offset = t == DType::Q8_0 ? 128 : 8;
      kernels_for(Isa::Scalar).quantize_q8(random_floats(cols, uint32_t(nb)).data(), cols, offset, xq.data(), 0);
      const Q8Group x = q8_group(xq.data(), cols);
      for (Isa isa : supported_isas()) {
        const KernelTable& kt = kernels_for(isa);
        if (kt.tile_dot_pair[kind] == nullptr) continue;  // optional: the driver calls tile_dot twice
        std::vector<float> single(2 * kTileRows, -1.0f), pair(2 * kTileRows, -2.0f);
        const uint16_t* wd[2];
        const uint8_t* codes[2];
        float* y[2];
        for (int k = 0; k < 2; ++k) {
          const uint8_t* tile = static_cast<const uint8_t*>(tiled.view.data) + k * tile_bytes;
          wd[k] = reinterpret_cast<const uint16_t*>(tile);
          codes[k] = tile + nb * kTileRows * sizeof(uint16_t);
          y[k] = pair.data() + k * kTileRows;
          kt.tile_dot[kind](wd[k], codes[k], nb, x, 1, single.data() + k * kTileRows, kTileRows, kTileStream);
        }
        kt.tile_dot_pair[kind](wd, codes, nb, x, y);
        expect_same_bits(pair, single, isa_label(isa) + " " + std::string(dtype_name(t)) + " nb=" + std::to_string(nb));
      }
    }
    // 403 rows: 25 tiles and 3 tail rows, so that units of 6, 3 and 2 tiles (1, 2, 3 threads)
    // pair tiles; 3223 rows: 201 tiles, units of the most a GEMV takes (16 tiles: streams 8
    // tiles apart) on every thread count, the last with an odd tile left over.
    expect_paired_gemv_gives_the_scalar_bits(t, 403, 32 * 35, uint32_t(403 + kind));
    expect_paired_gemv_gives_the_scalar_bits(t, 3223, 32 * 35, uint32_t(3223 + kind));
  }
}

TEST(Matmul, TwoTileKernelsGiveEachTileItsSingleTileBits) {
  // tile2_dot (two consecutive tiles, each broadcast activation feeding both) against
  // tile_dot on each tile alone, straight from the tables, for every activation row count of
  // a group and with accumulation; then through the matmul driver's prefill path (more than
  // kFewActivationRows rows), whose units hand it pairs and an odd tile left over.
  for (DType t : {DType::Q8_0, DType::Q4_0}) {
    const int kind = dot_kind(t).index;
    for (int64_t nb : {1, 2, 35}) {
      const int64_t cols = 32 * nb;
      const TestMatrix w = random_matrix(t, 2 * kTileRows, cols, uint32_t(13 * nb + kind));
      const TiledCopy tiled = tiled_copy(w);
      const auto* tile = static_cast<const uint8_t*>(tiled.view.data);
      const size_t tile_bytes = size_t(kTileRows) * size_t(row_bytes(t, cols));
      const auto* wd = reinterpret_cast<const uint16_t*>(tile);
      const uint8_t* codes = tile + nb * kTileRows * sizeof(uint16_t);
      std::vector<uint8_t> xq(q8_group_bytes(cols));
      const int32_t offset = t == DType::Q8_0 ? 128 : 8;  // the driver's (kernel_table.h)
      for (int i = 0; i < kTileActs; ++i) {
        kernels_for(Isa::Scalar).quantize_q8(random_floats(cols, uint32_t(nb * 8 + i)).data(), cols, offset, xq.data(), i);
      }
      const Q8Group x = q8_group(xq.data(), cols);
      constexpr size_t ys = 2 * kTileRows + 3;  // outputs of one activation row, then a gap
      for (Isa isa : supported_isas()) {
        const KernelTable& kt = kernels_for(isa);
        if (kt.tile2_dot[kind] == nullptr) continue;  // optional: the driver calls tile_dot per tile
        for (int nx = 1; nx <= kTileActs; ++nx) {
          for (int flags : {kTileStream, kTileAccumulate | kTilePrefetchNext}) {
            const std::vector<float> start = random_floats(kTileActs * ys, uint32_t(nx + flags));
            std::vector<float> single = start, two = start;
            kt.tile_dot[kind](wd, codes, nb, x, nx, single.data(), ys, flags);
            kt.tile_dot[kind](reinterpret_cast<const uint16_t*>(tile + tile_bytes), codes + tile_bytes, nb, x, nx,
                              single.data() + kTileRows, ys, flags);
            kt.tile2_dot[kind](wd, codes, nb, x, nx, two.data(), ys, flags);
            expect_same_bits(two, single, isa_label(isa) + " " + std::string(dtype_name(t)) + " nb=" +
                                              std::to_string(nb) + " nx=" + std::to_string(nx) +
                                              " flags=" + std::to_string(flags));
          }
        }
      }
    }
    // 403 rows (25 tiles, 3 tail rows; units of 4, 3, 2 tiles on 1, 2, 3 threads), 37 and 70
    // activation rows (a last group of 5 and of 6).
    const int64_t cols = 32 * 9;
    const TestMatrix w = random_matrix(t, 403, cols, uint32_t(17 + kind));
    const TiledCopy tiled = tiled_copy(w);
    for (int64_t m : {37, 70}) {
      const std::vector<float> x = random_floats(m * cols, uint32_t(m));
      for (int threads : {1, 2, 3}) {
        ThreadPool pool(threads);
        const std::vector<float> scalar = run_matmul(kernels_for(Isa::Scalar), w, x, m, pool);
        for (Isa isa : supported_isas()) {
          expect_same_bits(run_matmul(kernels_for(isa), tiled.view, x, m, pool), scalar,
                           isa_label(isa) + " " + std::string(dtype_name(t)) + " 403 rows, m=" + std::to_string(m) +
                               ", threads=" + std::to_string(threads));
        }
      }
    }
  }
}

TEST(Matmul, FloatTilePairKernelsGiveEachGroupItsSingleGroupBits) {
  // float_tile_pair (two tiled groups read alternately, one activation row) against
  // float_tile_dot on each group alone, straight from the tables; then through the matmul
  // driver, which pairs a unit's tiled groups for m = 1.
  for (DType t : {DType::F32, DType::F16, DType::BF16}) {
    const int index = dot_kind(t).index;
    for (int64_t cols : {16, 48, 2048}) {
      const TestMatrix w = random_matrix(t, 2 * kFloatDotW, cols, uint32_t(cols + index));
      const TiledCopy tiled = tiled_copy(w);
      const size_t group_bytes = size_t(kFloatDotW) * size_t(row_bytes(t, cols));
      const std::vector<float> x = random_floats(cols, uint32_t(cols));
      for (Isa isa : supported_isas()) {
        const KernelTable& kt = kernels_for(isa);
        if (kt.float_tile_pair[index] == nullptr) continue;  // optional: the driver calls per group
        std::vector<float> single(2 * kFloatDotW, -1.0f), pair(2 * kFloatDotW, -2.0f);
        const void* groups[2];
        float* y[2];
        for (int s = 0; s < 2; ++s) {
          groups[s] = static_cast<const uint8_t*>(tiled.view.data) + s * group_bytes;
          y[s] = pair.data() + s * kFloatDotW;
          kt.float_tile_dot[index](groups[s], x.data(), 1, 1, cols, single.data() + s * kFloatDotW, 0, kTileStream);
        }
        kt.float_tile_pair[index](groups, x.data(), cols, y);
        expect_same_bits(pair, single, isa_label(isa) + " " + std::string(dtype_name(t)) + " cols=" + std::to_string(cols));
      }
    }
    // 403 rows: 25 groups and 3 row-major rows, units of 112, 64 and 48 rows (1, 2, 3
    // threads): pairs, an odd group left over, and the row-major tail in the last unit.
    expect_paired_gemv_gives_the_scalar_bits(t, 403, 96, uint32_t(403 + index));
  }
}

TEST(Matmul, KQuantTilesHoldEachRowsBlocks) {
  // Packing is a pure rearrangement: every row's ggml block comes back out of the tile.
  for (DType t : {DType::Q4_K, DType::Q5_K, DType::Q6_K}) {
    const int64_t cols = 256 * 3;
    const TestMatrix w = random_matrix(t, kTileRows, cols, 33);
    const size_t rb = size_t(row_bytes(t, cols)), bb = size_t(block_bytes(t));
    std::vector<uint8_t> tile(w.bytes.size());
    pack_kquant_tile(t, w.bytes.data(), rb, cols / 256, tile.data());
    EXPECT_NE(tile, w.bytes);
    std::vector<uint8_t> block(bb);
    for (int64_t b = 0; b < cols / 256; ++b) {
      for (int r = 0; r < kTileRows; ++r) {
        kquant_tile_row_block(t, tile.data() + b * kTileRows * bb, r, block.data());
        ASSERT_EQ(std::memcmp(block.data(), w.bytes.data() + r * rb + b * bb, bb), 0) << dtype_name(t) << " b=" << b << " r=" << r;
      }
    }
  }
}

// Every code of a row-major Q4_K / Q5_K / Q6_K matrix at its largest value (15, 31, 63): the
// code bytes of each ggml block are Q4_K [16, 144), Q5_K [16, 176) (qh, qs), Q6_K [0, 192)
// (ql, qh); the scales and d stay as they were.
void saturate_kquant_codes(TestMatrix& w, int64_t blocks_per_row) {
  const size_t bb = size_t(row_bytes(w.type, w.cols)) / size_t(blocks_per_row);
  const size_t first = w.type == DType::Q6_K ? 0 : 16, last = w.type == DType::Q6_K ? 192 : bb;
  for (size_t b = 0; b < w.bytes.size() / bb; ++b) std::memset(w.bytes.data() + b * bb + first, 0xFF, last - first);
}

TEST(Matmul, KQuantTileKernelsGiveTheScalarBitsForEveryRowCountAndHint) {
  // The tile kernels straight from the tables: one tile and two tiles a call
  // (kquant_tile2_dot, where the table has it: scalar and AVX-512, which must), 1..kKQuantTileActs
  // activation rows, every prefetch hint, against the
  // scalar table's single-tile kernel (row r's blocks read back out of the tile, the row
  // kernel's arithmetic). Odd activation strides and 1 / 3 / 9 blocks. "saturated": every code
  // at its largest value and the activations at +-127 (the AVX2 kernels add pair sums in int16
  // as far as this worst case allows: a longer run would wrap and change the bits).
  for (DType t : {DType::Q4_K, DType::Q5_K, DType::Q6_K}) {
    const int kind = dot_kind(t).index;
    for (int64_t nb : {1, 3, 9}) {
      for (bool saturated : {false, true}) {
        const int64_t cols = 256 * nb;
        TestMatrix w = random_matrix(t, 2 * kTileRows, cols, uint32_t(7 * nb + kind));
        const size_t rb = size_t(row_bytes(t, cols)), tile_bytes = kTileRows * rb;
        if (saturated) saturate_kquant_codes(w, nb);
        std::vector<uint8_t> tiles(2 * tile_bytes + 64);
        for (int k = 0; k < 2; ++k) pack_kquant_tile(t, w.bytes.data() + k * tile_bytes, rb, nb, tiles.data() + k * tile_bytes);
        const size_t xs = q8_k_row_stride(cols) + 64;  // not the matmul driver's stride
        std::vector<uint8_t> xq(xs * kKQuantTileActs);
        std::vector<float> x = random_floats(cols * kKQuantTileActs, uint32_t(nb + 100));
        if (saturated) {
          for (size_t k = 0; k < x.size(); ++k) x[k] = (k / size_t(cols)) % 2 ? -1.0f : 1.0f;
        }
        for (int i = 0; i < kKQuantTileActs; ++i) kernels_for(Isa::Scalar).quantize_q8_K(x.data() + i * cols, xq.data() + i * xs, cols);
        for (int nx = 1; nx <= kKQuantTileActs; ++nx) {
          const size_t ys = 2 * kTileRows + 3;
          std::vector<float> expected(ys * size_t(nx), -1.0f);
          for (int k = 0; k < 2; ++k) {
            kernels_for(Isa::Scalar).kquant_tile_dot[kind](tiles.data() + k * tile_bytes, nb, xq.data(), xs, nx,
                                                         expected.data() + k * kTileRows, ys, 0);
          }
          for (Isa isa : supported_isas()) {
            const KernelTable& kt = kernels_for(isa);
            if (isa != Isa::Avx2) {
              EXPECT_NE(kt.kquant_tile2_dot[kind], nullptr) << isa_label(isa);
            }
            for (int flags : {0, kTileStream, kTilePrefetchNext}) {
              const std::string what = isa_label(isa) + " " + std::string(dtype_name(t)) + " nb=" + std::to_string(nb) +
                                       " nx=" + std::to_string(nx) + " flags=" + std::to_string(flags) +
                                       (saturated ? " saturated" : "");
              std::vector<float> pair(expected.size(), -1.0f), single(expected.size(), -1.0f);
              if (kt.kquant_tile2_dot[kind] != nullptr) {  // optional (AVX2 has none)
                kt.kquant_tile2_dot[kind](tiles.data(), nb, xq.data(), xs, nx, pair.data(), ys, flags);
              } else {
                pair = expected;
              }
              for (int k = 0; k < 2; ++k) {
                kt.kquant_tile_dot[kind](tiles.data() + k * tile_bytes, nb, xq.data(), xs, nx, single.data() + k * kTileRows,
                                         ys, flags);
              }
              expect_same_bits(pair, expected, "pair " + what);
              expect_same_bits(single, expected, "single " + what);
            }
          }
        }
      }
    }
  }
}

TEST(Matmul, UnpackedKQuantTilesGiveTheScalarBits) {
  // The batched-decode and prefill path of Q4_K / Q5_K / Q6_K where the ISA has it
  // (kernel_table.h; AVX2 and AVX-512, which must): a tile unpacked once, then the unpacked kernel, gives
  // the scalar tile kernel's bits for every activation row count. (The matmul driver's use of
  // it: TiledLayoutGivesTheRowMajorBitsOnEveryIsa, m >= 3.) Odd strides, 1 / 3 / 9 blocks, and
  // two activation rows at the int8 extremes, against random codes and every code at its
  // largest value ("saturated": int16 pair sums near the bound argued in kquant_unpacked_avx2.cpp).
  for (DType t : {DType::Q4_K, DType::Q5_K, DType::Q6_K}) {
    const int kind = dot_kind(t).index;
    for (int64_t nb : {1, 3, 9}) {
      for (bool saturated : {false, true}) {
        const int64_t cols = 256 * nb;
        TestMatrix w = random_matrix(t, kTileRows, cols, uint32_t(11 * nb + kind));
        const size_t rb = size_t(row_bytes(t, cols));
        if (saturated) saturate_kquant_codes(w, nb);
        std::vector<uint8_t> tile(w.bytes.size());
        pack_kquant_tile(t, w.bytes.data(), rb, nb, tile.data());
        const size_t xs = q8_k_row_stride(cols) + 64;
        std::vector<uint8_t> xq(xs * kKQuantTileActs);
        std::vector<float> x = random_floats(cols * kKQuantTileActs, uint32_t(nb + 200));
        for (int64_t k = 0; k < cols; ++k) x[k] = k % 2 ? 1.0f : -1.0f;       // row 0: +-127
        for (int64_t k = 0; k < cols; ++k) x[cols + k] = k % 3 ? -1.0f : 0.5f;  // row 1: -127 mostly
        for (int i = 0; i < kKQuantTileActs; ++i) kernels_for(Isa::Scalar).quantize_q8_K(x.data() + i * cols, xq.data() + i * xs, cols);
        for (Isa isa : supported_isas()) {
          const KernelTable& kt = kernels_for(isa);
          if (isa == Isa::Avx2 || isa == Isa::Avx512) {
            ASSERT_NE(kt.kquant_unpacked_dot[kind], nullptr) << isa_label(isa) << " " << dtype_name(t);
          }
          if (kt.kquant_unpacked_dot[kind] == nullptr) continue;
          std::vector<uint8_t> unpacked(size_t(nb) * kKQuantUnpackedBlockBytes[kind]);
          kt.kquant_unpack[kind](tile.data(), nb, unpacked.data());
          for (int nx = 1; nx <= kKQuantTileActs; ++nx) {
            const size_t ys = kTileRows + 5;
            std::vector<float> expected(ys * size_t(nx), -1.0f), got(expected.size(), -1.0f);
            kernels_for(Isa::Scalar).kquant_tile_dot[kind](tile.data(), nb, xq.data(), xs, nx, expected.data(), ys, 0);
            kt.kquant_unpacked_dot[kind](unpacked.data(), nb, xq.data(), xs, nx, got.data(), ys);
            expect_same_bits(got, expected, isa_label(isa) + " " + std::string(dtype_name(t)) + " nb=" + std::to_string(nb) +
                                                " nx=" + std::to_string(nx) + (saturated ? " saturated" : ""));
          }
        }
      }
    }
  }
}

TEST(Matmul, ARowsResultDoesNotDependOnTheOtherRows) {
  // What the forward relies on: a sequence gives the same logits alone or in any batch.
  ThreadPool pool(2);
  for (DType t : kAllWeightTypes) {
    const int64_t cols = std::max<int64_t>(block_elems(t), 32) * 8;
    const TestMatrix w = random_matrix(t, 53, cols, 17);
    const int64_t m = 21;
    const std::vector<float> x = random_floats(m * cols, 18);
    for (Isa isa : supported_isas()) {
      const std::vector<float> all = run_matmul(kernels_for(isa), w, x, m, pool);
      for (int64_t i : {int64_t{0}, int64_t{7}, int64_t{20}}) {
        const std::vector<float> xi(x.begin() + i * cols, x.begin() + (i + 1) * cols);
        const std::vector<float> alone = run_matmul(kernels_for(isa), w, xi, 1, pool);
        expect_same_bits(alone, std::vector<float>(all.begin() + i * w.rows, all.begin() + (i + 1) * w.rows),
                         isa_label(isa) + " " + std::string(dtype_name(t)) + " row " + std::to_string(i));
      }
    }
  }
}

TEST(Matmul, MultiGivesEachMatrixItsOwnMatmul) {
  ThreadPool pool(2);
  for (DType t : kAllWeightTypes) {
    const int64_t cols = std::max<int64_t>(block_elems(t), 32) * 4;
    const TestMatrix a = random_matrix(t, 48, cols, 1), b = random_matrix(t, 16, cols, 2), c = random_matrix(t, 19, cols, 3);
    for (int64_t m : {1, 9}) {
      const std::vector<float> x = random_floats(m * cols, 4);
      for (Isa isa : supported_isas()) {
        const KernelTable& kt = kernels_for(isa);
        std::vector<float> ya(size_t(m * a.rows)), yb(size_t(m * b.rows)), yc(size_t(m * c.rows));
        const WeightMatrix wa = a.view(), wb = b.view(), wc = c.view();
        const WeightMatrix* ws[] = {&wa, &wb, &wc};
        float* ys[] = {ya.data(), yb.data(), yc.data()};
        size_t scratch_bytes = 0;
        for (const WeightMatrix* w : ws) scratch_bytes = std::max(scratch_bytes, matmul_scratch_bytes(*w, m));
        AlignedBuffer<uint8_t> scratch(scratch_bytes + 1);
        matmul_multi(kt, ws, x.data(), m, ys, scratch.data(), pool);
        const std::string what = isa_label(isa) + " " + std::string(dtype_name(t)) + " m=" + std::to_string(m);
        expect_same_bits(ya, run_matmul(kt, a, x, m, pool), what + " a");
        expect_same_bits(yb, run_matmul(kt, b, x, m, pool), what + " b");
        expect_same_bits(yc, run_matmul(kt, c, x, m, pool), what + " c");
      }
    }
  }
}

// Any two types in one call: those that share their activations (Q4_K with Q6_K, a float
// type beside a quantized one at m = 1) in one pass, the others one after the other; either
// way each output is its own matmul's and the prologue runs once per row.
TEST(Matmul, MultiOfMixedTypesGivesEachMatrixItsOwnMatmul) {
  ThreadPool pool(2);
  constexpr int64_t kCols = 512;
  for (DType ta : kAllWeightTypes) {
    for (DType tb : kAllWeightTypes) {
      const TestMatrix a = random_matrix(ta, 160, kCols, 10), b = random_matrix(tb, 40, kCols, 11);
      for (int64_t m : {1, 3}) {
        const std::vector<float> source = random_floats(m * kCols, 12);
        std::vector<float> doubled(source.size());
        for (size_t k = 0; k < source.size(); ++k) doubled[k] = 2 * source[k];
        for (Isa isa : supported_isas()) {
          const KernelTable& kt = kernels_for(isa);
          struct Ctx {
            const float* source;
            float* x;
            std::vector<int> calls;
          } ctx{source.data(), nullptr, std::vector<int>(size_t(m))};
          std::vector<float> x(source.size(), NAN);
          ctx.x = x.data();
          auto double_row = [](void* p, int64_t i) {
            auto* c = static_cast<Ctx*>(p);
            for (int64_t k = 0; k < kCols; ++k) c->x[i * kCols + k] = 2 * c->source[i * kCols + k];
            ++c->calls[size_t(i)];
          };
          std::vector<float> ya(size_t(m * a.rows), NAN), yb(size_t(m * b.rows), NAN);
          const WeightMatrix wa = a.view(), wb = b.view();
          const WeightMatrix* ws[] = {&wa, &wb};
          float* ys[] = {ya.data(), yb.data()};
          AlignedBuffer<uint8_t> scratch(std::max(matmul_scratch_bytes(wa, m), matmul_scratch_bytes(wb, m)) + 1);
          matmul_multi(kt, ws, x.data(), m, ys, scratch.data(), pool, {double_row, &ctx});
          const std::string what = isa_label(isa) + " " + std::string(dtype_name(ta)) + " + " +
                                   std::string(dtype_name(tb)) + " m=" + std::to_string(m);
          expect_same_bits(ya, run_matmul(kt, a, doubled, m, pool), what + " first");
          expect_same_bits(yb, run_matmul(kt, b, doubled, m, pool), what + " second");
          for (int calls : ctx.calls) ASSERT_EQ(calls, 1) << what;
        }
      }
    }
  }
}

TEST(Matmul, RowPrologueRunsOnceOnEveryRowBeforeItIsRead) {
  ThreadPool pool(2);
  for (DType t : kAllWeightTypes) {
    const int64_t cols = std::max<int64_t>(block_elems(t), 32) * 4;
    const TestMatrix w = random_matrix(t, 40, cols, 8);
    for (int64_t m : {1, 5, 64}) {
      const std::vector<float> source = random_floats(m * cols, 9);
      // The prologue writes row i = 2 * source row i and counts its calls.
      struct Ctx {
        const float* source;
        float* x;
        int64_t cols;
        std::vector<int> calls;
      } ctx{source.data(), nullptr, cols, std::vector<int>(size_t(m))};
      std::vector<float> x(source.size(), NAN);
      ctx.x = x.data();
      auto double_row = [](void* p, int64_t i) {
        auto* c = static_cast<Ctx*>(p);
        for (int64_t k = 0; k < c->cols; ++k) c->x[i * c->cols + k] = 2 * c->source[i * c->cols + k];
        ++c->calls[size_t(i)];
      };
      std::vector<float> y(size_t(m * w.rows));
      const WeightMatrix view = w.view();
      const WeightMatrix* ws[] = {&view};
      float* ys[] = {y.data()};
      AlignedBuffer<uint8_t> scratch(matmul_scratch_bytes(view, m) + 1);
      matmul_multi(ws, x.data(), m, ys, scratch.data(), pool, {double_row, &ctx});
      std::vector<float> doubled(source.size());
      for (size_t k = 0; k < source.size(); ++k) doubled[k] = 2 * source[k];
      expect_same_bits(y, run_matmul(kernels_for(active_isa()), w, doubled, m, pool),
                       std::string(dtype_name(t)) + " m=" + std::to_string(m));
      for (int calls : ctx.calls) ASSERT_EQ(calls, 1) << dtype_name(t);
    }
  }
}

TEST(Matmul, FloatWeightsWithAnyColumnCount) {
  ThreadPool pool(2);
  for (DType t : {DType::F32, DType::F16, DType::BF16}) {
    for (int64_t cols : {1, 7, 15, 16, 17, 33, 100}) {
      const TestMatrix w = random_matrix(t, 13, cols, uint32_t(cols));
      for (int64_t m : {1, 2, 5}) {
        const std::vector<float> x = random_floats(m * cols, uint32_t(m * cols));
        const Reference ref = reference_matmul(w, x.data(), m);
        const std::vector<float> scalar = run_matmul(kernels_for(Isa::Scalar), w, x, m, pool);
        for (Isa isa : supported_isas()) {
          const std::vector<float> y = run_matmul(kernels_for(isa), w, x, m, pool);
          for (size_t i = 0; i < y.size(); ++i) {
            ASSERT_NEAR(y[i], ref.y[i], 1e-5 * ref.scale[i] + 1e-30) << isa_name(isa) << " " << dtype_name(t) << " cols=" << cols;
          }
          expect_same_bits(y, scalar, isa_label(isa) + " " + std::string(dtype_name(t)) + " cols=" + std::to_string(cols));
        }
      }
    }
  }
}

TEST(Matmul, PublicEntryPointUsesTheActiveTable) {
  ThreadPool pool(2);
  const TestMatrix w = random_matrix(DType::Q4_0, 40, 256, 5);
  const std::vector<float> x = random_floats(3 * 256, 6);
  AlignedBuffer<uint8_t> scratch(matmul_scratch_bytes(w.view(), 3) + 1);
  std::vector<float> y(3 * 40);
  matmul(w.view(), x.data(), 3, y.data(), scratch.data(), pool);
  const std::vector<float> expected = run_matmul(kernels_for(active_isa()), w, x, 3, pool);
  for (size_t i = 0; i < y.size(); ++i) EXPECT_EQ(y[i], expected[i]) << i;
}

TEST(Matmul, ScratchSizes) {
  // Float weights: one activation row is read as it is; several are transposed in blocks.
  const WeightMatrix f16{DType::F16, nullptr, 10, 64};
  EXPECT_EQ(matmul_scratch_bytes(f16, 1), 0u);
  EXPECT_GE(matmul_scratch_bytes(f16, 8), 8u * 64 * sizeof(float));
  EXPECT_GE(matmul_scratch_bytes(f16, 17), 17u * 64 * sizeof(float));
  const WeightMatrix q4{DType::Q4_0, nullptr, 10, 64};
  EXPECT_GE(matmul_scratch_bytes(q4, 3), 3u * (64 + 2 * 4 + 2 * 4));
  EXPECT_EQ(matmul_scratch_bytes(q4, 3) % 64, 0u);
  const WeightMatrix q6{DType::Q6_K, nullptr, 10, 512};
  EXPECT_GE(matmul_scratch_bytes(q6, 2), 2u * 2 * 292);
  EXPECT_EQ(matmul_scratch_bytes(q6, 2) % 64, 0u);
}

}  // namespace
}  // namespace spillway::kernels
