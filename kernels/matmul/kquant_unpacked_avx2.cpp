// AVX2: K-quant tiles (Q4_K, Q5_K, Q6_K) unpacked once per matmul, and the kernels that sweep
// them with activation rows (kernel_table.h, "K-quant tiles unpacked"). The matmul driver uses
// them from a few activation rows on (batched decode, prefill; kquant_unpack_min_rows below);
// the GEMV keeps the tile kernels of dot_avx2.cpp, which read the packed tile straight from DRAM.
//
// Why: the tile kernels unpack codes and scales again for every 4 activation rows, and on
// AVX2 the integer multiply of each 16- or 32-value sum by its scale (vpmulld) costs as much
// as the dot itself. Here the codes are bytes, the scales int16 "row pairs" (two int16 in row
// r's 32-bit lane), and each sub-block's sum is formed in int16 (vpmaddubsw pair sums added
// while they stay below 2^15) and scaled and widened by one vpmaddwd. All integer sums are
// exact, so every output has the bits of the scalar reference (DotRowsFn's order).
//
// Unpacked block layouts (byte offsets; rows 0-7 of each [16 r] field are its first 32 bytes):
//   Q6_K (5664): codes  [16 groups g][4 quads l][16 r][4]  code q + 32 of value 16 g + 4 l + k
//                scale  [16 g][16 r] row pairs (sc_g, sc_g)       at 4096
//                pairs  [8 k][16 r] row pairs (sc_2k, sc_2k+1)    at 5120 (for -32 sum sc bsum)
//                d      [16 r] fp16                                at 5632
//   Q4_K / Q5_K (4928): codes [8 sub-blocks j][8 quads l][16 r][4]  value 32 j + 4 l + k
//                scale  [8 j][16 r] row pairs (sc_j, sc_j)         at 4096
//                mins   [4 k][16 r] row pairs (m_a, m_b), (a, b) = (0,2) (1,3) (4,6) (5,7)
//                                                                  at 4608
//                d, dmin [16 r] fp16 each                          at 4864, 4896
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "kernels/kernel_registry.h"
#include "kernels/matmul/kquant_decode_avx2.h"
#include "kernels/quant/quant_blocks.h"

namespace spillway::kernels {

namespace {

inline __m256i load32(const uint8_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }
inline void store32(uint8_t* p, __m256i v) { _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), v); }
inline __m256i broadcast_dword(const void* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm256_set1_epi32(v);
}
// The packed block kUnpackAheadBlocks after blk (past the tile's end: the unit's next tile,
// or nothing; prefetches never fault). The unpacking reads a block's fields in three or four
// interleaved streams that the hardware prefetchers did not follow: without this, unpacking a
// 5632x2048 Q6_K matrix took ~1 ms on one thread and with it ~0.4 ms (AVX-512 machine,
// bench/README.md, "K-quant tiles unpacked on AVX-512").
constexpr size_t kUnpackAheadBlocks = 2;
template <size_t kBlockBytes>
inline void prefetch_block_ahead(const uint8_t* blk) {
  const char* p = reinterpret_cast<const char*>(blk) + kUnpackAheadBlocks * kBlockBytes;
  // A loop, not unrolled: fully unrolled (54 prefetches in a row for Q6_K) the unpacking ran
  // 1.4x slower than with this loop (bench_gemv_count Q6_K tiled 5632 2048 8 20 512).
#pragma GCC unroll 1
  for (size_t l = 0; l < kBlockBytes + 64; l += 64) _mm_prefetch(p + l, _MM_HINT_T0);
}

// Row pairs from two int32 lanes of values that fit in int16: (lo, hi) in each lane.
inline __m256i row_pair(__m256i lo, __m256i hi) { return _mm256_blend_epi16(lo, _mm256_slli_epi32(hi, 16), 0xAA); }

// ---- Q6_K ------------------------------------------------------------------------------------
constexpr size_t kQ6Scale = 4096, kQ6ScalePairs = 5120, kQ6D = 5632;
static_assert(kQ6D + 32 == kKQuantUnpackedBlockBytes[1]);

