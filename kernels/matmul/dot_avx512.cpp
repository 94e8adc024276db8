// AVX-512 (F/BW/VL/DQ/VNNI) dot kernels. Activation quantizers come from the AVX2 table
// (the AVX-512 table extends it).
//
// (Float weights: float_tiles_avx512.cpp; Q8_0 / Q4_0 tiles: q8_tiles_avx512.cpp.) Q4_K / Q6_K: row dots with their unsigned quants directly (Q6_K's +32
// offset removed through the activation block sums). Every kernel keeps the per-output
// order of its contract in kernel_table.h, so results equal the scalar reference bit for bit.
#include "kernels/avx512_target.h"  // first: the intrinsics, GCC 12's warnings off

#include <cstdint>
#include <cstring>

#include "kernels/kernel_registry.h"
#include "kernels/quant/quant_blocks.h"

namespace spillway::kernels {

namespace {

inline float half_to_float(uint16_t h) { return _cvtsh_ss(h); }

inline __m512i combine(__m256i lo, __m256i hi) { return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1); }

inline int32_t hsum_i32_256(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1));
  return _mm_cvtsi128_si32(s);
}

#define SPILLWAY_DISPATCH_NX(fn, nx, ...) \
  switch (nx) {                           \
    case 1: fn<1>(__VA_ARGS__); break;    \
    case 2: fn<2>(__VA_ARGS__); break;    \
    case 3: fn<3>(__VA_ARGS__); break;    \
    default: fn<4>(__VA_ARGS__); break;   \
  }

inline __mmask16 tail_mask(int64_t remaining) {
  return remaining >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << remaining) - 1);
}

// ---- Q4_K x Q8_K ----------------------------------------------------------------------------

template <int NX>
void dot_q4_k_rows(const void* w, const void* x, size_t xs, int64_t cols, float* y, size_t ys) {
  const auto* wb = static_cast<const BlockQ4_K*>(w);
  const auto* xbase = static_cast<const uint8_t*>(x);
  float acc[NX];
  #pragma GCC unroll 16
  for (int i = 0; i < NX; ++i) acc[i] = 0.0f;
  const __m256i low_mask = _mm256_set1_epi8(0x0F);
  for (int64_t b = 0; b < cols / kQK_K; ++b) {
    alignas(16) uint8_t sc[8], mn[8];
    q4k_scales_mins(wb[b].scales, sc, mn);
    // Each min twice, as int16, to pair with the 16 bsums (two per 32-value sub-block).
    const __m128i mins8 = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(mn));
    const __m256i mins16 = _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(mins8, mins8));
    __m512i isum[NX];
    #pragma GCC unroll 16
    for (int i = 0; i < NX; ++i) isum[i] = _mm512_setzero_si512();
    for (int c = 0; c < 4; ++c) {
      const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wb[b].qs + 32 * c));
      const __m512i nibbles = combine(_mm256_and_si256(q, low_mask), _mm256_and_si256(_mm256_srli_epi16(q, 4), low_mask));
      const __m512i scales = combine(_mm256_set1_epi32(sc[2 * c]), _mm256_set1_epi32(sc[2 * c + 1]));
      #pragma GCC unroll 16
      for (int i = 0; i < NX; ++i) {
        const BlockQ8_K& xb = reinterpret_cast<const BlockQ8_K*>(xbase + i * xs)[b];
        const __m512i xq = _mm512_loadu_si512(xb.qs + 64 * c);
        const __m512i sums = _mm512_dpbusd_epi32(_mm512_setzero_si512(), nibbles, xq);
        isum[i] = _mm512_add_epi32(isum[i], _mm512_mullo_epi32(sums, scales));
      }
    }
    const float dw = half_to_float(wb[b].d), dmin = half_to_float(wb[b].dmin);
    #pragma GCC unroll 16
    for (int i = 0; i < NX; ++i) {
      const BlockQ8_K& xb = reinterpret_cast<const BlockQ8_K*>(xbase + i * xs)[b];
      const __m256i bsums = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb.bsums));
      const int32_t sum_mins = hsum_i32_256(_mm256_madd_epi16(bsums, mins16));
      const float d = xb.d * dw, dm = xb.d * dmin;
      acc[i] += d * static_cast<float>(_mm512_reduce_add_epi32(isum[i])) - dm * static_cast<float>(sum_mins);
    }
  }
  #pragma GCC unroll 16
  for (int i = 0; i < NX; ++i) y[i * ys] = acc[i];
}

// ---- Q6_K x Q8_K ----------------------------------------------------------------------------

// int32 lanes [s[0] x4, s[1] x4, s[2] x4, s[3] x4] from four int8 scales.
inline __m512i group_scales(const int8_t* s) {
  int32_t four;
  std::memcpy(&four, s, 4);
  const __m128i spread = _mm_shuffle_epi8(_mm_cvtsi32_si128(four), _mm_setr_epi8(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3));
  return _mm512_cvtepi8_epi32(spread);
}

