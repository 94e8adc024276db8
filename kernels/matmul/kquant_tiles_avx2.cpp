// AVX2 + FMA: the K-quant tile kernels (Q4_K / Q5_K / Q6_K tiles x Q8_K activations), rows
// 0-7 then 8-15 of each block in the 8 lanes. Per-output order as kernel_table.h states, so the
// scalar reference's bits. (Split from dot_avx2.cpp, which keeps the other weight types.)
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "kernels/kernel_registry.h"
#include "kernels/matmul/kquant_decode_avx2.h"
#include "kernels/quant/quant_blocks.h"

namespace spillway::kernels {

namespace {

// ---- K-quant tiles x Q8_K: rows 0-7, then 8-15, in the 8 lanes --------------------------------
// vpdpbusd's sum of four products per lane as maddubs + madd (no pair of products of these
// quants reaches the int16 limit).

inline __m256i bcast4(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm256_set1_epi32(v);
}
inline __m256i dot4(__m256i acc, __m256i u, __m256i s) {
  return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1)));
}
inline __m256i load32(const uint8_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }

// Software prefetch for the K-quant tiles, one quarter of a block's lines per call (a block
// is computed in four parts, each issuing its share while the previous loads are in flight).
// kTileStream: the lines kKQuantPrefetchBytes ahead of this block (the tile streams from
// DRAM: the tile kernels run long stretches of arithmetic between their first touches of new
// lines, so without this few misses are in flight and these GEMVs ran at half the row
// kernels' speed, bench/README.md); kTilePrefetchNext: the same block of the next tile (this
// tile is in cache). Prefetches never fault, so reading past the matrix is harmless.
constexpr size_t kKQuantPrefetchBytes = 8192;
template <size_t kBlockBytes>
inline void kquant_prefetch_quarter(const uint8_t* blk, int64_t nb, int flags, int quarter) {
  constexpr int kLines = int((kBlockBytes + 63) / 64 + 1 + 3) / 4;  // +1: a block may straddle one more line
  const size_t ahead = (flags & kTileStream) ? kKQuantPrefetchBytes : size_t(nb) * kBlockBytes;
  const char* p = reinterpret_cast<const char*>(blk) + ahead + size_t(quarter) * kLines * 64;
  // (Written as a guarded loop: GCC 12 at -O3 deleted every prefetch of the caller when the
  // test was an early return.)
  if (flags & (kTileStream | kTilePrefetchNext)) {
    #pragma GCC unroll 16
    for (int l = 0; l < kLines; ++l) _mm_prefetch(p + 64 * l, _MM_HINT_T0);
  }
}

