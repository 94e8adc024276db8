// AVX-512 VNNI kernels of the Q8_0 / Q4_0 tiles (kernel_table.h, "row-interleaved weight
// tiles"): 16-row tiles, one lane per weight row, vpdpbusd of the unsigned codes against
// broadcast activation bytes. One tile (tile_dot), two tiles' blocks interleaved for a GEMV
// (tile_dot_pair: two weight streams), two tiles sharing each broadcast for prefill
// (tile2_dot). Every output in the tile dot's order, so the scalar reference's bits.
#include "kernels/avx512_target.h"  // first: the intrinsics, GCC 12's warnings off

#include <cstdint>

#include "kernels/kernel_registry.h"

namespace spillway::kernels {

namespace {

// Lane r of every vector is weight row r of the tile; a vpdpbusd of one 64-byte code group
// against four broadcast activation bytes adds four products to each row's block sum, which
// starts from the activation's correction term (so the unsigned codes give the signed sum).

// Software prefetch for a Q8_0 / Q4_0 tile, one block's worth of lines per block: the tile
// (wd[nb][16] then codes[nb][G][16][4], contiguous, and the unit's tiles one after another)
// is swept as one linear run, block b's share at wd + b * (kCodeBytes + 32) bytes plus
// kTilePrefetchBytes (kTileStream: the tile streams from DRAM) or plus one tile
// (kTilePrefetchNext: this tile is in cache, the next one is fetched). So the scales and the
// codes, and the start of the next tile, are all covered (the 4 KiB-ahead prefetch of the
// codes alone left the first blocks of every tile to the hardware). Prefetches never fault,
// so reading past the matrix is harmless. 8 KiB ahead: bench/README.md (4-16 KiB and the
// T1 hint measured).
constexpr size_t kTilePrefetchBytes = 8192;
template <size_t kCodeBytes>
inline void q8_tile_prefetch(const uint16_t* wd, int64_t b, size_t tile_bytes, int flags) {
  constexpr size_t kBlockBytes = kCodeBytes + kTileRows * sizeof(uint16_t);
  constexpr int kLines = int((kBlockBytes + 63) / 64);
  // The address outside the test: GCC 12 (-O2 and -O3) deletes the whole guarded loop when
  // the address is computed inside it.
  const size_t ahead = (flags & kTileStream) ? kTilePrefetchBytes : tile_bytes;
  const char* p = reinterpret_cast<const char*>(wd) + size_t(b) * kBlockBytes + ahead;
  if (flags & (kTileStream | kTilePrefetchNext)) {
#pragma GCC unroll 16
    for (int l = 0; l < kLines; ++l) _mm_prefetch(p + 64 * l, _MM_HINT_T0);
  }
}

// A Q4_0 code vector's nibbles as bytes 0..15: lo, the low nibbles (elements 4g + l), hi, the
// high ones (elements 16 + 4g + l).
struct Nibbles {
  __m512i lo, hi;
};
inline Nibbles split_nibbles(__m512i raw) {
  const __m512i low = _mm512_set1_epi8(0x0F);
  return {_mm512_and_si512(raw, low), _mm512_and_si512(_mm512_srli_epi16(raw, 4), low)};
}

// Block sums of one tile block (codes c, activation dwords q4, corrections corr) for NX
// activation rows: sum[i] = corr[i] + the block's products, exact int32.
template <bool kQ4, int NX>
__attribute__((always_inline)) inline void tile_block_sums(const uint8_t* c, const int32_t* q4, const int32_t* corr,
                                                           __m512i (&sum)[NX]) {
  // kChains partial sums per activation row (integers: their order cannot matter), so a
  // block's vpdpbusd are not one dependent chain when few rows share the weights.
  constexpr int kChains = NX >= 4 ? 1 : (NX == 1 ? 4 : 2);
  __m512i acc[kChains][NX];
#pragma GCC unroll 16
  for (int i = 0; i < NX; ++i) {
    acc[0][i] = _mm512_set1_epi32(corr[i]);
#pragma GCC unroll 4
    for (int k = 1; k < kChains; ++k) acc[k][i] = _mm512_setzero_si512();
  }
  if constexpr (kQ4) {
#pragma GCC unroll 16
    for (int g = 0; g < 4; ++g) {
      const auto [lo, hi] = split_nibbles(_mm512_loadu_si512(c + 64 * g));
      const int klo = (2 * g) % kChains, khi = (2 * g + 1) % kChains;
#pragma GCC unroll 16
      for (int i = 0; i < NX; ++i) {
        acc[klo][i] = _mm512_dpbusd_epi32(acc[klo][i], lo, _mm512_set1_epi32(q4[g * kTileActs + i]));
        acc[khi][i] = _mm512_dpbusd_epi32(acc[khi][i], hi, _mm512_set1_epi32(q4[(g + 4) * kTileActs + i]));
      }
    }
  } else {
#pragma GCC unroll 16
    for (int g = 0; g < 8; ++g) {
      const __m512i w = _mm512_loadu_si512(c + 64 * g);
      const int kc = g % kChains;
#pragma GCC unroll 16
      for (int i = 0; i < NX; ++i) acc[kc][i] = _mm512_dpbusd_epi32(acc[kc][i], w, _mm512_set1_epi32(q4[g * kTileActs + i]));
    }
  }
#pragma GCC unroll 16
  for (int i = 0; i < NX; ++i) {
#pragma GCC unroll 4
    for (int k = 1; k < kChains; ++k) acc[0][i] = _mm512_add_epi32(acc[0][i], acc[k][i]);
    sum[i] = acc[0][i];
  }
}

template <bool kQ4, int NX>
void tile_dot_block(const uint16_t* wd, const uint8_t* codes, int64_t nb, const Q8Group& x, float* y, size_t ys,
                    int flags) {
  constexpr size_t kCodeBytes = size_t(64) * (kQ4 ? 4 : 8);
  const size_t tile_bytes = size_t(nb) * (kCodeBytes + kTileRows * sizeof(uint16_t));
  __m512 facc[NX];
#pragma GCC unroll 16
  for (int i = 0; i < NX; ++i) facc[i] = (flags & kTileAccumulate) ? _mm512_loadu_ps(y + i * ys) : _mm512_setzero_ps();
  const int32_t* q4 = x.q4;
  const float* xd = x.d;
  const int32_t* corr = x.corr;
  for (int64_t b = 0; b < nb; ++b, q4 += 8 * kTileActs, xd += kTileActs, corr += kTileActs) {
    q8_tile_prefetch<kCodeBytes>(wd, b, tile_bytes, flags);
    __m512i sum[NX];
    tile_block_sums<kQ4, NX>(codes + b * kCodeBytes, q4, corr, sum);
    const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(wd + b * kTileRows)));
#pragma GCC unroll 16
    for (int i = 0; i < NX; ++i) {
      const __m512 s = _mm512_mul_ps(dw, _mm512_set1_ps(xd[i]));
      facc[i] = _mm512_fmadd_ps(s, _mm512_cvtepi32_ps(sum[i]), facc[i]);
    }
  }
#pragma GCC unroll 16
  for (int i = 0; i < NX; ++i) _mm512_storeu_ps(y + i * ys, facc[i]);
}

