// AVX2 + FMA + F16C: activation quantizers and weight-row dot kernels.
//
// Every kernel keeps the per-output order of its contract in kernel_table.h (Q8_0 / Q4_0
// tiles: exact block sums, one fma per block; Q4_K / Q6_K: exact 256-block sums scaled once),
// so all are bit-identical to the scalar reference. The K-quant tile kernels are in
// kquant_tiles_avx2.cpp, the float weights' in float_tiles_avx2.cpp.
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "kernels/kernel_registry.h"
#include "kernels/matmul/kquant_decode_avx2.h"
#include "kernels/quant/quant_blocks.h"

namespace spillway::kernels {

namespace {

inline int32_t hsum_i32(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1));
  return _mm_cvtsi128_si32(s);
}

inline float hmax(__m256 v) {
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  m = _mm_max_ss(m, _mm_movehdup_ps(m));
  return _mm_cvtss_f32(m);
}

inline __m256 abs_ps(__m256 v) { return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), v); }

inline float half_to_float(uint16_t h) { return _cvtsh_ss(h); }

// Four vectors of 8 int32 (each within int8 range) -> 32 int8 in element order.
inline __m256i pack_i32_to_i8(__m256i a, __m256i b, __m256i c, __m256i d) {
  const __m256i ab = _mm256_packs_epi32(a, b);
  const __m256i cd = _mm256_packs_epi32(c, d);
  const __m256i abcd = _mm256_packs_epi16(ab, cd);
  return _mm256_permutevar8x32_epi32(abcd, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

// ---- activation quantizers (bit-identical to the scalar ones) -----------------------------

void quantize_q8(const float* x, int64_t n, int32_t offset, void* group, int row) {
  const Q8Group g = q8_group(group, n);
  auto* q4 = const_cast<int32_t*>(g.q4);
  auto* d = const_cast<float*>(g.d);
  auto* corr = const_cast<int32_t*>(g.corr);
  for (int64_t b = 0; b < n / kQK8_0; ++b, x += kQK8_0) {
    const __m256 v0 = _mm256_loadu_ps(x), v1 = _mm256_loadu_ps(x + 8);
    const __m256 v2 = _mm256_loadu_ps(x + 16), v3 = _mm256_loadu_ps(x + 24);
    const __m256 m = _mm256_max_ps(_mm256_max_ps(abs_ps(v0), abs_ps(v1)), _mm256_max_ps(abs_ps(v2), abs_ps(v3)));
    const float amax = hmax(m);
    d[b * kTileActs + row] = half_to_float(fp32_to_fp16(amax / 127.0f));
    const __m256 id = _mm256_set1_ps(amax != 0.0f ? 127.0f / amax : 0.0f);
    const __m256i q0 = _mm256_cvtps_epi32(_mm256_mul_ps(v0, id)), q1 = _mm256_cvtps_epi32(_mm256_mul_ps(v1, id));
    const __m256i q2 = _mm256_cvtps_epi32(_mm256_mul_ps(v2, id)), q3 = _mm256_cvtps_epi32(_mm256_mul_ps(v3, id));
    corr[b * kTileActs + row] = -offset * hsum_i32(_mm256_add_epi32(_mm256_add_epi32(q0, q1), _mm256_add_epi32(q2, q3)));
    alignas(32) int32_t words[8];
    _mm256_store_si256(reinterpret_cast<__m256i*>(words), pack_i32_to_i8(q0, q1, q2, q3));
    for (int k = 0; k < 8; ++k) q4[(b * 8 + k) * kTileActs + row] = words[k];
  }
}

void quantize_act_q8_k(const float* x, void* dst, int64_t n) {
  auto* y = static_cast<BlockQ8_K*>(dst);
  for (int64_t b = 0; b < n / kQK_K; ++b, x += kQK_K) {
    __m256 m = _mm256_setzero_ps();
    for (int j = 0; j < kQK_K; j += 8) m = _mm256_max_ps(m, abs_ps(_mm256_loadu_ps(x + j)));
    const float amax = hmax(m);
    if (amax == 0.0f) {
      std::memset(&y[b], 0, sizeof y[b]);
      continue;
    }
    int first = 0;  // the first value of largest magnitude sets the sign of the scale
    while (!(x[first] == amax || x[first] == -amax)) ++first;
    const float iscale = -127.0f / x[first];
    const __m256 s = _mm256_set1_ps(iscale);
    const __m256i limit = _mm256_set1_epi32(127);
    for (int j = 0; j < kQK_K; j += 32) {
      __m256i q[4];
      for (int k = 0; k < 4; ++k) {
        q[k] = _mm256_min_epi32(_mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + j + 8 * k), s)), limit);
      }
      y[b].bsums[j / 16] = static_cast<int16_t>(hsum_i32(_mm256_add_epi32(q[0], q[1])));
      y[b].bsums[j / 16 + 1] = static_cast<int16_t>(hsum_i32(_mm256_add_epi32(q[2], q[3])));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(y[b].qs + j), pack_i32_to_i8(q[0], q[1], q[2], q[3]));
    }
    y[b].d = 1.0f / iscale;
  }
}