template <int NX>
void dot_q6_k_rows(const void* w, const void* x, size_t xs, int64_t cols, float* y, size_t ys) {
  const auto* wb = static_cast<const BlockQ6_K*>(w);
  const auto* xbase = static_cast<const uint8_t*>(x);
  float acc[NX];
  #pragma GCC unroll 16
  for (int i = 0; i < NX; ++i) acc[i] = 0.0f;
  const __m512i m4 = _mm512_set1_epi8(0x0F), m2h = _mm512_set1_epi8(0x30);
  for (int64_t b = 0; b < cols / kQK_K; ++b) {
    const BlockQ6_K& blk = wb[b];
    __m512i isum[NX];
    #pragma GCC unroll 16
    for (int i = 0; i < NX; ++i) isum[i] = _mm512_setzero_si512();
    #pragma GCC unroll 16
    for (int h = 0; h < 2; ++h) {
      const __m512i ql = _mm512_loadu_si512(blk.ql + 64 * h);
      const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk.qh + 32 * h));
      const __m512i qh_a = combine(qh, _mm256_srli_epi16(qh, 2));                          // quarters 0, 1
      const __m512i qh_b = combine(_mm256_srli_epi16(qh, 4), _mm256_srli_epi16(qh, 6));    // quarters 2, 3
      const __m512i q_a = _mm512_or_si512(_mm512_and_si512(ql, m4), _mm512_and_si512(_mm512_slli_epi16(qh_a, 4), m2h));
      const __m512i q_b = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(ql, 4), m4),
                                          _mm512_and_si512(_mm512_slli_epi16(qh_b, 4), m2h));
      const __m512i sc_a = group_scales(blk.scales + 8 * h), sc_b = group_scales(blk.scales + 8 * h + 4);
      #pragma GCC unroll 16
      for (int i = 0; i < NX; ++i) {
        const BlockQ8_K& xb = reinterpret_cast<const BlockQ8_K*>(xbase + i * xs)[b];
        const __m512i xa = _mm512_loadu_si512(xb.qs + 128 * h), xbq = _mm512_loadu_si512(xb.qs + 128 * h + 64);
        const __m512i pa = _mm512_mullo_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), q_a, xa), sc_a);
        const __m512i pb = _mm512_mullo_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), q_b, xbq), sc_b);
        isum[i] = _mm512_add_epi32(isum[i], _mm512_add_epi32(pa, pb));
      }
    }
    const float dw = half_to_float(blk.d);
    const __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk.scales)));
    #pragma GCC unroll 16
    for (int i = 0; i < NX; ++i) {
      const BlockQ8_K& xb = reinterpret_cast<const BlockQ8_K*>(xbase + i * xs)[b];
      const __m256i bsums = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb.bsums));
      const int32_t offset = hsum_i32_256(_mm256_madd_epi16(bsums, sc16));
      acc[i] += (xb.d * dw) * static_cast<float>(_mm512_reduce_add_epi32(isum[i]) - 32 * offset);
    }
  }
  #pragma GCC unroll 16
  for (int i = 0; i < NX; ++i) y[i * ys] = acc[i];
}

// ---- K-quant tiles x Q8_K: 16 rows in the lanes, vpdpbusd of unsigned quants against four
// broadcast activation bytes ---------------------------------------------------------------------

inline __m512i bcast4(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm512_set1_epi32(v);
}

// Software prefetch for the K-quant tiles, one quarter of a block's lines per call (a block
// is computed in four parts, each issuing its share while the previous loads are in flight).
// kTileStream: the lines kKQuantPrefetchBytes ahead of this block (the tile streams from
// DRAM; without this the hardware prefetchers leave these GEMVs 5-35% slower than the row
// kernels, bench/README.md); kTilePrefetchNext: the same block of the next tile (this tile
// is in cache). Prefetches never fault, so reading past the matrix is harmless.
constexpr size_t kKQuantPrefetchBytes = 8192;
template <size_t kBlockBytes>
inline void kquant_prefetch_quarter(const uint8_t* blk, int64_t nb, int flags, int quarter, int next_tiles = 1) {
  constexpr int kLines = int((kBlockBytes + 63) / 64 + 1 + 3) / 4;  // +1: a block may straddle one more line
  const size_t ahead = (flags & kTileStream) ? kKQuantPrefetchBytes : size_t(next_tiles) * size_t(nb) * kBlockBytes;
  const char* p = reinterpret_cast<const char*>(blk) + ahead + size_t(quarter) * kLines * 64;
  // (Written as a guarded loop: GCC 12 at -O3 deleted every prefetch of this function when
  // the test was an early return.)
  if (flags & (kTileStream | kTilePrefetchNext)) {
#pragma GCC unroll 16
    for (int l = 0; l < kLines; ++l) _mm_prefetch(p + 64 * l, _MM_HINT_T0);
  }
}

// Q5_K tiles, up to 4 activation rows (the kernel before the NT / NX rework of q45k_tile_rows,
// kept for Q5_K: its quarter loop unrolled with immediate shifts of the qh bits ran 1.3x
// faster for Q5_K than the reworked one at NX = 4; bench/README.md). Per block: sub-block sums per row lane, times the 6-bit
// scales (unpacked lane-wise from the three scale words), minus the mins times the
// activation's 32-value sums; then DotRowsFn's float steps lane-wise.
template <bool kQ5, int NX>
void q5k_tile_rows(const uint8_t* tile, int64_t nb, const uint8_t* x, size_t xs, float* y, size_t ys, int flags) {
  constexpr size_t kBlockBytes = kTileRows * (kQ5 ? 176 : 144);
  constexpr size_t kCodes = kQ5 ? 768 : 256;
  __m512 facc[NX];
#pragma GCC unroll 16
  for (int i = 0; i < NX; ++i) facc[i] = _mm512_setzero_ps();
  const __m512i low = _mm512_set1_epi8(0x0F), one = _mm512_set1_epi8(1), m6 = _mm512_set1_epi32(0x3F3F3F3F);
  const __m512i m4 = _mm512_set1_epi32(0x0F0F0F0F), m2 = _mm512_set1_epi32(0x03030303);
  const __m512i byte = _mm512_set1_epi32(0xFF), w16 = _mm512_set1_epi32(0x00FF00FF);
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* blk = tile + b * kBlockBytes;
    const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk)));
    const __m512 dmw = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 32)));
    const __m512i a = _mm512_loadu_si512(blk + 64), bq = _mm512_loadu_si512(blk + 128), cq = _mm512_loadu_si512(blk + 192);
    const __m512i sc_lo = _mm512_and_si512(a, m6), m_lo = _mm512_and_si512(bq, m6);
    const __m512i sc_hi = _mm512_or_si512(_mm512_and_si512(cq, m4),
                                          _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(a, 6), m2), 4));
    const __m512i m_hi = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi32(cq, 4), m4),
                                         _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(bq, 6), m2), 4));
    // The mins as int16 pairs (m0, m2), (m1, m3), (m4, m6), (m5, m7) per lane.
    const __m512i mins[4] = {_mm512_and_si512(m_lo, w16), _mm512_and_si512(_mm512_srli_epi32(m_lo, 8), w16),
                             _mm512_and_si512(m_hi, w16), _mm512_and_si512(_mm512_srli_epi32(m_hi, 8), w16)};
    __m512i isum[NX], smin[NX];
    const BlockQ8_K* xb[NX];