// TileDotPairFn: the two tiles' blocks interleaved, one activation row; each output as
// tile_dot_block<kQ4, 1> computes it (the same integer block sums, the same float steps).
// The two blocks advance together one code vector at a time, each step also issuing one of
// each block's prefetch lines (q8_tile_prefetch's lines, as far ahead): the loop that issued
// a block's prefetches all before its loads streamed Q8_0 from DRAM a few percent slower
// (bench/README.md, "The probe reads four streams per thread; the Q8_0 / Q4_0 pair kernel
// interleaves its blocks").
template <bool kQ4>
void tile_dot_pair(const uint16_t* const wd[2], const uint8_t* const codes[2], int64_t nb, const Q8Group& x,
                   float* const y[2]) {
  constexpr int kGroups = kQ4 ? 4 : 8;  // code vectors a block
  constexpr size_t kCodeBytes = size_t(64) * kGroups;
  constexpr size_t kBlockBytes = kCodeBytes + kTileRows * sizeof(uint16_t);
  constexpr int kLines = int((kBlockBytes + 63) / 64);
  constexpr int kChains = 4;  // as tile_block_sums<kQ4, 1> (integer sums: any order)
  __m512 facc[2] = {_mm512_setzero_ps(), _mm512_setzero_ps()};
  const int32_t* q4 = x.q4;
  const float* xd = x.d;
  const int32_t* corr = x.corr;
  const char* const ahead[2] = {reinterpret_cast<const char*>(wd[0]) + kTilePrefetchBytes,
                                reinterpret_cast<const char*>(wd[1]) + kTilePrefetchBytes};
  for (int64_t b = 0; b < nb; ++b, q4 += 8 * kTileActs, xd += kTileActs, corr += kTileActs) {
    __m512i acc[2][kChains];
#pragma GCC unroll 2
    for (int s = 0; s < 2; ++s) {
      acc[s][0] = _mm512_set1_epi32(corr[0]);
#pragma GCC unroll 4
      for (int k = 1; k < kChains; ++k) acc[s][k] = _mm512_setzero_si512();
    }
#pragma GCC unroll 8
    for (int g = 0; g < kGroups; ++g) {
#pragma GCC unroll 2
      for (int s = 0; s < 2; ++s) {
        _mm_prefetch(ahead[s] + size_t(b) * kBlockBytes + 64 * g, _MM_HINT_T0);
        const __m512i raw = _mm512_loadu_si512(codes[s] + b * kCodeBytes + 64 * g);
        if constexpr (kQ4) {
          const int klo = (2 * g) % kChains, khi = (2 * g + 1) % kChains;
          const auto [lo, hi] = split_nibbles(raw);
          acc[s][klo] = _mm512_dpbusd_epi32(acc[s][klo], lo, _mm512_set1_epi32(q4[g * kTileActs]));
          acc[s][khi] = _mm512_dpbusd_epi32(acc[s][khi], hi, _mm512_set1_epi32(q4[(g + 4) * kTileActs]));
        } else {
          acc[s][g % kChains] = _mm512_dpbusd_epi32(acc[s][g % kChains], raw, _mm512_set1_epi32(q4[g * kTileActs]));
        }
      }
    }
#pragma GCC unroll 2
    for (int s = 0; s < 2; ++s) {
#pragma GCC unroll 4
      for (int l = kGroups; l < kLines; ++l) _mm_prefetch(ahead[s] + size_t(b) * kBlockBytes + 64 * l, _MM_HINT_T0);
      const __m512i sum = _mm512_add_epi32(_mm512_add_epi32(acc[s][0], acc[s][1]), _mm512_add_epi32(acc[s][2], acc[s][3]));
      const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(wd[s] + b * kTileRows)));
      facc[s] = _mm512_fmadd_ps(_mm512_mul_ps(dw, _mm512_set1_ps(xd[0])), _mm512_cvtepi32_ps(sum), facc[s]);
    }
  }
  _mm512_storeu_ps(y[0], facc[0]);
  _mm512_storeu_ps(y[1], facc[1]);
}