// Instantiates fn<1..4> for a runtime row count.
#define SPILLWAY_DISPATCH_NX(fn, nx, ...) \
  switch (nx) {                           \
    case 1: fn<1>(__VA_ARGS__); break;    \
    case 2: fn<2>(__VA_ARGS__); break;    \
    case 3: fn<3>(__VA_ARGS__); break;    \
    default: fn<4>(__VA_ARGS__); break;   \
  }

// ---- Q8_0 / Q4_0 tiles x Q8 activations ----------------------------------------------------
// Rows 0-7 and 8-15 of a tile in two vectors of 8 int32 lanes. Q8_0 codes are turned back
// into signed quants and multiplied as |w| x sign(x, w) (maddubs cannot take the unsigned
// codes without saturating), so their block sums start from 0 instead of the correction;
// Q4_0 nibbles (0..15) go into maddubs directly and start from the correction.

// Software prefetch for a Q8_0 / Q4_0 tile, as q8_tiles_avx512.cpp's: block b's share of the
// tile's bytes (wd[nb][16] then the codes, one linear run through the unit's tiles) at
// wd + b * (kCodeBytes + 32) plus kTilePrefetchBytes (kTileStream) or one tile
// (kTilePrefetchNext). Prefetches never fault. The address is computed outside the test:
// GCC 12 deletes the guarded loop when it is computed inside.
constexpr size_t kTilePrefetchBytes = 8192;
template <size_t kCodeBytes>
inline void q8_tile_prefetch(const uint16_t* wd, int64_t b, size_t tile_bytes, int flags) {
  constexpr size_t kBlockBytes = kCodeBytes + kTileRows * sizeof(uint16_t);
  constexpr int kLines = int((kBlockBytes + 63) / 64);
  const size_t ahead = (flags & kTileStream) ? kTilePrefetchBytes : tile_bytes;
  const char* p = reinterpret_cast<const char*>(wd) + size_t(b) * kBlockBytes + ahead;
  if (flags & (kTileStream | kTilePrefetchNext)) {
    #pragma GCC unroll 16
    for (int l = 0; l < kLines; ++l) _mm_prefetch(p + 64 * l, _MM_HINT_T0);
  }
}