void q6k_unpack(const uint8_t* tile, int64_t nb, uint8_t* out) {
  constexpr size_t kBlockBytes = kTileRows * 210;  // ql [32][16][4], qh [16][16][4], scales [16][16], d
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* blk = tile + b * kBlockBytes;
    uint8_t* o = out + b * kKQuantUnpackedBlockBytes[1];
    prefetch_block_ahead<kBlockBytes>(blk);
    for (int h = 0; h < 2; ++h) {
      for (int l4 = 0; l4 < 8; ++l4) {
        #pragma GCC unroll 2
        for (size_t hb = 0; hb < 64; hb += 32) {
          const __m256i qh = load32(blk + 2048 + (8 * h + l4) * 64 + hb);
          const __m256i ql0 = load32(blk + (8 * (2 * h) + l4) * 64 + hb);
          const __m256i ql1 = load32(blk + (8 * (2 * h + 1) + l4) * 64 + hb);
          __m256i code[4];
          q6k_decode_codes(ql0, ql1, qh, code);
          for (int q = 0; q < 4; ++q) {  // values 128 h + 32 q + 4 l4: group 8 h + 2 q + l4 / 4
            const int g = 8 * h + 2 * q + l4 / 4;
            store32(o + (4 * g + l4 % 4) * 64 + hb, code[q]);
          }
        }
      }
    }
    #pragma GCC unroll 2
    for (size_t hb = 0; hb < 64; hb += 32) {
      auto scale8 = [&](int g) {  // group g's int8 scales of rows 8 hb / 32 ..+ 7, as int32
        return _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(blk + 3072 + 16 * g + hb / 4)));
      };
      for (int g = 0; g < 16; ++g) store32(o + kQ6Scale + 64 * g + hb, row_pair(scale8(g), scale8(g)));
      for (int k = 0; k < 8; ++k) store32(o + kQ6ScalePairs + 64 * k + hb, row_pair(scale8(2 * k), scale8(2 * k + 1)));
    }
    std::memcpy(o + kQ6D, blk + 3328, 32);
  }
}

// NX (<= 4) activation rows x rows 8 h2 .. 8 h2 + 7. Per group of 16: two quads' pair sums
// added in int16 (|code x| <= 63 * 128: four products stay below 2^15), times the scale pair.
// Each block's sum starts from -32 * sum_g sc_g bsum_g (the codes are q + 32).
template <int NX>
void q6k_unpacked_rows(const uint8_t* u, int64_t nb, const uint8_t* x, size_t xs, float* y, size_t ys) {
  #pragma GCC unroll 2
  for (int h2 = 0; h2 < 2; ++h2) {
    const size_t hb = 32 * size_t(h2);
    __m256 facc[NX];
    #pragma GCC unroll 16
    for (int i = 0; i < NX; ++i) facc[i] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; ++b) {
      const uint8_t* ub = u + b * kKQuantUnpackedBlockBytes[1];
      const BlockQ8_K* xb[NX];
      __m256i isum[NX];
      #pragma GCC unroll 16
      for (int i = 0; i < NX; ++i) {
        xb[i] = reinterpret_cast<const BlockQ8_K*>(x + i * xs) + b;
        __m256i offset = _mm256_setzero_si256();
        #pragma GCC unroll 8
        for (int k = 0; k < 8; ++k) {
          offset = _mm256_add_epi32(
              offset, _mm256_madd_epi16(load32(ub + kQ6ScalePairs + 64 * k + hb), broadcast_dword(xb[i]->bsums + 2 * k)));
        }
        isum[i] = _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(offset, 5));
      }
      #pragma GCC unroll 2
      for (int g = 0; g < 16; ++g) {
        const __m256i scale = load32(ub + kQ6Scale + 64 * g + hb);
        #pragma GCC unroll 2
        for (int l = 0; l < 4; l += 2) {
          const __m256i c0 = load32(ub + (4 * g + l) * 64 + hb), c1 = load32(ub + (4 * g + l + 1) * 64 + hb);
          #pragma GCC unroll 16
          for (int i = 0; i < NX; ++i) {
            const int8_t* xq = xb[i]->qs + 16 * g + 4 * l;
            const __m256i pair_sums = _mm256_add_epi16(_mm256_maddubs_epi16(c0, broadcast_dword(xq)),
                                                       _mm256_maddubs_epi16(c1, broadcast_dword(xq + 4)));
            isum[i] = _mm256_add_epi32(isum[i], _mm256_madd_epi16(pair_sums, scale));
          }
        }
      }
      const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(ub + kQ6D + 16 * h2)));
      #pragma GCC unroll 16
      for (int i = 0; i < NX; ++i) {
        const __m256 d = _mm256_mul_ps(_mm256_set1_ps(xb[i]->d), dw);
        facc[i] = _mm256_add_ps(facc[i], _mm256_mul_ps(d, _mm256_cvtepi32_ps(isum[i])));
      }
    }
    #pragma GCC unroll 16
    for (int i = 0; i < NX; ++i) _mm256_storeu_ps(y + i * ys + 8 * h2, facc[i]);
  }
}