#pragma GCC unroll 16
    for (int i = 0; i < NX; ++i) {
      xb[i] = reinterpret_cast<const BlockQ8_K*>(x + i * xs) + b;
      int32_t s32[8];
#pragma GCC unroll 8
      for (int j = 0; j < 8; ++j) s32[j] = xb[i]->bsums[2 * j] + xb[i]->bsums[2 * j + 1];
      auto pair = [](int32_t lo, int32_t hi) { return _mm512_set1_epi32(int32_t((uint32_t(lo) & 0xFFFF) | (uint32_t(hi) << 16))); };
      smin[i] = _mm512_add_epi32(
          _mm512_add_epi32(_mm512_madd_epi16(mins[0], pair(s32[0], s32[2])), _mm512_madd_epi16(mins[1], pair(s32[1], s32[3]))),
          _mm512_add_epi32(_mm512_madd_epi16(mins[2], pair(s32[4], s32[6])), _mm512_madd_epi16(mins[3], pair(s32[5], s32[7]))));
      isum[i] = _mm512_setzero_si512();
    }
#pragma GCC unroll 4
    for (int c = 0; c < 4; ++c) {
      kquant_prefetch_quarter<kBlockBytes>(blk, nb, flags, c);
      const __m512i src = c < 2 ? sc_lo : sc_hi;
      const int sh = 16 * (c % 2);
      const __m512i sc_a = _mm512_and_si512(_mm512_srli_epi32(src, sh), byte);
      const __m512i sc_b = _mm512_and_si512(_mm512_srli_epi32(src, sh + 8), byte);
      __m512i sa[NX], sb[NX];
#pragma GCC unroll 16
      for (int i = 0; i < NX; ++i) sa[i] = sb[i] = _mm512_setzero_si512();
#pragma GCC unroll 8
      for (int l4 = 0; l4 < 8; ++l4) {
        const __m512i v = _mm512_loadu_si512(blk + kCodes + (c * 8 + l4) * 64);
        __m512i lo = _mm512_and_si512(v, low);
        __m512i hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), low);
        if constexpr (kQ5) {  // bit 4 of sub-block j's quants: bit j of the qh bytes
          const __m512i h = _mm512_loadu_si512(blk + 256 + l4 * 64);
          lo = _mm512_or_si512(lo, _mm512_slli_epi16(_mm512_and_si512(_mm512_srli_epi16(h, 2 * c), one), 4));
          hi = _mm512_or_si512(hi, _mm512_slli_epi16(_mm512_and_si512(_mm512_srli_epi16(h, 2 * c + 1), one), 4));
        }
#pragma GCC unroll 16
        for (int i = 0; i < NX; ++i) {
          sa[i] = _mm512_dpbusd_epi32(sa[i], lo, bcast4(xb[i]->qs + 64 * c + 4 * l4));
          sb[i] = _mm512_dpbusd_epi32(sb[i], hi, bcast4(xb[i]->qs + 64 * c + 32 + 4 * l4));
        }
      }
#pragma GCC unroll 16
      for (int i = 0; i < NX; ++i) {
        isum[i] = _mm512_add_epi32(isum[i], _mm512_add_epi32(_mm512_mullo_epi32(sa[i], sc_a), _mm512_mullo_epi32(sb[i], sc_b)));
      }
    }
#pragma GCC unroll 16
    for (int i = 0; i < NX; ++i) {
      const __m512 dx = _mm512_set1_ps(xb[i]->d);
      const __m512 d = _mm512_mul_ps(dx, dw), dm = _mm512_mul_ps(dx, dmw);
      const __m512 t = _mm512_sub_ps(_mm512_mul_ps(d, _mm512_cvtepi32_ps(isum[i])), _mm512_mul_ps(dm, _mm512_cvtepi32_ps(smin[i])));
      facc[i] = _mm512_add_ps(facc[i], t);
    }
  }
#pragma GCC unroll 16
  for (int i = 0; i < NX; ++i) _mm512_storeu_ps(y + i * ys, facc[i]);
}

// Q4_K: NT (1 or 2) consecutive tiles x NX activation rows per pass. Per
// block: sub-block sums per row lane, times the 6-bit scales (unpacked lane-wise from the
// three scale words, once for all NX rows), minus the mins times the activation's 32-value
// sums (vpdpwssd of int16 pairs); then DotRowsFn's float steps lane-wise. Cost model (AVX-512
// on this Zen 5, measured with asm loops): vpdpbusd, vpmulld and vpdpwssd share two pipes
// (latency 4), and every load, a broadcast from memory included, takes one of two load slots
// a cycle; the bit operations of the unpacking run beside them. With one tile each
// broadcast activation dword feeds one vpdpbusd, so the loads cap the kernel at the
// vpdpbusd rate minus the code loads; two tiles share each broadcast (NT = 2).
template <int NT, int NX>
void q4k_tile_rows(const uint8_t* tile, int64_t nb, const uint8_t* x, size_t xs, float* y, size_t ys, int flags) {
  constexpr size_t kBlockBytes = kTileRows * 144;
  constexpr size_t kCodes = 256;
  const size_t tile_bytes = size_t(nb) * kBlockBytes;
  __m512 facc[NT][NX];
#pragma GCC unroll 16
  for (int t = 0; t < NT; ++t) {
#pragma GCC unroll 16
    for (int i = 0; i < NX; ++i) facc[t][i] = _mm512_setzero_ps();
  }
  const __m512i low = _mm512_set1_epi8(0x0F), m6 = _mm512_set1_epi32(0x3F3F3F3F);
  const __m512i m4 = _mm512_set1_epi32(0x0F0F0F0F), m2 = _mm512_set1_epi32(0x03030303);
  const __m512i byte = _mm512_set1_epi32(0xFF);
  const __m256i ones16 = _mm256_set1_epi16(1);
  // Bytes (k, k + 1) of each dword as an int16 pair: (m0, m1) and (m2, m3) of a min word;
  // + 4k in both index bytes of dword k of each 128-bit lane (vpshufb indexes within lanes).
  const __m512i lane_base = _mm512_set_epi32(0xC000C, 0x80008, 0x40004, 0, 0xC000C, 0x80008, 0x40004, 0, 0xC000C,
                                             0x80008, 0x40004, 0, 0xC000C, 0x80008, 0x40004, 0);
  const __m512i sh01 = _mm512_add_epi8(_mm512_set1_epi32(int32_t(0x80018000u)), lane_base);
  const __m512i sh23 = _mm512_add_epi8(_mm512_set1_epi32(int32_t(0x80038002u)), lane_base);
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* blk0 = tile + b * kBlockBytes;
    __m512 dw[NT], dmw[NT];
    __m512i sc_lo[NT], sc_hi[NT], mins[NT][4];
#pragma GCC unroll 2
    for (int t = 0; t < NT; ++t) {
      const uint8_t* blk = blk0 + t * tile_bytes;
      dw[t] = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk)));
      dmw[t] = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 32)));
      const __m512i a = _mm512_loadu_si512(blk + 64), bq = _mm512_loadu_si512(blk + 128), cq = _mm512_loadu_si512(blk + 192);
      sc_lo[t] = _mm512_and_si512(a, m6);
      const __m512i m_lo = _mm512_and_si512(bq, m6);
      sc_hi[t] = _mm512_or_si512(_mm512_and_si512(cq, m4), _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(a, 6), m2), 4));
      const __m512i m_hi = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi32(cq, 4), m4),
                                           _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(bq, 6), m2), 4));
      // The mins as int16 pairs per lane: (m0, m1), (m2, m3), (m4, m5), (m6, m7).
      mins[t][0] = _mm512_shuffle_epi8(m_lo, sh01);
      mins[t][1] = _mm512_shuffle_epi8(m_lo, sh23);
      mins[t][2] = _mm512_shuffle_epi8(m_hi, sh01);
      mins[t][3] = _mm512_shuffle_epi8(m_hi, sh23);
    }
    __m512i isum[NT][NX];
    __m512 fmin[NT][NX];  // (dx * dmin) * float(sum_g m_g * bs_g), DotRowsFn's second term
    const BlockQ8_K* xb[NX];