// Activation rows i0..i0 + NX - 1 of the group x against S tiles (S > 1: their blocks read
// interleaved, S weight streams in flight). Each tile's outputs are computed as with S = 1.
template <bool kQ4, int NX, int S>
void tile_dot_block(const uint16_t* const* tile_wd, const uint8_t* const* tile_codes, int64_t nb, const Q8Group& x, int i0,
                    float* const* tile_y, size_t ys, int flags) {
  constexpr int kGroups = kQ4 ? 4 : 8;
  constexpr size_t kCodeBytes = size_t(64) * kGroups;
  const size_t tile_bytes = size_t(nb) * (kCodeBytes + kTileRows * sizeof(uint16_t));
  __m256 flo[S][NX], fhi[S][NX];
  #pragma GCC unroll 4
  for (int s = 0; s < S; ++s) {
    #pragma GCC unroll 16
    for (int i = 0; i < NX; ++i) {
      flo[s][i] = (flags & kTileAccumulate) ? _mm256_loadu_ps(tile_y[s] + i * ys) : _mm256_setzero_ps();
      fhi[s][i] = (flags & kTileAccumulate) ? _mm256_loadu_ps(tile_y[s] + i * ys + 8) : _mm256_setzero_ps();
    }
  }
  const __m256i ones = _mm256_set1_epi16(1), low = _mm256_set1_epi8(0x0F), bias = _mm256_set1_epi8(char(0x80));
  for (int64_t b = 0; b < nb; ++b) {
    __m256i ilo[S][NX], ihi[S][NX];
    #pragma GCC unroll 4
    for (int s = 0; s < S; ++s) {
      q8_tile_prefetch<kCodeBytes>(tile_wd[s], b, tile_bytes, flags);
      #pragma GCC unroll 16
      for (int i = 0; i < NX; ++i) {
        ilo[s][i] = kQ4 ? _mm256_set1_epi32(x.corr[b * kTileActs + i0 + i]) : _mm256_setzero_si256();
        ihi[s][i] = ilo[s][i];
      }
    }
    #pragma GCC unroll 16
    for (int g = 0; g < 4; ++g) {
      #pragma GCC unroll 4
      for (int s = 0; s < S; ++s) {
        const uint8_t* c = tile_codes[s] + b * kCodeBytes;
        if constexpr (kQ4) {
          const __m256i raw0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(c + 64 * g));
          const __m256i raw1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(c + 64 * g + 32));
          const __m256i lo0 = _mm256_and_si256(raw0, low), lo1 = _mm256_and_si256(raw1, low);
          const __m256i hi0 = _mm256_and_si256(_mm256_srli_epi16(raw0, 4), low);
          const __m256i hi1 = _mm256_and_si256(_mm256_srli_epi16(raw1, 4), low);
          #pragma GCC unroll 16
          for (int i = 0; i < NX; ++i) {
            const __m256i xa = _mm256_set1_epi32(x.q4[(b * 8 + g) * kTileActs + i0 + i]);
            const __m256i xb = _mm256_set1_epi32(x.q4[(b * 8 + 4 + g) * kTileActs + i0 + i]);
            const __m256i p0 = _mm256_add_epi16(_mm256_maddubs_epi16(lo0, xa), _mm256_maddubs_epi16(hi0, xb));
            const __m256i p1 = _mm256_add_epi16(_mm256_maddubs_epi16(lo1, xa), _mm256_maddubs_epi16(hi1, xb));
            ilo[s][i] = _mm256_add_epi32(ilo[s][i], _mm256_madd_epi16(p0, ones));
            ihi[s][i] = _mm256_add_epi32(ihi[s][i], _mm256_madd_epi16(p1, ones));
          }
        } else {
          #pragma GCC unroll 16
          for (int h = 0; h < 2; ++h) {  // code groups 2g and 2g + 1
            const uint8_t* cg = c + 128 * g + 64 * h;
            const __m256i w0 = _mm256_xor_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(cg)), bias);
            const __m256i w1 = _mm256_xor_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(cg + 32)), bias);
            const __m256i a0 = _mm256_sign_epi8(w0, w0), a1 = _mm256_sign_epi8(w1, w1);
            #pragma GCC unroll 16
            for (int i = 0; i < NX; ++i) {
              const __m256i xv = _mm256_set1_epi32(x.q4[(b * 8 + 2 * g + h) * kTileActs + i0 + i]);
              ilo[s][i] =
                  _mm256_add_epi32(ilo[s][i], _mm256_madd_epi16(_mm256_maddubs_epi16(a0, _mm256_sign_epi8(xv, w0)), ones));
              ihi[s][i] =
                  _mm256_add_epi32(ihi[s][i], _mm256_madd_epi16(_mm256_maddubs_epi16(a1, _mm256_sign_epi8(xv, w1)), ones));
            }
          }
        }
      }
    }
    #pragma GCC unroll 4
    for (int s = 0; s < S; ++s) {
      const __m256 dlo = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(tile_wd[s] + b * kTileRows)));
      const __m256 dhi = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(tile_wd[s] + b * kTileRows + 8)));
      #pragma GCC unroll 16
      for (int i = 0; i < NX; ++i) {
        const __m256 dx = _mm256_set1_ps(x.d[b * kTileActs + i0 + i]);
        flo[s][i] = _mm256_fmadd_ps(_mm256_mul_ps(dlo, dx), _mm256_cvtepi32_ps(ilo[s][i]), flo[s][i]);
        fhi[s][i] = _mm256_fmadd_ps(_mm256_mul_ps(dhi, dx), _mm256_cvtepi32_ps(ihi[s][i]), fhi[s][i]);
      }
    }
  }
  #pragma GCC unroll 4
  for (int s = 0; s < S; ++s) {
    #pragma GCC unroll 16
    for (int i = 0; i < NX; ++i) {
      _mm256_storeu_ps(tile_y[s] + i * ys, flo[s][i]);
      _mm256_storeu_ps(tile_y[s] + i * ys + 8, fhi[s][i]);
    }
  }
}