// ---- Q4_K / Q5_K -----------------------------------------------------------------------------
constexpr size_t kQ45Scale = 4096, kQ45Mins = 4608, kQ45D = 4864, kQ45DMin = 4896;
static_assert(kQ45DMin + 32 == kKQuantUnpackedBlockBytes[0] && kKQuantUnpackedBlockBytes[0] == kKQuantUnpackedBlockBytes[2]);

// The tile block: d [16][2] at 0, dmin at 32, scales [3][16][4] at 64, (Q5_K: qh [8][16][4] at
// 256,) qs [32][16][4] at 256 (Q5_K: 768). The 6-bit scale / min decode is the tile kernel's.
template <bool kQ5>
void q45k_unpack(const uint8_t* tile, int64_t nb, uint8_t* out) {
  constexpr size_t kBlockBytes = kTileRows * (kQ5 ? 176 : 144);
  constexpr size_t kCodes = kQ5 ? 768 : 256;
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* blk = tile + b * kBlockBytes;
    uint8_t* o = out + b * kKQuantUnpackedBlockBytes[0];
    prefetch_block_ahead<kBlockBytes>(blk);
    #pragma GCC unroll 2
    for (size_t hb = 0; hb < 64; hb += 32) {
      const Q45kScales scales = q45k_decode_scales(blk, hb);
      for (int j = 0; j < 8; ++j) store32(o + kQ45Scale + 64 * j + hb, byte_row_pair(j < 4 ? scales.sc_lo : scales.sc_hi, j % 4));
      __m256i mins[4];
      q45k_min_pairs(scales, mins);
      for (int k = 0; k < 4; ++k) store32(o + kQ45Mins + 64 * k + hb, mins[k]);
      for (int c = 0; c < 4; ++c) {  // sub-blocks 2 c (low nibbles) and 2 c + 1 (high)
        for (int l4 = 0; l4 < 8; ++l4) {
          __m256i lo, hi;
          q45k_decode_codes<kQ5>(load32(blk + kCodes + (c * 8 + l4) * 64 + hb),
                                 kQ5 ? load32(blk + 256 + l4 * 64 + hb) : _mm256_setzero_si256(), c, lo, hi);
          store32(o + ((2 * c) * 8 + l4) * 64 + hb, lo);
          store32(o + ((2 * c + 1) * 8 + l4) * 64 + hb, hi);
        }
      }
    }
    std::memcpy(o + kQ45D, blk, 64);  // d, dmin
  }
}