#pragma GCC unroll 16
    for (int i = 0; i < NX; ++i) {
      xb[i] = reinterpret_cast<const BlockQ8_K*>(x + i * xs) + b;
      // The 32-value sums s_j = bs[2j] + bs[2j + 1] (|s_j| <= 4096) as int16 pairs (s0, s1),
      // (s2, s3) at dwords 0, 1 and (s4, s5), (s6, s7) at dwords 4, 5.
      const __m256i s32 = _mm256_madd_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb[i]->bsums)), ones16);
      const __m256i sp = _mm256_packs_epi32(s32, s32);
      const __m512i p0 = _mm512_broadcastd_epi32(_mm256_castsi256_si128(sp));
      const __m512i p1 = _mm512_broadcastd_epi32(_mm_srli_si128(_mm256_castsi256_si128(sp), 4));
      const __m128i sp_hi = _mm256_extracti128_si256(sp, 1);
      const __m512i p2 = _mm512_broadcastd_epi32(sp_hi), p3 = _mm512_broadcastd_epi32(_mm_srli_si128(sp_hi, 4));
      const __m512 dx = _mm512_set1_ps(xb[i]->d);
#pragma GCC unroll 2
      for (int t = 0; t < NT; ++t) {
        __m512i smin = _mm512_dpwssd_epi32(_mm512_setzero_si512(), mins[t][0], p0);
        smin = _mm512_dpwssd_epi32(smin, mins[t][1], p1);
        smin = _mm512_dpwssd_epi32(smin, mins[t][2], p2);
        smin = _mm512_dpwssd_epi32(smin, mins[t][3], p3);
        fmin[t][i] = _mm512_mul_ps(_mm512_mul_ps(dx, dmw[t]), _mm512_cvtepi32_ps(smin));
        isum[t][i] = _mm512_setzero_si512();
      }
    }
#pragma GCC unroll 1
    for (int c = 0; c < 4; ++c) {
#pragma GCC unroll 2
      for (int t = 0; t < NT; ++t) kquant_prefetch_quarter<kBlockBytes>(blk0 + t * tile_bytes, nb, flags, c, NT);
      const __m128i sh_a = _mm_cvtsi32_si128(16 * (c % 2)), sh_b = _mm_cvtsi32_si128(16 * (c % 2) + 8);
      __m512i sc_a[NT], sc_b[NT];
#pragma GCC unroll 2
      for (int t = 0; t < NT; ++t) {
        const __m512i src = c < 2 ? sc_lo[t] : sc_hi[t];
        sc_a[t] = _mm512_and_si512(_mm512_srl_epi32(src, sh_a), byte);
        sc_b[t] = _mm512_and_si512(_mm512_srl_epi32(src, sh_b), byte);
      }
      __m512i sa[NT][NX], sb[NT][NX];
#pragma GCC unroll 16
      for (int t = 0; t < NT; ++t) {
#pragma GCC unroll 16
        for (int i = 0; i < NX; ++i) sa[t][i] = sb[t][i] = _mm512_setzero_si512();
      }
#pragma GCC unroll 8
      for (int l4 = 0; l4 < 8; ++l4) {
        __m512i lo[NT], hi[NT];
#pragma GCC unroll 2
        for (int t = 0; t < NT; ++t) {
          const uint8_t* blk = blk0 + t * tile_bytes;
          const __m512i v = _mm512_loadu_si512(blk + kCodes + (c * 8 + l4) * 64);
          lo[t] = _mm512_and_si512(v, low);
          hi[t] = _mm512_and_si512(_mm512_srli_epi16(v, 4), low);
        }
#pragma GCC unroll 16
        for (int i = 0; i < NX; ++i) {
          const __m512i xa = bcast4(xb[i]->qs + 64 * c + 4 * l4), xh = bcast4(xb[i]->qs + 64 * c + 32 + 4 * l4);
#pragma GCC unroll 2
          for (int t = 0; t < NT; ++t) {
            sa[t][i] = _mm512_dpbusd_epi32(sa[t][i], lo[t], xa);
            sb[t][i] = _mm512_dpbusd_epi32(sb[t][i], hi[t], xh);
          }
        }
      }
#pragma GCC unroll 16
      for (int t = 0; t < NT; ++t) {
#pragma GCC unroll 16
        for (int i = 0; i < NX; ++i) {
          isum[t][i] = _mm512_add_epi32(isum[t][i], _mm512_add_epi32(_mm512_mullo_epi32(sa[t][i], sc_a[t]),
                                                                      _mm512_mullo_epi32(sb[t][i], sc_b[t])));
        }
      }
    }