template <bool kQ4>
void tile_dot(const uint16_t* wd, const uint8_t* codes, int64_t nb, const Q8Group& x, int nx, float* y, size_t ys,
              int flags) {
  int i = 0;  // the prefetch hints on the first pass over the tile only
  for (; i + 2 <= nx; i += 2) {
    float* yi = y + i * ys;
    tile_dot_block<kQ4, 2, 1>(&wd, &codes, nb, x, i, &yi, ys, i == 0 ? flags : flags & kTileAccumulate);
  }
  if (i < nx) {
    float* yi = y + i * ys;
    tile_dot_block<kQ4, 1, 1>(&wd, &codes, nb, x, i, &yi, ys, i == 0 ? flags : flags & kTileAccumulate);
  }
}

// TileDotPairFn: the two tiles' blocks interleaved, one activation row.
template <bool kQ4>
void tile_dot_pair(const uint16_t* const wd[2], const uint8_t* const codes[2], int64_t nb, const Q8Group& x,
                   float* const y[2]) {
  tile_dot_block<kQ4, 1, 2>(wd, codes, nb, x, 0, y, 0, kTileStream);
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
    __m256i isum[NX];
    #pragma GCC unroll 16
    for (int i = 0; i < NX; ++i) isum[i] = _mm256_setzero_si256();
    for (int c = 0; c < 4; ++c) {
      const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wb[b].qs + 32 * c));
      const __m256i lo = _mm256_and_si256(q, low_mask);
      const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), low_mask);
      const __m256i sc_lo = _mm256_set1_epi16(static_cast<int16_t>(sc[2 * c]));
      const __m256i sc_hi = _mm256_set1_epi16(static_cast<int16_t>(sc[2 * c + 1]));
      #pragma GCC unroll 16
      for (int i = 0; i < NX; ++i) {
        const BlockQ8_K& xb = reinterpret_cast<const BlockQ8_K*>(xbase + i * xs)[b];
        const __m256i x0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb.qs + 64 * c));
        const __m256i x1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb.qs + 64 * c + 32));
        const __m256i p0 = _mm256_madd_epi16(_mm256_maddubs_epi16(lo, x0), sc_lo);
        const __m256i p1 = _mm256_madd_epi16(_mm256_maddubs_epi16(hi, x1), sc_hi);
        isum[i] = _mm256_add_epi32(isum[i], _mm256_add_epi32(p0, p1));
      }
    }
    const float dw = half_to_float(wb[b].d), dmin = half_to_float(wb[b].dmin);
    #pragma GCC unroll 16
    for (int i = 0; i < NX; ++i) {
      const BlockQ8_K& xb = reinterpret_cast<const BlockQ8_K*>(xbase + i * xs)[b];
      const __m256i bsums = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb.bsums));
      const int32_t sum_mins = hsum_i32(_mm256_madd_epi16(bsums, mins16));
      const float d = xb.d * dw, dm = xb.d * dmin;
      acc[i] += d * static_cast<float>(hsum_i32(isum[i])) - dm * static_cast<float>(sum_mins);
    }
  }
  #pragma GCC unroll 16
  for (int i = 0; i < NX; ++i) y[i * ys] = acc[i];
}

// ---- Q6_K x Q8_K ----------------------------------------------------------------------------