// TileDotFn on two consecutive tiles (kernel_table.h, tile2_dot): each broadcast activation
// dword feeds both tiles' vpdpbusd, half the broadcast loads of tile_dot_block, whose prefill
// sweep is bound by loads (bench/README.md). The integer sums of a block are formed for up to
// 4 activation rows at a time (the registers of two tiles' sums), the block's codes reread
// from L1 by the second four; the 2 x NX float accumulators live across the blocks (GCC 12
// keeps most of them on the stack at NX = 8, a load and a store per block each). Each output
// as tile_dot_block computes it.
template <bool kQ4, int NX>
void tile2_dot_block(const uint16_t* wd, const uint8_t* codes, int64_t nb, const Q8Group& x, float* y, size_t ys,
                     int flags) {
  constexpr size_t kCodeBytes = size_t(64) * (kQ4 ? 4 : 8);
  const size_t tile_bytes = size_t(nb) * (kCodeBytes + kTileRows * sizeof(uint16_t));
  const uint16_t* wd2[2] = {wd, wd + tile_bytes / sizeof(uint16_t)};
  const uint8_t* codes2[2] = {codes, codes + tile_bytes};
  __m512 facc[2][NX];
#pragma GCC unroll 2
  for (int t = 0; t < 2; ++t) {
#pragma GCC unroll 8
    for (int i = 0; i < NX; ++i) {
      facc[t][i] = (flags & kTileAccumulate) ? _mm512_loadu_ps(y + i * ys + t * kTileRows) : _mm512_setzero_ps();
    }
  }
  const int32_t* q4 = x.q4;
  const float* xd = x.d;
  const int32_t* corr = x.corr;
  for (int64_t b = 0; b < nb; ++b, q4 += 8 * kTileActs, xd += kTileActs, corr += kTileActs) {
    q8_tile_prefetch<kCodeBytes>(wd2[0], b, 2 * tile_bytes, flags);
    q8_tile_prefetch<kCodeBytes>(wd2[1], b, 2 * tile_bytes, flags);
    __m512 dw[2];
#pragma GCC unroll 2
    for (int t = 0; t < 2; ++t) {
      dw[t] = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(wd2[t] + b * kTileRows)));
    }
