// One implementation of every dispatched kernel per instruction-set level.
//
// kernels_for(isa) returns the table; the public functions in kernels.h call the table of
// active_isa(). Tests compare each table against kernels_for(Isa::Scalar); benches time
// each one. Tables are immutable, built once, and valid for the whole process.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "kernels/kernels.h"
#include "kernels/exp_sum.h"
#include "kernels/ops/sample_scan.h"

namespace spillway::kernels {

// The dot family of a weight type and its index in that family's KernelTable array:
// Float (float_dot: F32 0, F16 1, BF16 2), Tile (tile_dot: Q8_0 0, Q4_0 1),
// KQuant (kquant_dot: Q4_K 0, Q6_K 1, Q5_K 2, Q3_K 3, Q2_K 4, Q4_1 5, Q5_0 6, Q5_1 7).
enum class DotFamily { Float, Tile, KQuant };
struct DotKind {
  DotFamily family;
  int index;
};
DotKind dot_kind(DType t);

// How matmul presents activations to the dot kernels of a weight type.
enum class ActivationFormat {
  F32,   // the caller's fp32 rows as they are
  Q8,    // interleaved groups of int8 rows (below), for Q8_0 / Q4_0 weights
  Q8_K,  // rows of BlockQ8_K (256 values, float d, int16 bsums), for the KQuant family
};
ActivationFormat activation_format(DType t);

// ---- quantized activations for Q8_0 / Q4_0 weights ------------------------------------
// Rows are quantized as llama.cpp's quantize_row_q8_0 (32-value blocks, d = fp16(amax / 127),
// q = round-half-even(x * 127 / amax)) into groups of kTileActs rows, interleaved so that a
// tile kernel reads the same four elements of every row of the group at one pointer. A
// group of n-value rows (nb = n / 32 blocks) takes q8_group_bytes(n) bytes:
//   int32_t q4[nb][8][kTileActs]   q4[b][g][i]: q of elements 4g..4g+3 of block b, row i
//   float   d[nb][kTileActs]       the block scale fp16(amax / 127), widened (exact)
//   int32_t corr[nb][kTileActs]    -offset * (sum of the block's q)
// corr lets the dot kernels multiply unsigned weight codes: q_w = code - offset (Q8_0:
// code = q + 128, offset 128; Q4_0: code = nibble, offset 8), so that
// sum(q_w * q_x) = sum(code * q_x) + corr.
constexpr int kTileActs = 8;
size_t q8_group_bytes(int64_t n);
// The arrays of a group, advanced to block b0.
struct Q8Group {
  const int32_t* q4 = nullptr;
  const float* d = nullptr;
  const int32_t* corr = nullptr;
};
Q8Group q8_group(const void* group, int64_t n, int64_t b0 = 0);
// Quantizes n values (a multiple of 32) into row `row` (< kTileActs) of a group. Every ISA's
// quantizer gives bit-identical output.
using QuantizeQ8Fn = void (*)(const float* x, int64_t n, int32_t offset, void* group, int row);
// Bytes of one Q8_K activation row of `cols` values (a multiple of 32; a last partial block
// of 256 is quantized zero-padded), a multiple of 64.
size_t q8_k_row_stride(int64_t cols);

// ---- row-interleaved weight tiles (WeightLayout::Tiled: Q8_0, Q4_0) ---------------------
// kTileRows consecutive weight rows of nb blocks are stored as
//   uint16_t d[nb][16]                 fp16 scale of block b of row r at d[b][r]
//   uint8_t  codes[nb][G][16][4]       G = 8 (Q8_0) or 4 (Q4_0) groups of four bytes
// Q8_0: codes[b][g][r][l] = q[b][4g + l] + 128 (as uint8); Q4_0: codes[b][g][r][l] =
// qs[b][4g + l], i.e. element 4g + l in the low nibble and 16 + 4g + l in the high one.
// A tile takes exactly the bytes of its 16 rows; rows after the last full tile stay
// row-major after the tiles. So a vpdpbusd of one 64-byte group against four broadcast
// activation bytes advances 16 rows by four elements.
constexpr int kTileRows = 16;
int tile_groups(DType t);                 // G; 0 if t has no tiled layout
size_t tile_block_code_bytes(DType t);    // 16 * 4 * G

// Packs blocks [b0, b0 + nbc) of n_rows (<= 16) row-major rows (row r at rows + r * row_bytes)
// into a tile's arrays: wd[nbc][16], codes[nbc][G][16][4]; rows n_rows..15 are zero.
void pack_tile(DType t, const uint8_t* rows, size_t row_bytes, int n_rows, int64_t b0, int64_t nbc,
               uint16_t* wd, uint8_t* codes);

// The tile dot: for weight row r < 16 and activation row i < nx (1..kTileActs) of a group:
//   acc = (flags & kTileAccumulate) ? y[i * ys + r] : 0
//   for b < nb: acc = fma(d_w[b][r] * d_x[b][i], float(isum[b][r][i]), acc)
//   y[i * ys + r] = acc
// isum is the exact integer block dot. This per-output order is the contract of every
// implementation of Q8_0 / Q4_0 weights (tiled or row-major, any ISA, any m), so results
// are bit-identical between them. wd / codes: a tile's arrays advanced to block b0, x the
// group at the same block. Prefetch hints (they change no result): kTileStream, the tile is
// read from memory for the first time (prefetch ahead in it); kTilePrefetchNext, the tile is
// in cache and the next tile of the matrix (right after it: a full tile of nb blocks) is
// prefetched meanwhile.
constexpr int kTileAccumulate = 1;
constexpr int kTileStream = 2;
constexpr int kTilePrefetchNext = 4;
using TileDotFn = void (*)(const uint16_t* wd, const uint8_t* codes, int64_t nb, const Q8Group& x,
                           int nx, float* y, size_t ys, int flags);
// Two whole tiles (nb blocks each, both streaming from memory) against activation row 0 of the
// group: y[s][r] for tile s, as tile_dot(wd[s], codes[s], nb, x, 1, y[s], _, kTileStream) gives
// them, bit for bit. The tiles' blocks are read interleaved, two weight streams in flight at
// once, which a GEMV with one stream per thread does not reach (bench/README.md, "Two weight
// streams per thread"). Null where an ISA has none: the driver then calls tile_dot per tile.
using TileDotPairFn = void (*)(const uint16_t* const wd[2], const uint8_t* const codes[2], int64_t nb,
                               const Q8Group& x, float* const y[2]);
// KernelTable::tile2_dot: TileDotFn on two consecutive tiles (the second right after the
// first, nb blocks later; wd / codes are the first's), y[i * ys + r] for r < 32: the same bits
// as tile_dot on each tile. Each broadcast activation dword then feeds both tiles' vpdpbusd
// (prefill on AVX-512 is bound by those loads, bench/README.md). kTilePrefetchNext prefetches
// the next pair. Null where an ISA has none (scalar, AVX2): the driver calls tile_dot per tile.

// ---- float weights (F32 / F16 / BF16) ------------------------------------------------------
// y[i * ys + j] = w_j . x_i for j < nw (1..kFloatDotW), i < nx (1..kFloatDotX); w_j at
// w + j * w_stride bytes; value k of x_i at x[k * x_step + i] (x_step 1 for one activation
// row; the matmul driver hands several rows over transposed, x_step kFloatDotX, so every
// broadcast of a k comes from one line). Every implementation computes each output as one
// fused chain in increasing k: acc = 0; acc = fma(w[k], x[k], acc) for k = 0 .. cols - 1
// (w[k] widened to fp32 exactly). Results are bit-identical across ISAs, tilings and m. (The
// SIMD kernels put weight rows in the lanes, so one widened weight vector feeds every
// activation row; bench/README.md, "Float weights: rows in the lanes".)
// Tiled layout (cols a multiple of 16): groups of kFloatDotW rows; in a group, value k of row
// r is element (kFloatDotW * k + r), so a group is read as one sequential run and a vector
// load at k holds 16 rows' values. Rows past the last full group stay row-major.
constexpr int kFloatDotW = 16;
constexpr int kFloatDotX = 16;
using FloatDotFn = void (*)(const void* w, size_t w_stride, int nw, const float* x, size_t x_step, int nx,
                            int64_t cols, float* y, size_t ys);
// One tiled group of kFloatDotW rows at w (cols a multiple of 16) against nx activation rows.
// flags (hints, no result changes): kTilePrefetchNext prefetches the next group (right after
// this one) meanwhile; kTileStream, the group streams from memory (prefetch ahead in it).
using FloatTileDotFn = void (*)(const void* w, const float* x, size_t x_step, int nx, int64_t cols, float* y,
                                size_t ys, int flags);
// Activation rows for the float kernels' x_step = kFloatDotX form: value k of row r (r < n,
// n <= kFloatDotX; row r at x + r * x_stride) to out[k * kFloatDotX + r] for k < cols. Slots
// r >= n are left as they are.
using TransposeRowsFn = void (*)(const float* x, size_t x_stride, int n, int64_t cols, float* out);
// Two tiled groups (both streaming from memory) against one activation row: y[s][j] for group
// w[s], as float_tile_dot(w[s], x, 1, 1, cols, y[s], _, kTileStream) gives them, bit for bit,
// the groups' values read alternately: two weight streams per thread (and two independent
// fma chains), as TileDotPairFn. Null where an ISA has none: the driver then calls
// float_tile_dot per group.
using FloatTilePairFn = void (*)(const void* const w[2], const float* x, int64_t cols, float* const y[2]);
// KernelTable::float_tile2_dot: FloatTileDotFn on two consecutive tiled groups (the second
// right after the first, kFloatDotW * cols values on), y[i * ys + r] for r < 2 kFloatDotW: the
// same bits as float_tile_dot on each group. Each broadcast activation then feeds both groups'
// fmas (one load per two fmas instead of one). Null where an ISA has none: per group.

// ---- the KQuant family x Q8_K activations -----------------------------------------------------
// Most activation rows one dot call handles; the weight row is decoded once for all.
constexpr int kMaxDotRows = 4;
// y[i * y_stride] = w_row · x_i for i < nx (1 <= nx <= kMaxDotRows), where x_i is the
// activation row at x + i * x_stride bytes (BlockQ8_K); cols values. Per output, from acc = 0,
// block by block in increasing order (dx = the activation block's d, dw / dmin / mw the weight
// block's fp16 fields widened, bs = the activation's 16-value block sums), with exact int32
// integer sums:
//   Q4_K / Q5_K / Q2_K (256 blocks): acc += (dx * dw) * float(sum_g sc_g * sum q x)
//                                          - (dx * dmin) * float(sum_g m_g * bs_g)
//   Q6_K / Q3_K (256 blocks):        acc += (dx * dw) * float(sum_g sc_g * sum q x), q signed
//   Q5_0 (32 blocks):                acc += (dx * dw) * float(sum (q - 16) x)
//   Q4_1 / Q5_1 (32 blocks):         acc += (dx * dw) * float(sum q x) + (dx * mw) * float(bs)
// (a 32 block of Q4_1 / Q5_0 / Q5_1 reads sub-block k % 8 of activation block k / 8).
using DotRowsFn = void (*)(const void* w_row, const void* x, size_t x_stride, int nx,
                           int64_t cols, float* y, size_t y_stride);
// ---- K-quant tiles (WeightLayout::Tiled: Q4_K, Q5_K, Q6_K) -----------------------------------
// kTileRows consecutive rows, block-major: block b of the tile at tile + b * 16 * block_bytes(t).
// Inside, each field of ggml's block struct (Q4_K: d, dmin, scales[12], qs[128]; Q5_K: d, dmin,
// scales[12], qh[32], qs[128]; Q6_K: ql[128], qh[64], scales[16], d) sits at 16 x its offset in
// the struct as [bytes / unit][16 rows][unit], unit 2 for the fp16 fields, 1 for Q6_K's scales,
// 4 otherwise. So one 64-byte load holds the same four quant bytes of all 16 rows (a vpdpbusd
// against four broadcast activation bytes), and a tile takes exactly the bytes of its rows.
bool has_kquant_tiles(DType t);
// Packs nb blocks of 16 row-major rows (row r at rows + r * row_bytes) into a tile.
void pack_kquant_tile(DType t, const uint8_t* rows, size_t row_bytes, int64_t nb, uint8_t* tile);
// Row r's block (ggml's struct) of the tile block at tile_block.
void kquant_tile_row_block(DType t, const uint8_t* tile_block, int r, uint8_t* block);
// Most activation rows one K-quant tile dot call sweeps over the tile (the unpacked codes and
// scales of each block are shared by all of them).
constexpr int kKQuantTileActs = 8;
// y[i * ys + r] = row r of the tile · activation row i (BlockQ8_K rows at x + i * x_stride) for
// r < 16, i < nx (1..kKQuantTileActs), nb blocks, each output in DotRowsFn's order (so tiled and
// row-major weights give the same bits). flags: kTileStream / kTilePrefetchNext as TileDotFn.
using KQuantTileDotFn = void (*)(const uint8_t* tile, int64_t nb, const void* x, size_t x_stride, int nx, float* y,
                                 size_t ys, int flags);
// Index in KernelTable::kquant_tile_dot: Q4_K 0, Q6_K 1, Q5_K 2 (as dot_kind).
// KernelTable::kquant_tile2_dot: the same on two consecutive tiles (the second at tile + 16 *
// nb * block_bytes(t)), y[i * ys + r] for r < 32: the same bits as two kquant_tile_dot calls.
// Null where an ISA has no paired kernel (AVX2): the driver then calls kquant_tile_dot per tile.
// (Each broadcast activation dword then feeds both tiles' vpdpbusd: the AVX-512 kernels are
// bound by loads, bench/README.md.) kTilePrefetchNext prefetches the next pair.

// ---- K-quant tiles unpacked for batched decode and prefill (AVX2, AVX-512; null in scalar) --
// With several activation rows each tile is swept by every few of them, and unpacking the codes
// and the packed scales costs as much as multiplying them; unpacking a tile once per matmul
// leaves the sweeps loads and multiply-adds. An unpacked block is kKQuantUnpackedBlockBytes[kind]
// (kind as kquant_tile_dot: Q4_K 0, Q6_K 1, Q5_K 2) in the layout of
// matmul/kquant_unpacked_avx2.cpp, whose unpacking the AVX-512 table shares (its fields are
// [16 rows][4 bytes] units: 32-byte halves for AVX2, one 64-byte vector for AVX-512).
constexpr size_t kKQuantUnpackedBlockBytes[3] = {4928, 5664, 4928};
// nb blocks of the tile at tile -> nb unpacked blocks at out.
using KQuantUnpackFn = void (*)(const uint8_t* tile, int64_t nb, uint8_t* out);
// KQuantTileDotFn on an unpacked tile (1..kKQuantTileActs rows, no prefetch hints): the same bits.
using KQuantUnpackedDotFn = void (*)(const uint8_t* unpacked, int64_t nb, const void* x, size_t x_stride, int nx,
                                     float* y, size_t ys);

// n values -> activation blocks. Every ISA's quantizer gives bit-identical output.
using QuantizeActivationsFn = void (*)(const float* x, void* dst, int64_t n);

struct KernelTable {
  Isa isa = Isa::Scalar;
  QuantizeQ8Fn quantize_q8 = nullptr;             // n multiple of 32
  QuantizeActivationsFn quantize_q8_K = nullptr;  // n multiple of 256
  FloatDotFn float_dot[3] = {};                   // F32, F16, BF16
  FloatTileDotFn float_tile_dot[3] = {};          // F32, F16, BF16, tiled
  FloatTilePairFn float_tile_pair[3] = {};        // the same, two groups, one row; null: per group
  FloatTileDotFn float_tile2_dot[3] = {};         // the same, two groups a call; null: per group
  TransposeRowsFn transpose_rows = nullptr;       // several activation rows for the float kernels
  TileDotFn tile_dot[2] = {};                     // Q8_0, Q4_0
  TileDotPairFn tile_dot_pair[2] = {};            // Q8_0, Q4_0; null: two tile_dot calls
  TileDotFn tile2_dot[2] = {};                    // Q8_0, Q4_0, two tiles a call; null: per tile
  DotRowsFn kquant_dot[8] = {};                   // the KQuant family, indexed as dot_kind()
  KQuantTileDotFn kquant_tile_dot[3] = {};        // Q4_K, Q6_K, Q5_K tiles
  KQuantTileDotFn kquant_tile2_dot[3] = {};       // the same, two tiles a call
  KQuantUnpackFn kquant_unpack[3] = {};           // the same tiles, unpacked
  KQuantUnpackedDotFn kquant_unpacked_dot[3] = {};
  // From how many activation rows the matmul unpacks (where kquant_unpacked_dot is set): the
  // row count from which this ISA's unpacked sweep beats its tile kernels (bench/README.md).
  int kquant_unpack_min_rows[3] = {};