// Rows 0-7 (half 0) and 8-15 (half 1) of each block in turn: the second half reads the
// block's lines from L1.
// noinline: inlined into kquant_tile_dot's loop of 4-row passes GCC 12 compiled the Q4_K
// kernel 1.1-2.2x slower at m = 16 (bench_gemv_count, AVX2; with it, 3-8% slower than the
// kernel inlined into the former one-pass dispatcher, which no longer exists).
template <bool kQ5, int NX>
__attribute__((noinline)) void q45k_tile_rows(const uint8_t* tile, int64_t nb, const uint8_t* x, size_t xs, float* y, size_t ys, int flags) {
  constexpr size_t kBlockBytes = kTileRows * (kQ5 ? 176 : 144);
  constexpr size_t kCodes = kQ5 ? 768 : 256;
  __m256 facc[2][NX];
  #pragma GCC unroll 16
  for (int i = 0; i < NX; ++i) facc[0][i] = facc[1][i] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    #pragma GCC unroll 2
    for (int half = 0; half < 2; ++half) {
      const size_t hb = 32 * size_t(half);  // byte offset of rows 8-15 in a [16 rows][4] array
      const uint8_t* blk = tile + b * kBlockBytes;
      const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 16 * half)));
      const __m256 dmw = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 32 + 16 * half)));
      const Q45kScales scales = q45k_decode_scales(blk, hb);
      __m256i isum[NX];
      const BlockQ8_K* xb[NX];
      #pragma GCC unroll 16
      for (int i = 0; i < NX; ++i) {
        xb[i] = reinterpret_cast<const BlockQ8_K*>(x + i * xs) + b;
        isum[i] = _mm256_setzero_si256();
      }
      // Per sub-block, the maddubs pair sums of kRun quads are added in int16 (Q4_K codes <= 15,
      // Q5_K <= 31, |activation| <= 128: 8 x 2 x 15 x 128 and 4 x 2 x 31 x 128 stay below 2^15)
      // and one vpmaddwd by the scale row pair widens and scales them: the same exact integers
      // as widening every quad and multiplying the sum (vpmulld), in fewer instructions.
      constexpr int kRun = kQ5 ? 4 : 8;
      #pragma GCC unroll 4
      for (int c = 0; c < 4; ++c) {
        if (half == 0) kquant_prefetch_quarter<kBlockBytes>(blk, nb, flags, c);
        const __m256i src = c < 2 ? scales.sc_lo : scales.sc_hi;
        const __m256i sc_a = byte_row_pair(src, 2 * (c % 2)), sc_b = byte_row_pair(src, 2 * (c % 2) + 1);
        #pragma GCC unroll 2
        for (int l0 = 0; l0 < 8; l0 += kRun) {
          __m256i sa[NX], sb[NX];
          #pragma GCC unroll 16
          for (int i = 0; i < NX; ++i) sa[i] = sb[i] = _mm256_setzero_si256();
          #pragma GCC unroll 8
          for (int l4 = l0; l4 < l0 + kRun; ++l4) {
            __m256i lo, hi;
            q45k_decode_codes<kQ5>(load32(blk + kCodes + (c * 8 + l4) * 64 + hb),
                                   kQ5 ? load32(blk + 256 + l4 * 64 + hb) : _mm256_setzero_si256(), c, lo, hi);
            #pragma GCC unroll 16
            for (int i = 0; i < NX; ++i) {
              sa[i] = _mm256_add_epi16(sa[i], _mm256_maddubs_epi16(lo, bcast4(xb[i]->qs + 64 * c + 4 * l4)));
              sb[i] = _mm256_add_epi16(sb[i], _mm256_maddubs_epi16(hi, bcast4(xb[i]->qs + 64 * c + 32 + 4 * l4)));
            }
          }
          #pragma GCC unroll 16
          for (int i = 0; i < NX; ++i) {
            isum[i] = _mm256_add_epi32(isum[i], _mm256_add_epi32(_mm256_madd_epi16(sa[i], sc_a), _mm256_madd_epi16(sb[i], sc_b)));
          }
        }
      }
      // The mins' term after the codes' (fewer vectors live through the loop above).
      __m256i mins[4];
      q45k_min_pairs(scales, mins);
      #pragma GCC unroll 16
      for (int i = 0; i < NX; ++i) {
        const __m256i smin = q45k_sum_mins(mins, xb[i]->bsums);
        const __m256 dx = _mm256_set1_ps(xb[i]->d);
        const __m256 d = _mm256_mul_ps(dx, dw), dm = _mm256_mul_ps(dx, dmw);
        const __m256 t = _mm256_sub_ps(_mm256_mul_ps(d, _mm256_cvtepi32_ps(isum[i])), _mm256_mul_ps(dm, _mm256_cvtepi32_ps(smin)));
        facc[half][i] = _mm256_add_ps(facc[half][i], t);
      }
    }
  }
  #pragma GCC unroll 2
  for (int h2 = 0; h2 < 2; ++h2) {
    #pragma GCC unroll 16
    for (int i = 0; i < NX; ++i) _mm256_storeu_ps(y + i * ys + 8 * h2, facc[h2][i]);
  }
}