#pragma GCC unroll 2
    for (int i0 = 0; i0 < NX; i0 += 4) {
      constexpr int kPass = NX < 4 ? NX : 4;
      const int n = NX - i0 < kPass ? NX - i0 : kPass;  // a constant once unrolled
      __m512i acc[2][kPass];
#pragma GCC unroll 4
      for (int i = 0; i < n; ++i) acc[0][i] = acc[1][i] = _mm512_set1_epi32(corr[i0 + i]);
      if constexpr (kQ4) {
#pragma GCC unroll 4
        for (int g = 0; g < 4; ++g) {
          __m512i lo[2], hi[2];
#pragma GCC unroll 2
          for (int t = 0; t < 2; ++t) {
            const Nibbles nibbles = split_nibbles(_mm512_loadu_si512(codes2[t] + b * kCodeBytes + 64 * g));
            lo[t] = nibbles.lo;
            hi[t] = nibbles.hi;
          }
#pragma GCC unroll 4
          for (int i = 0; i < n; ++i) {
            const __m512i xlo = _mm512_set1_epi32(q4[g * kTileActs + i0 + i]);
            const __m512i xhi = _mm512_set1_epi32(q4[(g + 4) * kTileActs + i0 + i]);
#pragma GCC unroll 2
            for (int t = 0; t < 2; ++t) {
              acc[t][i] = _mm512_dpbusd_epi32(acc[t][i], lo[t], xlo);
              acc[t][i] = _mm512_dpbusd_epi32(acc[t][i], hi[t], xhi);
            }
          }
        }
      } else {
#pragma GCC unroll 8
        for (int g = 0; g < 8; ++g) {
          const __m512i w0 = _mm512_loadu_si512(codes2[0] + b * kCodeBytes + 64 * g);
          const __m512i w1 = _mm512_loadu_si512(codes2[1] + b * kCodeBytes + 64 * g);
#pragma GCC unroll 4
          for (int i = 0; i < n; ++i) {
            const __m512i xq = _mm512_set1_epi32(q4[g * kTileActs + i0 + i]);
            acc[0][i] = _mm512_dpbusd_epi32(acc[0][i], w0, xq);
            acc[1][i] = _mm512_dpbusd_epi32(acc[1][i], w1, xq);
          }
        }
      }
#pragma GCC unroll 4
      for (int i = 0; i < n; ++i) {
        const __m512 xs = _mm512_set1_ps(xd[i0 + i]);
#pragma GCC unroll 2
        for (int t = 0; t < 2; ++t) {
          facc[t][i0 + i] = _mm512_fmadd_ps(_mm512_mul_ps(dw[t], xs), _mm512_cvtepi32_ps(acc[t][i]), facc[t][i0 + i]);
        }
      }
    }
  }
#pragma GCC unroll 2
  for (int t = 0; t < 2; ++t) {
#pragma GCC unroll 8
    for (int i = 0; i < NX; ++i) _mm512_storeu_ps(y + i * ys + t * kTileRows, facc[t][i]);
  }
}

// TileDotFn (kTiles 1) and tile2_dot (kTiles 2, kernel_table.h).
template <bool kQ4, int kTiles = 1>
void tile_dot(const uint16_t* wd, const uint8_t* codes, int64_t nb, const Q8Group& x, int nx, float* y, size_t ys,
              int flags) {
  static_assert(kTileActs == 8 && kTileRows == 16);
#define SPILLWAY_TILE_DOT(NX)                                                      \
  return kTiles == 2 ? tile2_dot_block<kQ4, NX>(wd, codes, nb, x, y, ys, flags) \
                     : tile_dot_block<kQ4, NX>(wd, codes, nb, x, y, ys, flags);
  switch (nx) {
    case 1: SPILLWAY_TILE_DOT(1)
    case 2: SPILLWAY_TILE_DOT(2)
    case 3: SPILLWAY_TILE_DOT(3)
    case 4: SPILLWAY_TILE_DOT(4)
    case 5: SPILLWAY_TILE_DOT(5)
    case 6: SPILLWAY_TILE_DOT(6)
    case 7: SPILLWAY_TILE_DOT(7)
    default: SPILLWAY_TILE_DOT(8)
  }
#undef SPILLWAY_TILE_DOT
}

}  // namespace

void add_avx512_q8_tile_kernels(KernelTable& t) {
  t.tile_dot[0] = tile_dot<false>;
  t.tile_dot[1] = tile_dot<true>;
  t.tile_dot_pair[0] = tile_dot_pair<false>;
  t.tile_dot_pair[1] = tile_dot_pair<true>;
  t.tile2_dot[0] = tile_dot<false, 2>;
  t.tile2_dot[1] = tile_dot<true, 2>;
}

}  // namespace spillway::kernels