#pragma GCC unroll 16
    for (int i = 0; i < NX; ++i) {
      const __m512 dx = _mm512_set1_ps(xb[i]->d);
#pragma GCC unroll 2
      for (int t = 0; t < NT; ++t) {
        const __m512 d = _mm512_mul_ps(dx, dw[t]);
        const __m512 tv = _mm512_sub_ps(_mm512_mul_ps(d, _mm512_cvtepi32_ps(isum[t][i])), fmin[t][i]);
        facc[t][i] = _mm512_add_ps(facc[t][i], tv);
      }
    }
  }
#pragma GCC unroll 16
  for (int t = 0; t < NT; ++t) {
#pragma GCC unroll 16
    for (int i = 0; i < NX; ++i) _mm512_storeu_ps(y + i * ys + t * kTileRows, facc[t][i]);
  }
}

// Q6_K, one tile, up to 4 activation rows (the kernel before the NT rework of q6k_tile_rows,
// kept for single tiles: the GEMV ran ~15% slower, in CPU time, on the reworked one; bench/README.md).
// Per group of 16, the sum of code * x (code = q + 32) starts from -32 * the
// activation's group sum, so it is the sum of q * x; times the group's int8 scale.
template <int NX>
void q6k_tile_rows_single(const uint8_t* tile, int64_t nb, const uint8_t* x, size_t xs, float* y, size_t ys, int flags) {
  constexpr size_t kBlockBytes = kTileRows * 210;
  __m512 facc[NX];
#pragma GCC unroll 16
  for (int i = 0; i < NX; ++i) facc[i] = _mm512_setzero_ps();
  const __m512i m4 = _mm512_set1_epi8(0x0F), m2h = _mm512_set1_epi8(0x30);
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* blk = tile + b * kBlockBytes;
    const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 3328)));
    __m512i isum[NX];
    const BlockQ8_K* xb[NX];
#pragma GCC unroll 16
    for (int i = 0; i < NX; ++i) {
      xb[i] = reinterpret_cast<const BlockQ8_K*>(x + i * xs) + b;
      isum[i] = _mm512_setzero_si512();
    }
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
#pragma GCC unroll 2
      for (int half = 0; half < 2; ++half) {
        kquant_prefetch_quarter<kBlockBytes>(blk, nb, flags, 2 * h + half);
        __m512i s[4][NX];
#pragma GCC unroll 4
        for (int q = 0; q < 4; ++q) {
#pragma GCC unroll 16
          for (int i = 0; i < NX; ++i) s[q][i] = _mm512_set1_epi32(-32 * xb[i]->bsums[8 * h + 2 * q + half]);
        }
#pragma GCC unroll 4
        for (int l4 = 4 * half; l4 < 4 * half + 4; ++l4) {
          const __m512i qh = _mm512_loadu_si512(blk + 2048 + (8 * h + l4) * 64);
          const __m512i ql0 = _mm512_loadu_si512(blk + (8 * (2 * h) + l4) * 64);
          const __m512i ql1 = _mm512_loadu_si512(blk + (8 * (2 * h + 1) + l4) * 64);
          const __m512i code[4] = {
              _mm512_or_si512(_mm512_and_si512(ql0, m4), _mm512_and_si512(_mm512_slli_epi16(qh, 4), m2h)),
              _mm512_or_si512(_mm512_and_si512(ql1, m4), _mm512_and_si512(_mm512_slli_epi16(qh, 2), m2h)),
              _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(ql0, 4), m4), _mm512_and_si512(qh, m2h)),
              _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(ql1, 4), m4),
                              _mm512_and_si512(_mm512_srli_epi16(qh, 2), m2h))};
#pragma GCC unroll 4
          for (int q = 0; q < 4; ++q) {
#pragma GCC unroll 16
            for (int i = 0; i < NX; ++i) {
              s[q][i] = _mm512_dpbusd_epi32(s[q][i], code[q], bcast4(xb[i]->qs + 128 * h + 32 * q + 4 * l4));
            }
          }
        }
#pragma GCC unroll 4
        for (int q = 0; q < 4; ++q) {
          const int g = 8 * h + 2 * q + half;
          const __m512i sc = _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 3072 + 16 * g)));
#pragma GCC unroll 16
          for (int i = 0; i < NX; ++i) isum[i] = _mm512_add_epi32(isum[i], _mm512_mullo_epi32(s[q][i], sc));
        }
      }
    }
#pragma GCC unroll 16
    for (int i = 0; i < NX; ++i) {
      const __m512 d = _mm512_mul_ps(_mm512_set1_ps(xb[i]->d), dw);
      facc[i] = _mm512_add_ps(facc[i], _mm512_mul_ps(d, _mm512_cvtepi32_ps(isum[i])));
    }
  }
#pragma GCC unroll 16
  for (int i = 0; i < NX; ++i) _mm512_storeu_ps(y + i * ys, facc[i]);
}

// Q6_K: NT (1 or 2) consecutive tiles x NX activation rows per pass. Per group of 16, the
// sum of code * x (code = q + 32) starts from -32 * the activation's group sum, so it is
// the sum of q * x; times the group's int8 scale. Each quarter block runs as two passes (the
// low bits ql of groups q and q + 2 share their bytes), so 2 * NT * NX accumulators are
// live; the -32 * bsum starts are computed once per block and row and broadcast from the
// stack. Cost model as q4k_tile_rows.
template <int NT, int NX>
void q6k_tile_rows(const uint8_t* tile, int64_t nb, const uint8_t* x, size_t xs, float* y, size_t ys, int flags) {
  constexpr size_t kBlockBytes = kTileRows * 210;
  const size_t tile_bytes = size_t(nb) * kBlockBytes;
  __m512 facc[NT][NX];
#pragma GCC unroll 16
  for (int t = 0; t < NT; ++t) {
#pragma GCC unroll 16
    for (int i = 0; i < NX; ++i) facc[t][i] = _mm512_setzero_ps();
  }
  const __m512i m4 = _mm512_set1_epi8(0x0F), m2h = _mm512_set1_epi8(0x30);
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* blk0 = tile + b * kBlockBytes;
    __m512i isum[NT][NX];
    const BlockQ8_K* xb[NX];
    alignas(64) int32_t start[NX][16];  // -32 * bsums[g] of row i
#pragma GCC unroll 16
    for (int i = 0; i < NX; ++i) {
      xb[i] = reinterpret_cast<const BlockQ8_K*>(x + i * xs) + b;
      const __m512i bs = _mm512_cvtepi16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb[i]->bsums)));
      _mm512_store_si512(start[i], _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_slli_epi32(bs, 5)));