// NX (<= 4) activation rows x rows 8 h2 .. 8 h2 + 7. Per sub-block of 32: the quads' pair sums
// added in int16 (|code x| <= 15 * 128 for Q4_K: all 8 stay below 2^15; 31 * 128 for Q5_K: 4 at
// a time), times the scale pair. The mins term: the row pairs of mins against the activation's
// 32-value sums paired the same way.
template <bool kQ5, int NX>
void q45k_unpacked_rows(const uint8_t* u, int64_t nb, const uint8_t* x, size_t xs, float* y, size_t ys) {
  constexpr int kQuadsPerFlush = kQ5 ? 4 : 8;
  #pragma GCC unroll 2
  for (int h2 = 0; h2 < 2; ++h2) {
    const size_t hb = 32 * size_t(h2);
    __m256 facc[NX];
    #pragma GCC unroll 16
    for (int i = 0; i < NX; ++i) facc[i] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; ++b) {
      const uint8_t* ub = u + b * kKQuantUnpackedBlockBytes[0];
      const BlockQ8_K* xb[NX];
      __m256i isum[NX], smin[NX], mins[4];
      #pragma GCC unroll 4
      for (int k = 0; k < 4; ++k) mins[k] = load32(ub + kQ45Mins + 64 * k + hb);
      #pragma GCC unroll 16
      for (int i = 0; i < NX; ++i) {
        xb[i] = reinterpret_cast<const BlockQ8_K*>(x + i * xs) + b;
        smin[i] = q45k_sum_mins(mins, xb[i]->bsums);
        isum[i] = _mm256_setzero_si256();
      }
      #pragma GCC unroll 1
      for (int j = 0; j < 8; ++j) {
        const __m256i scale = load32(ub + kQ45Scale + 64 * j + hb);
        #pragma GCC unroll 2
        for (int l0 = 0; l0 < 8; l0 += kQuadsPerFlush) {
          __m256i pair_sums[NX];
          #pragma GCC unroll 16
          for (int i = 0; i < NX; ++i) pair_sums[i] = _mm256_setzero_si256();
          #pragma GCC unroll 8
          for (int l = l0; l < l0 + kQuadsPerFlush; ++l) {
            const __m256i code = load32(ub + (8 * j + l) * 64 + hb);
            #pragma GCC unroll 16
            for (int i = 0; i < NX; ++i) {
              pair_sums[i] = _mm256_add_epi16(pair_sums[i], _mm256_maddubs_epi16(code, broadcast_dword(xb[i]->qs + 32 * j + 4 * l)));
            }
          }
          #pragma GCC unroll 16
          for (int i = 0; i < NX; ++i) isum[i] = _mm256_add_epi32(isum[i], _mm256_madd_epi16(pair_sums[i], scale));
        }
      }
      const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(ub + kQ45D + 16 * h2)));
      const __m256 dmw = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(ub + kQ45DMin + 16 * h2)));
      #pragma GCC unroll 16
      for (int i = 0; i < NX; ++i) {
        const __m256 dx = _mm256_set1_ps(xb[i]->d);
        const __m256 d = _mm256_mul_ps(dx, dw), dm = _mm256_mul_ps(dx, dmw);
        const __m256 t = _mm256_sub_ps(_mm256_mul_ps(d, _mm256_cvtepi32_ps(isum[i])), _mm256_mul_ps(dm, _mm256_cvtepi32_ps(smin[i])));
        facc[i] = _mm256_add_ps(facc[i], t);
      }
    }
    #pragma GCC unroll 16
    for (int i = 0; i < NX; ++i) _mm256_storeu_ps(y + i * ys + 8 * h2, facc[i]);
  }
}

// KQuantUnpackedDotFn for kind (Q4_K 0, Q6_K 1, Q5_K 2): passes of up to 4 activation rows.
template <int kKind>
void kquant_unpacked_dot(const uint8_t* u, int64_t nb, const void* x, size_t xs, int nx, float* y, size_t ys) {
  for (int i0 = 0; i0 < nx; i0 += 4) {
    const auto* xp = static_cast<const uint8_t*>(x) + i0 * xs;
    float* yp = y + i0 * ys;
#define SPILLWAY_UNPACKED(NX)                                                         \
  if constexpr (kKind == 1) q6k_unpacked_rows<NX>(u, nb, xp, xs, yp, ys);              \
  else q45k_unpacked_rows<kKind == 2, NX>(u, nb, xp, xs, yp, ys);
    switch (nx - i0) {
      case 1: { SPILLWAY_UNPACKED(1) break; }
      case 2: { SPILLWAY_UNPACKED(2) break; }
      case 3: { SPILLWAY_UNPACKED(3) break; }
      default: { SPILLWAY_UNPACKED(4) break; }
    }
#undef SPILLWAY_UNPACKED
  }
}

}  // namespace

void add_avx2_kquant_unpacked_kernels(KernelTable& t) {
  t.kquant_unpack[0] = q45k_unpack<false>;
  t.kquant_unpack[1] = q6k_unpack;
  t.kquant_unpack[2] = q45k_unpack<true>;
  t.kquant_unpacked_dot[0] = kquant_unpacked_dot<0>;
  t.kquant_unpacked_dot[1] = kquant_unpacked_dot<1>;
  t.kquant_unpacked_dot[2] = kquant_unpacked_dot<2>;
  // Q4_K, Q6_K, Q5_K: from 4 (Q4_K) or 3 (Q5_K) rows the tile kernels lose to unpacking (their
  // 3-4 row passes run at a fraction of the GEMV's rate); the Q6_K tile kernel wins up to 7
  // rows streamed from DRAM (bench/README.md, "AVX2 float GEMV, few activation rows, ...",
  // part 3).
  t.kquant_unpack_min_rows[0] = 4;
  t.kquant_unpack_min_rows[1] = 8;
  t.kquant_unpack_min_rows[2] = 3;
}

}  // namespace spillway::kernels