template <int NX>
void dot_q6_k_rows(const void* w, const void* x, size_t xs, int64_t cols, float* y, size_t ys) {
  const auto* wb = static_cast<const BlockQ6_K*>(w);
  const auto* xbase = static_cast<const uint8_t*>(x);
  float acc[NX];
  #pragma GCC unroll 16
  for (int i = 0; i < NX; ++i) acc[i] = 0.0f;
  for (int64_t b = 0; b < cols / kQK_K; ++b) {
    const BlockQ6_K& blk = wb[b];
    __m256i isum[NX];
    #pragma GCC unroll 16
    for (int i = 0; i < NX; ++i) isum[i] = _mm256_setzero_si256();
    #pragma GCC unroll 16
    for (int h = 0; h < 2; ++h) {
      const __m256i ql0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk.ql + 64 * h));
      const __m256i ql1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk.ql + 64 * h + 32));
      const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk.qh + 32 * h));
      __m256i q[4];
      q6k_decode_codes(ql0, ql1, qh, q);
      for (int k = 0; k < 4; ++k) {
        const int g = 8 * h + 2 * k;  // groups g (first 16 values) and g + 1
        const __m256i scales = _mm256_set_m128i(_mm_set1_epi16(blk.scales[g + 1]), _mm_set1_epi16(blk.scales[g]));
        #pragma GCC unroll 16
        for (int i = 0; i < NX; ++i) {
          const BlockQ8_K& xb = reinterpret_cast<const BlockQ8_K*>(xbase + i * xs)[b];
          const __m256i xq = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb.qs + 128 * h + 32 * k));
          isum[i] = _mm256_add_epi32(isum[i], _mm256_madd_epi16(_mm256_maddubs_epi16(q[k], xq), scales));
        }
      }
    }
    const float dw = half_to_float(blk.d);
    const __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk.scales)));
    #pragma GCC unroll 16
    for (int i = 0; i < NX; ++i) {
      const BlockQ8_K& xb = reinterpret_cast<const BlockQ8_K*>(xbase + i * xs)[b];
      // q is stored +32: subtract 32 * sum_g scale_g * bsum_g.
      const __m256i bsums = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb.bsums));
      const int32_t offset = hsum_i32(_mm256_madd_epi16(bsums, sc16));
      acc[i] += (xb.d * dw) * static_cast<float>(hsum_i32(isum[i]) - 32 * offset);
    }
  }
  #pragma GCC unroll 16
  for (int i = 0; i < NX; ++i) y[i * ys] = acc[i];
}

// ---- Q5_K x Q8_K ----------------------------------------------------------------------------