  void (*to_fp16)(const float* x, uint16_t* y, int64_t n) = nullptr;
  void (*rms_norm)(const float* x, const float* weight, float* y, int64_t n, float eps) = nullptr;
  void (*softmax)(float* x, int64_t n) = nullptr;
  void (*silu_mul)(const float* gate, const float* up, float* out, int64_t n) = nullptr;
  void (*add_inplace)(float* y, const float* x, int64_t n) = nullptr;
  // As kernels::conv_silu (kernels.h): the sums have the same bits on every ISA, the SiLU is
  // this table's silu_mul (times 1).
  void (*conv_silu)(const float* taps, int64_t C, const float* const* rows, int32_t K, int64_t c0, int64_t c1,
                    float* out) = nullptr;
  // As kernels::exp_scaled_sum (exp_sum.h): every ISA gives the same bits.
  double (*exp_scaled_sum)(const float* x, float shift, float scale, float* out, int64_t n) = nullptr;
  // As kernels::row_range / band_masses / band_pack (sample_scan.h): every ISA gives the same bits.
  RowRange (*row_range)(const float* x, int64_t n) = nullptr;
  double (*band_masses)(const float* x, const float* e, int64_t n, double inv_sum, const float* lower,
                        double* band, float* p_out) = nullptr;
  int64_t (*band_pack)(const float* x, const float* p, const int32_t* ids, int64_t n, float lo, float hi,
                       float* out_x, float* out_p, int32_t* out_ids) = nullptr;
  // As kernels::exp_band_sums (sample_scan.h): every ISA gives the same bits.
  double (*exp_band_sums)(const float* x, float shift, float scale, int64_t n, const float* lower,
                          double* above, float* top_x, int32_t* top_ids, int64_t* n_top) = nullptr;
  // Rotates with a precomputed table: cos_sin[2i], cos_sin[2i+1] = cos, sin of theta_i
  // for i < rot_dim / 2 (rope_table below).
  void (*rope)(float* x, int n_heads, int head_dim, int rot_dim, const float* cos_sin,
               RopeStyle style) = nullptr;
  // As kernels::attention (kernels.h).
  void (*attention)(const float* q, size_t q_stride, int n_tokens, int n_group, int head_dim,
                    const KvView& k, const KvView& v, int kv_head, const int64_t* key_counts, float scale,
                    float* out, size_t out_stride, float* scratch) = nullptr;
  // As kernels::gated_delta_net (kernels.h).
  void (*gated_delta_net)(const GatedDeltaNetArgs& args) = nullptr;
};

// matmul() / matmul_multi() on a given table (the public ones use the active table).
void matmul(const KernelTable& kt, const WeightMatrix& w, const float* x, int64_t m, float* y,
            void* scratch, ThreadPool& pool);
void matmul_multi(const KernelTable& kt, std::span<const WeightMatrix* const> ws, const float* x, int64_t m,
                  std::span<float* const> ys, void* scratch, ThreadPool& pool, RowPrologue prologue = {});

// Largest rot_dim rope() accepts (its angle table lives on the stack).
constexpr int kMaxRopeDim = 1024;
// cos_sin[2i], cos_sin[2i+1] for i < rot_dim / 2, computed as llama.cpp does: theta
// starts at pos and is multiplied by base^(-2/rot_dim) per pair, then divided by
// freq_factors[i] and multiplied by freq_scale.
void rope_table(int rot_dim, int64_t pos, float freq_base, float freq_scale,
                const float* freq_factors, float* cos_sin);

// Per-ISA tables, defined in kernels_scalar.cpp, kernels_avx2.cpp, kernels_avx512.cpp.
const KernelTable& scalar_kernel_table();
const KernelTable& avx2_kernel_table();
const KernelTable& avx512_kernel_table();

}  // namespace spillway::kernels