#pragma GCC unroll 2
      for (int t = 0; t < NT; ++t) isum[t][i] = _mm512_setzero_si512();
    }
#pragma GCC unroll 1
    for (int hh = 0; hh < 4; ++hh) {
      const int h = hh >> 1, half = hh & 1;
#pragma GCC unroll 2
      for (int t = 0; t < NT; ++t) kquant_prefetch_quarter<kBlockBytes>(blk0 + t * tile_bytes, nb, flags, hh, NT);
#pragma GCC unroll 1
      for (int p = 0; p < 2; ++p) {  // groups q = p (low nibbles of ql) and q = p + 2 (high)
        const int g0 = 8 * h + 2 * p + half, g1 = g0 + 4;
        __m512i s0[NT][NX], s1[NT][NX];
#pragma GCC unroll 16
        for (int i = 0; i < NX; ++i) {
#pragma GCC unroll 2
          for (int t = 0; t < NT; ++t) {
            s0[t][i] = _mm512_set1_epi32(start[i][g0]);
            s1[t][i] = _mm512_set1_epi32(start[i][g1]);
          }
        }
        const __m128i shl = _mm_cvtsi32_si128(4 - 2 * p), shr = _mm_cvtsi32_si128(2 * p);
#pragma GCC unroll 4
        for (int l = 0; l < 4; ++l) {
          const int l4 = 4 * half + l;
          __m512i c0[NT], c1[NT];
#pragma GCC unroll 2
          for (int t = 0; t < NT; ++t) {
            const uint8_t* blk = blk0 + t * tile_bytes;
            const __m512i qh = _mm512_loadu_si512(blk + 2048 + (8 * h + l4) * 64);
            const __m512i ql = _mm512_loadu_si512(blk + (8 * (2 * h + p) + l4) * 64);
            // q = p: low nibble | bits (2p, 2p + 1) of qh at 4, 5; q = p + 2: high nibble |
            // bits (2p + 4, 2p + 5) of qh at 4, 5.
            c0[t] = _mm512_ternarylogic_epi32(_mm512_and_si512(ql, m4), _mm512_sll_epi16(qh, shl), m2h, 0xF8);
            c1[t] = _mm512_ternarylogic_epi32(_mm512_and_si512(_mm512_srli_epi16(ql, 4), m4), _mm512_srl_epi16(qh, shr),
                                              m2h, 0xF8);
          }
#pragma GCC unroll 16
          for (int i = 0; i < NX; ++i) {
            const int8_t* xq = xb[i]->qs + 128 * h + 32 * p + 4 * l4;
            const __m512i xa = bcast4(xq), xh = bcast4(xq + 64);
#pragma GCC unroll 2
            for (int t = 0; t < NT; ++t) {
              s0[t][i] = _mm512_dpbusd_epi32(s0[t][i], c0[t], xa);
              s1[t][i] = _mm512_dpbusd_epi32(s1[t][i], c1[t], xh);
            }
          }
        }
#pragma GCC unroll 2
        for (int t = 0; t < NT; ++t) {
          const uint8_t* blk = blk0 + t * tile_bytes;
          const __m512i sc0 = _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 3072 + 16 * g0)));
          const __m512i sc1 = _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 3072 + 16 * g1)));
#pragma GCC unroll 16
          for (int i = 0; i < NX; ++i) {
            isum[t][i] = _mm512_add_epi32(isum[t][i], _mm512_add_epi32(_mm512_mullo_epi32(s0[t][i], sc0),
                                                                        _mm512_mullo_epi32(s1[t][i], sc1)));
          }
        }
      }
    }
#pragma GCC unroll 16
    for (int i = 0; i < NX; ++i) {
      const __m512 dx = _mm512_set1_ps(xb[i]->d);
#pragma GCC unroll 2
      for (int t = 0; t < NT; ++t) {
        const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk0 + t * tile_bytes + 3328)));
        facc[t][i] = _mm512_add_ps(facc[t][i], _mm512_mul_ps(_mm512_mul_ps(dx, dw), _mm512_cvtepi32_ps(isum[t][i])));
      }
    }
  }
#pragma GCC unroll 16
  for (int t = 0; t < NT; ++t) {
#pragma GCC unroll 16
    for (int i = 0; i < NX; ++i) _mm512_storeu_ps(y + i * ys + t * kTileRows, facc[t][i]);
  }
}

// KQuantTileDotFn: kKind 0 Q4_K, 1 Q6_K, 2 Q5_K (kquant_tile_dot's index), NT tiles; the
// prefetch hints as kquant_prefetch_quarter.
template <int kKind, int NT>
void kquant_tile_dot(const uint8_t* tile, int64_t nb, const void* x, size_t xs, int nx, float* y, size_t ys,
                     int flags) {
  static_assert(kKQuantTileActs == 8);
  const auto* xp = static_cast<const uint8_t*>(x);
  if constexpr (NT == 2 || kKind != 0) {  // 4 rows per pass: 16 accumulators (one tile: 8)
    for (int i0 = 0; i0 < nx; i0 += 4) {
      const int n = nx - i0 < 4 ? nx - i0 : 4;
      const int f = (i0 == 0 ? flags & kTileStream : 0) | (i0 + n >= nx ? flags & kTilePrefetchNext : 0);
#define SPILLWAY_KTILE2(NX)                                                                                   \
  if constexpr (kKind == 0) q4k_tile_rows<2, NX>(tile, nb, xp + i0 * xs, xs, y + i0 * ys, ys, f);      \
  else if constexpr (kKind == 2) q5k_tile_rows<true, NX>(tile, nb, xp + i0 * xs, xs, y + i0 * ys, ys, f);     \
  else if constexpr (NT == 2) q6k_tile_rows<2, NX>(tile, nb, xp + i0 * xs, xs, y + i0 * ys, ys, f);              \
  else q6k_tile_rows_single<NX>(tile, nb, xp + i0 * xs, xs, y + i0 * ys, ys, f);
      switch (n) {
        case 1: { SPILLWAY_KTILE2(1) break; }
        case 2: { SPILLWAY_KTILE2(2) break; }
        case 3: { SPILLWAY_KTILE2(3) break; }
        default: { SPILLWAY_KTILE2(4) break; }
      }
#undef SPILLWAY_KTILE2
    }
    return;
  }
#define SPILLWAY_KTILE(NX)                                                  \
  q4k_tile_rows<1, NX>(tile, nb, xp, xs, y, ys, flags);
  switch (nx) {
    case 1: { SPILLWAY_KTILE(1) break; }
    case 2: { SPILLWAY_KTILE(2) break; }
    case 3: { SPILLWAY_KTILE(3) break; }
    case 4: { SPILLWAY_KTILE(4) break; }
    case 5: { SPILLWAY_KTILE(5) break; }
    case 6: { SPILLWAY_KTILE(6) break; }
    case 7: { SPILLWAY_KTILE(7) break; }
    default: { SPILLWAY_KTILE(8) break; }
  }
#undef SPILLWAY_KTILE
}