template <int NX>
void dot_q5_k_rows(const void* w, const void* x, size_t xs, int64_t cols, float* y, size_t ys) {
  const auto* wb = static_cast<const BlockQ5_K*>(w);
  const auto* xbase = static_cast<const uint8_t*>(x);
  float acc[NX];
  #pragma GCC unroll 16
  for (int i = 0; i < NX; ++i) acc[i] = 0.0f;
  const __m256i low_mask = _mm256_set1_epi8(0x0F), bit = _mm256_set1_epi8(1);
  for (int64_t b = 0; b < cols / kQK_K; ++b) {
    alignas(16) uint8_t sc[8], mn[8];
    q4k_scales_mins(wb[b].scales, sc, mn);
    const __m128i mins8 = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(mn));
    const __m256i mins16 = _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(mins8, mins8));
    const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wb[b].qh));
    __m256i isum[NX];
    #pragma GCC unroll 16
    for (int i = 0; i < NX; ++i) isum[i] = _mm256_setzero_si256();
    #pragma GCC unroll 4
    for (int c = 0; c < 4; ++c) {
      const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wb[b].qs + 32 * c));
      // Bit 4 of sub-block j's quants is bit j of qh (a 16-bit shift keeps each byte's bit j
      // at its bit 0 once masked).
      const __m256i h_lo = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2 * c), bit), 4);
      const __m256i h_hi = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2 * c + 1), bit), 4);
      const __m256i lo = _mm256_or_si256(_mm256_and_si256(q, low_mask), h_lo);
      const __m256i hi = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(q, 4), low_mask), h_hi);
      const __m256i sc_lo = _mm256_set1_epi16(static_cast<int16_t>(sc[2 * c]));
      const __m256i sc_hi = _mm256_set1_epi16(static_cast<int16_t>(sc[2 * c + 1]));
      #pragma GCC unroll 16
      for (int i = 0; i < NX; ++i) {
        const BlockQ8_K& xb = reinterpret_cast<const BlockQ8_K*>(xbase + i * xs)[b];
        const __m256i x0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb.qs + 64 * c));
        const __m256i x1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb.qs + 64 * c + 32));
        const __m256i p0 = _mm256_madd_epi16(_mm256_maddubs_epi16(lo, x0), sc_lo);
        const __m256i p1 = _mm256_madd_epi16(_mm256_maddubs_epi16(hi, x1), sc_hi);
        isum[i] = _mm256_add_epi32(isum[i], _mm256_add_epi32(p0, p1));
      }
    }
    const float dw = half_to_float(wb[b].d), dmin = half_to_float(wb[b].dmin);
    #pragma GCC unroll 16
    for (int i = 0; i < NX; ++i) {
      const BlockQ8_K& xb = reinterpret_cast<const BlockQ8_K*>(xbase + i * xs)[b];
      const __m256i bsums = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb.bsums));
      const int32_t sum_mins = hsum_i32(_mm256_madd_epi16(bsums, mins16));
      const float d = xb.d * dw, dm = xb.d * dmin;
      acc[i] += d * static_cast<float>(hsum_i32(isum[i])) - dm * static_cast<float>(sum_mins);
    }
  }
  #pragma GCC unroll 16
  for (int i = 0; i < NX; ++i) y[i * ys] = acc[i];
}

// ---- Q3_K / Q2_K x Q8_K ----------------------------------------------------------------------
// Both store element 128h + 32j + l's low two bits at bits 2j of qs[32h + l]. Q3_K multiplies
// unsigned codes (q + 4, 0..7) and removes the offset through the block sums:
// sum (code - 4) x = sum code x - 4 bs.

template <bool kQ3, int NX>
void dot_q3_q2_k_rows(const void* w, const void* x, size_t xs, int64_t cols, float* y, size_t ys) {
  const auto* xbase = static_cast<const uint8_t*>(x);
  float acc[NX];
  #pragma GCC unroll 16
  for (int i = 0; i < NX; ++i) acc[i] = 0.0f;
  const __m256i m3 = _mm256_set1_epi8(3), bit = _mm256_set1_epi8(1);
  for (int64_t b = 0; b < cols / kQK_K; ++b) {
    const uint8_t* qs;
    const uint8_t* hmask = nullptr;
    alignas(32) int16_t scales[16], mins[16];
    float dw, dmin = 0.0f;
    if constexpr (kQ3) {
      const BlockQ3_K& blk = static_cast<const BlockQ3_K*>(w)[b];
      qs = blk.qs;
      hmask = blk.hmask;
      for (int g = 0; g < 16; ++g) scales[g] = static_cast<int16_t>(q3k_scale(blk.scales, g));
      dw = half_to_float(blk.d);
    } else {
      const BlockQ2_K& blk = static_cast<const BlockQ2_K*>(w)[b];
      qs = blk.qs;
      for (int g = 0; g < 16; ++g) {
        scales[g] = static_cast<int16_t>(blk.scales[g] & 0x0F);
        mins[g] = static_cast<int16_t>(blk.scales[g] >> 4);
      }
      dw = half_to_float(blk.d);
      dmin = half_to_float(blk.dmin);
    }
    __m256i isum[NX];
    #pragma GCC unroll 16
    for (int i = 0; i < NX; ++i) isum[i] = _mm256_setzero_si256();
    const __m256i hm = kQ3 ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(hmask)) : _mm256_setzero_si256();
    #pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
      const __m256i q2 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qs + 32 * h));
      #pragma GCC unroll 4
      for (int j = 0; j < 4; ++j) {
        __m256i code = _mm256_and_si256(_mm256_srli_epi16(q2, 2 * j), m3);
        if constexpr (kQ3) {
          const __m256i hb = _mm256_and_si256(_mm256_srli_epi16(hm, 4 * h + j), bit);
          code = _mm256_or_si256(code, _mm256_slli_epi16(hb, 2));
        }
        const int g = 8 * h + 2 * j;  // groups g (first 16 values) and g + 1
        const __m256i sc = _mm256_set_m128i(_mm_set1_epi16(scales[g + 1]), _mm_set1_epi16(scales[g]));
        #pragma GCC unroll 16
        for (int i = 0; i < NX; ++i) {
          const BlockQ8_K& xb = reinterpret_cast<const BlockQ8_K*>(xbase + i * xs)[b];
          const __m256i xq = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb.qs + 128 * h + 32 * j));
          isum[i] = _mm256_add_epi32(isum[i], _mm256_madd_epi16(_mm256_maddubs_epi16(code, xq), sc));
        }
      }
    }
    const __m256i sc16 = _mm256_load_si256(reinterpret_cast<const __m256i*>(scales));
    #pragma GCC unroll 16
    for (int i = 0; i < NX; ++i) {
      const BlockQ8_K& xb = reinterpret_cast<const BlockQ8_K*>(xbase + i * xs)[b];
      const __m256i bsums = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb.bsums));
      if constexpr (kQ3) {
        const int32_t offset = hsum_i32(_mm256_madd_epi16(bsums, sc16));
        acc[i] += (xb.d * dw) * static_cast<float>(hsum_i32(isum[i]) - 4 * offset);
      } else {
        const __m256i mn16 = _mm256_load_si256(reinterpret_cast<const __m256i*>(mins));
        const int32_t sum_mins = hsum_i32(_mm256_madd_epi16(bsums, mn16));
        const float d = xb.d * dw, dm = xb.d * dmin;
        acc[i] += d * static_cast<float>(hsum_i32(isum[i])) - dm * static_cast<float>(sum_mins);
      }
    }
  }
  #pragma GCC unroll 16
  for (int i = 0; i < NX; ++i) y[i * ys] = acc[i];
}