template <int NX>
__attribute__((noinline)) void q6k_tile_rows(const uint8_t* tile, int64_t nb, const uint8_t* x, size_t xs, float* y, size_t ys, int flags) {
  constexpr size_t kBlockBytes = kTileRows * 210;
  __m256 facc[2][NX];
  #pragma GCC unroll 16
  for (int i = 0; i < NX; ++i) facc[0][i] = facc[1][i] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    #pragma GCC unroll 2
    for (int hf = 0; hf < 2; ++hf) {
      const size_t hb = 32 * size_t(hf);
      const uint8_t* blk = tile + b * kBlockBytes;
      const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 3328 + 16 * hf)));
      __m256i isum[NX];
      const BlockQ8_K* xb[NX];
      #pragma GCC unroll 16
      for (int i = 0; i < NX; ++i) {
        xb[i] = reinterpret_cast<const BlockQ8_K*>(x + i * xs) + b;
        isum[i] = _mm256_setzero_si256();
      }
      for (int h = 0; h < 2; ++h) {
        for (int half = 0; half < 2; ++half) {
          if (hf == 0) kquant_prefetch_quarter<kBlockBytes>(blk, nb, flags, 2 * h + half);
          __m256i s[4][NX];
          #pragma GCC unroll 4
          for (int q = 0; q < 4; ++q) {
            #pragma GCC unroll 16
            for (int i = 0; i < NX; ++i) s[q][i] = _mm256_set1_epi32(-32 * xb[i]->bsums[8 * h + 2 * q + half]);
          }
          #pragma GCC unroll 4
          for (int l4 = 4 * half; l4 < 4 * half + 4; ++l4) {
            const __m256i qh = load32(blk + 2048 + (8 * h + l4) * 64 + hb);
            const __m256i ql0 = load32(blk + (8 * (2 * h) + l4) * 64 + hb);
            const __m256i ql1 = load32(blk + (8 * (2 * h + 1) + l4) * 64 + hb);
            __m256i code[4];
            q6k_decode_codes(ql0, ql1, qh, code);
            #pragma GCC unroll 4
            for (int q = 0; q < 4; ++q) {
              #pragma GCC unroll 16
              for (int i = 0; i < NX; ++i) s[q][i] = dot4(s[q][i], code[q], bcast4(xb[i]->qs + 128 * h + 32 * q + 4 * l4));
            }
          }
          #pragma GCC unroll 4
          for (int q = 0; q < 4; ++q) {
            const int g = 8 * h + 2 * q + half;
            const __m256i sc = _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(blk + 3072 + 16 * g + 8 * hf)));
            #pragma GCC unroll 16
            for (int i = 0; i < NX; ++i) isum[i] = _mm256_add_epi32(isum[i], _mm256_mullo_epi32(s[q][i], sc));
          }
        }
      }
      #pragma GCC unroll 16
      for (int i = 0; i < NX; ++i) {
        const __m256 d = _mm256_mul_ps(_mm256_set1_ps(xb[i]->d), dw);
        facc[hf][i] = _mm256_add_ps(facc[hf][i], _mm256_mul_ps(d, _mm256_cvtepi32_ps(isum[i])));
      }
    }
  }
  #pragma GCC unroll 2
  for (int h2 = 0; h2 < 2; ++h2) {
    #pragma GCC unroll 16
    for (int i = 0; i < NX; ++i) _mm256_storeu_ps(y + i * ys + 8 * h2, facc[h2][i]);
  }
}

// KQuantTileDotFn: kKind 0 Q4_K, 1 Q6_K, 2 Q5_K; the prefetch hints as kquant_prefetch_quarter.
template <int kKind>
void kquant_tile_dot(const uint8_t* tile, int64_t nb, const void* x, size_t xs, int nx, float* y, size_t ys,
                     int flags) {
  // Up to kKQuantTileActs rows in passes of 4 (the AVX2 register file holds no more; the
  // driver gives this table at most 4, as it has no kquant_tile2_dot): the first pass streams
  // the tile (kTileStream), the last prefetches the next one.
  for (int i0 = 0; i0 < nx; i0 += 4) {
    const int n = nx - i0 < 4 ? nx - i0 : 4;
    const int f = (i0 == 0 ? flags & kTileStream : 0) | (i0 + n >= nx ? flags & kTilePrefetchNext : 0);
    const auto* xp = static_cast<const uint8_t*>(x) + i0 * xs;
    float* yp = y + i0 * ys;
#define SPILLWAY_KTILE(NX)                                                                  \
  if constexpr (kKind == 0) q45k_tile_rows<false, NX>(tile, nb, xp, xs, yp, ys, f);         \
  else if constexpr (kKind == 2) q45k_tile_rows<true, NX>(tile, nb, xp, xs, yp, ys, f);     \
  else q6k_tile_rows<NX>(tile, nb, xp, xs, yp, ys, f);
    switch (n) {
      case 1: { SPILLWAY_KTILE(1) break; }
      case 2: { SPILLWAY_KTILE(2) break; }
      case 3: { SPILLWAY_KTILE(3) break; }
      default: { SPILLWAY_KTILE(4) break; }
    }
#undef SPILLWAY_KTILE
  }
}

}  // namespace

void add_avx2_kquant_tile_kernels(KernelTable& t) {
  t.kquant_tile_dot[0] = kquant_tile_dot<0>;
  t.kquant_tile_dot[1] = kquant_tile_dot<1>;
  t.kquant_tile_dot[2] = kquant_tile_dot<2>;
  // No kquant_tile2_dot (null, not the scalar one this table starts from): the driver runs one
  // tile a call (two tiles a call ran its m = 16 GEMM 3-6% slower: the pair's first tile is
  // read again after the second).
  for (auto& f : t.kquant_tile2_dot) f = nullptr;
}

}  // namespace spillway::kernels