// Q5_K on two tiles: two single-tile calls (the paired Q4_K kernel with the qh merge ran
// Q5_K prefill ~10% slower than this).
void q5k_tile2_dot(const uint8_t* tile, int64_t nb, const void* x, size_t xs, int nx, float* y, size_t ys, int flags) {
  kquant_tile_dot<2, 1>(tile, nb, x, xs, nx, y, ys, flags);
  kquant_tile_dot<2, 1>(tile + nb * kTileRows * 176, nb, x, xs, nx, y + kTileRows, ys, flags);
}

struct Q4KDot {
  template <int NX>
  static void rows(const void* w, const void* x, size_t xs, int64_t cols, float* y, size_t ys) {
    dot_q4_k_rows<NX>(w, x, xs, cols, y, ys);
  }
  static void run(const void* w, const void* x, size_t xs, int nx, int64_t cols, float* y, size_t ys) {
    SPILLWAY_DISPATCH_NX(rows, nx, w, x, xs, cols, y, ys)
  }
};
struct Q6KDot {
  template <int NX>
  static void rows(const void* w, const void* x, size_t xs, int64_t cols, float* y, size_t ys) {
    dot_q6_k_rows<NX>(w, x, xs, cols, y, ys);
  }
  static void run(const void* w, const void* x, size_t xs, int nx, int64_t cols, float* y, size_t ys) {
    SPILLWAY_DISPATCH_NX(rows, nx, w, x, xs, cols, y, ys)
  }
};

// ---- activation quantizers (bit-identical to the scalar ones) -------------------------------

// Lane g of the result = op over the 16 lanes of q[g] (op: an exact, order-free int32
// operation, _mm512_add_epi32 or _mm512_max_epi32): pairs of inputs interleaved and combined
// within 128-bit quarters, then the quarters combined.
template <class Op>
inline __m512i lane_reduce16(const __m512i (&q)[16], Op op) {
  __m512i c[8], d[4];
#pragma GCC unroll 8
  for (int i = 0; i < 8; ++i) c[i] = op(_mm512_unpacklo_epi32(q[2 * i], q[2 * i + 1]), _mm512_unpackhi_epi32(q[2 * i], q[2 * i + 1]));
#pragma GCC unroll 4
  for (int j = 0; j < 4; ++j) {  // quarter Q of d[j]: q[4j .. 4j + 3] reduced over their quarter Q
    d[j] = op(_mm512_unpacklo_epi64(c[2 * j], c[2 * j + 1]), _mm512_unpackhi_epi64(c[2 * j], c[2 * j + 1]));
  }
  constexpr int kEven = _MM_SHUFFLE(2, 0, 2, 0), kOdd = _MM_SHUFFLE(3, 1, 3, 1);
  const __m512i f0 = op(_mm512_shuffle_i32x4(d[0], d[1], kEven), _mm512_shuffle_i32x4(d[0], d[1], kOdd));
  const __m512i f1 = op(_mm512_shuffle_i32x4(d[2], d[3], kEven), _mm512_shuffle_i32x4(d[2], d[3], kOdd));
  return op(_mm512_shuffle_i32x4(f0, f1, kEven), _mm512_shuffle_i32x4(f0, f1, kOdd));
}
inline __m512i lane_sums16(const __m512i (&q)[16]) {
  return lane_reduce16(q, [](__m512i a, __m512i b) { return _mm512_add_epi32(a, b); });
}