// ---- Q4_1 / Q5_0 / Q5_1 x Q8_K ---------------------------------------------------------------

// 32 bytes, byte i = 0x10 where bit i of the little-endian word at p is set, else 0.
inline __m256i high_bits_32(const uint8_t* p) {
  uint32_t h;
  std::memcpy(&h, p, 4);
  const __m256i spread = _mm256_shuffle_epi8(_mm256_set1_epi32(static_cast<int32_t>(h)),
                                             _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1,  //
                                                              2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3));
  const __m256i bits = _mm256_set1_epi64x(int64_t(0x8040201008040201ull));
  const __m256i set = _mm256_cmpeq_epi8(_mm256_and_si256(spread, bits), bits);
  return _mm256_and_si256(set, _mm256_set1_epi8(0x10));
}

// The 32 unsigned quants of a 32-value block in element order: nibbles (elements 0-15 low,
// 16-31 high) plus, for the 5-bit types, bit 4 from qh.
inline __m256i nibbles_32(const uint8_t* qs) {
  const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
  const __m128i m4 = _mm_set1_epi8(0x0F);
  return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(q, 4), m4), _mm_and_si128(q, m4));
}

template <DType T, int NX>
void dot_q32_rows(const void* w, const void* x, size_t xs, int64_t cols, float* y, size_t ys) {
  const auto* wbytes = static_cast<const uint8_t*>(w);
  const auto* xbase = static_cast<const uint8_t*>(x);
  float acc[NX];
  #pragma GCC unroll 16
  for (int i = 0; i < NX; ++i) acc[i] = 0.0f;
  const __m256i ones = _mm256_set1_epi16(1);
  for (int64_t k = 0; k < cols / 32; ++k) {
    __m256i q;
    float dw, mw = 0.0f;
    if constexpr (T == DType::Q4_1) {
      const auto& blk = reinterpret_cast<const BlockQ4_1*>(wbytes)[k];
      q = nibbles_32(blk.qs);
      dw = half_to_float(blk.d);
      mw = half_to_float(blk.m);
    } else if constexpr (T == DType::Q5_0) {
      const auto& blk = reinterpret_cast<const BlockQ5_0*>(wbytes)[k];
      q = _mm256_or_si256(nibbles_32(blk.qs), high_bits_32(blk.qh));
      dw = half_to_float(blk.d);
    } else {
      const auto& blk = reinterpret_cast<const BlockQ5_1*>(wbytes)[k];
      q = _mm256_or_si256(nibbles_32(blk.qs), high_bits_32(blk.qh));
      dw = half_to_float(blk.d);
      mw = half_to_float(blk.m);
    }
    const int j = static_cast<int>(k % 8);
    #pragma GCC unroll 16
    for (int i = 0; i < NX; ++i) {
      const BlockQ8_K& a = reinterpret_cast<const BlockQ8_K*>(xbase + i * xs)[k / 8];
      const __m256i xq = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.qs + 32 * j));
      int32_t isum = hsum_i32(_mm256_madd_epi16(_mm256_maddubs_epi16(q, xq), ones));
      const int32_t bs = a.bsums[2 * j] + a.bsums[2 * j + 1];
      if constexpr (T == DType::Q5_0) {
        isum -= 16 * bs;
        acc[i] += (a.d * dw) * static_cast<float>(isum);
      } else {
        acc[i] += (a.d * dw) * static_cast<float>(isum) + (a.d * mw) * static_cast<float>(bs);
      }
    }
  }
  #pragma GCC unroll 16
  for (int i = 0; i < NX; ++i) y[i * ys] = acc[i];
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