// QuantizeQ8Fn: the scalar quantizer's bits (kernels_scalar.cpp), 16 blocks of 32 values at a
// time with the blocks in the lanes for the scale and the sum: amax by a max over the
// magnitudes' bit patterns (ordered as the floats for |x|), d = fp16(amax / 127) widened
// (vcvtps2ph rounds to nearest even as fp32_to_fp16), q = round-half-even(x * 127 / amax),
// corr = -offset * sum q; each block's 32 codes go to their 8 interleaved dwords. The blocks
// after the last 16 one at a time, the same arithmetic. (Rows holding NaN are left out of the
// bit-for-bit promise here, as on AVX2: their amax depends on the reduction.)
void quantize_q8(const float* x, int64_t n, int32_t offset, void* group, int row) {
  const Q8Group g = q8_group(group, n);
  auto* q4 = const_cast<int32_t*>(g.q4);
  auto* d = const_cast<float*>(g.d);
  auto* corr = const_cast<int32_t*>(g.corr);
  const __m512i magnitude = _mm512_set1_epi32(0x7FFFFFFF);
  auto store_codes = [&](int64_t b, __m512i q0, __m512i q1) {
    alignas(32) int32_t words[8];
    _mm_store_si128(reinterpret_cast<__m128i*>(words), _mm512_cvtepi32_epi8(q0));
    _mm_store_si128(reinterpret_cast<__m128i*>(words + 4), _mm512_cvtepi32_epi8(q1));
    int32_t* out = q4 + b * 8 * kTileActs + row;
#pragma GCC unroll 8
    for (int k = 0; k < 8; ++k) out[k * kTileActs] = words[k];
  };
  const int64_t nb = n / kQK8_0;
  int64_t b = 0;
  for (; b + 16 <= nb; b += 16) {
    const float* xb = x + b * kQK8_0;
    __m512i bits[16];
#pragma GCC unroll 16
    for (int k = 0; k < 16; ++k) {
      bits[k] = _mm512_max_epi32(_mm512_and_si512(_mm512_castps_si512(_mm512_loadu_ps(xb + 32 * k)), magnitude),
                                 _mm512_and_si512(_mm512_castps_si512(_mm512_loadu_ps(xb + 32 * k + 16)), magnitude));
    }
    const __m512 amax =
        _mm512_castsi512_ps(lane_reduce16(bits, [](__m512i a, __m512i c) { return _mm512_max_epi32(a, c); }));
    const __m512 scale = _mm512_cvtph_ps(_mm512_cvtps_ph(_mm512_div_ps(amax, _mm512_set1_ps(127.0f)),
                                                         _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    alignas(64) float scales[16];
    _mm512_store_ps(scales, scale);
#pragma GCC unroll 16
    for (int k = 0; k < 16; ++k) d[(b + k) * kTileActs + row] = scales[k];
    alignas(64) float id[16];
    _mm512_store_ps(id, _mm512_maskz_div_ps(_mm512_cmp_ps_mask(amax, _mm512_setzero_ps(), _CMP_NEQ_OQ),
                                            _mm512_set1_ps(127.0f), amax));
    __m512i sums[16];
#pragma GCC unroll 16
    for (int k = 0; k < 16; ++k) {
      const __m512 idk = _mm512_set1_ps(id[k]);
      const __m512i q0 = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_loadu_ps(xb + 32 * k), idk));
      const __m512i q1 = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_loadu_ps(xb + 32 * k + 16), idk));
      store_codes(b + k, q0, q1);
      sums[k] = _mm512_add_epi32(q0, q1);
    }
    alignas(64) int32_t corrections[16];
    _mm512_store_si512(corrections, _mm512_mullo_epi32(lane_sums16(sums), _mm512_set1_epi32(-offset)));
#pragma GCC unroll 16
    for (int k = 0; k < 16; ++k) corr[(b + k) * kTileActs + row] = corrections[k];
  }
  for (; b < nb; ++b) {
    const float* xb = x + b * kQK8_0;
    const __m512 v0 = _mm512_loadu_ps(xb), v1 = _mm512_loadu_ps(xb + 16);
    const float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(v0), _mm512_abs_ps(v1)));
    d[b * kTileActs + row] = _cvtsh_ss(_cvtss_sh(amax / 127.0f, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    const __m512 id = _mm512_set1_ps(amax != 0.0f ? 127.0f / amax : 0.0f);
    const __m512i q0 = _mm512_cvtps_epi32(_mm512_mul_ps(v0, id)), q1 = _mm512_cvtps_epi32(_mm512_mul_ps(v1, id));
    store_codes(b, q0, q1);
    corr[b * kTileActs + row] = -offset * _mm512_reduce_add_epi32(_mm512_add_epi32(q0, q1));
  }
}

// QuantizeActivationsFn (Q8_K): the scalar quantizer's bits (kernels_scalar.cpp): the first
// value of largest magnitude sets the scale's sign, q = min(127, round-half-even(iscale * x))
// (vcvtps2dq under the default rounding), bsums exact. One 256-value block in 16 registers.
void quantize_act_q8_k(const float* x, void* dst, int64_t n) {
  auto* y = static_cast<BlockQ8_K*>(dst);
  for (int64_t b = 0; b < n / kQK_K; ++b, x += kQK_K) {
    __m512 v[16];
    __m512 m = _mm512_setzero_ps();
#pragma GCC unroll 16
    for (int k = 0; k < 16; ++k) {
      v[k] = _mm512_loadu_ps(x + 16 * k);
      m = _mm512_max_ps(m, _mm512_abs_ps(v[k]));
    }
    const float amax = _mm512_reduce_max_ps(m);
    if (amax == 0.0f) {
      std::memset(&y[b], 0, sizeof y[b]);
      continue;
    }
    int first = 0;
    const __m512 va = _mm512_set1_ps(amax);
    for (int k = 0; k < 16; ++k) {
      const __mmask16 at = _mm512_cmp_ps_mask(_mm512_abs_ps(v[k]), va, _CMP_EQ_OQ);
      if (at != 0) {
        first = 16 * k + __builtin_ctz(at);
        break;
      }
    }
    const float iscale = -127.0f / x[first];
    const __m512 s = _mm512_set1_ps(iscale);
    const __m512i limit = _mm512_set1_epi32(127);
    __m512i q[16];
#pragma GCC unroll 16
    for (int k = 0; k < 16; ++k) {
      q[k] = _mm512_min_epi32(_mm512_cvtps_epi32(_mm512_mul_ps(v[k], s)), limit);
      _mm_storeu_si128(reinterpret_cast<__m128i*>(y[b].qs + 16 * k), _mm512_cvtepi32_epi8(q[k]));
    }
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(y[b].bsums), _mm512_cvtepi32_epi16(lane_sums16(q)));
    y[b].d = 1.0f / iscale;
  }
}

}  // namespace

void add_avx512_dot_kernels(KernelTable& t) {
  // Float weights: float_tiles_avx512.cpp; Q8_0 / Q4_0 tiles: q8_tiles_avx512.cpp.
  t.quantize_q8 = quantize_q8;
  t.quantize_q8_K = quantize_act_q8_k;
  t.kquant_dot[0] = Q4KDot::run;
  t.kquant_dot[1] = Q6KDot::run;
  t.kquant_tile_dot[0] = kquant_tile_dot<0, 1>;
  t.kquant_tile_dot[1] = kquant_tile_dot<1, 1>;
  t.kquant_tile_dot[2] = kquant_tile_dot<2, 1>;
  t.kquant_tile2_dot[0] = kquant_tile_dot<0, 2>;
  t.kquant_tile2_dot[1] = kquant_tile_dot<1, 2>;
  t.kquant_tile2_dot[2] = q5k_tile2_dot;
  // K-quant batched decode and prefill from kquant_unpack_min_rows rows: kquant_unpacked_avx512.cpp.
}

}  // namespace spillway::kernels