// DotRowsFn for Fn<1..4>.
template <template <int> class Rows>
void dot_rows_dispatch(const void* w, const void* x, size_t xs, int nx, int64_t cols, float* y, size_t ys) {
  switch (nx) {
    case 1: return Rows<1>::run(w, x, xs, cols, y, ys);
    case 2: return Rows<2>::run(w, x, xs, cols, y, ys);
    case 3: return Rows<3>::run(w, x, xs, cols, y, ys);
    default: return Rows<4>::run(w, x, xs, cols, y, ys);
  }
}
template <int NX>
struct Q5KRows {
  static void run(const void* w, const void* x, size_t xs, int64_t cols, float* y, size_t ys) {
    dot_q5_k_rows<NX>(w, x, xs, cols, y, ys);
  }
};
template <int NX>
struct Q3KRows {
  static void run(const void* w, const void* x, size_t xs, int64_t cols, float* y, size_t ys) {
    dot_q3_q2_k_rows<true, NX>(w, x, xs, cols, y, ys);
  }
};
template <int NX>
struct Q2KRows {
  static void run(const void* w, const void* x, size_t xs, int64_t cols, float* y, size_t ys) {
    dot_q3_q2_k_rows<false, NX>(w, x, xs, cols, y, ys);
  }
};
template <DType T>
struct Q32Rows {
  template <int NX>
  struct Rows {
    static void run(const void* w, const void* x, size_t xs, int64_t cols, float* y, size_t ys) {
      dot_q32_rows<T, NX>(w, x, xs, cols, y, ys);
    }
  };
};

}  // namespace

void add_avx2_dot_kernels(KernelTable& t) {
  t.quantize_q8 = quantize_q8;
  t.quantize_q8_K = quantize_act_q8_k;
  // Float weights: float_tiles_avx2.cpp.
  t.tile_dot[0] = tile_dot<false>;
  t.tile_dot[1] = tile_dot<true>;
  t.tile_dot_pair[0] = tile_dot_pair<false>;
  t.tile_dot_pair[1] = tile_dot_pair<true>;
  t.kquant_dot[0] = Q4KDot::run;
  t.kquant_dot[1] = Q6KDot::run;
  t.kquant_dot[2] = dot_rows_dispatch<Q5KRows>;
  t.kquant_dot[3] = dot_rows_dispatch<Q3KRows>;
  t.kquant_dot[4] = dot_rows_dispatch<Q2KRows>;
  t.kquant_dot[5] = dot_rows_dispatch<Q32Rows<DType::Q4_1>::Rows>;
  t.kquant_dot[6] = dot_rows_dispatch<Q32Rows<DType::Q5_0>::Rows>;
  t.kquant_dot[7] = dot_rows_dispatch<Q32Rows<DType::Q5_1>::Rows>;
}

}  // namespace spillway::kernels
