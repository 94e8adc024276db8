// AVX-512 VNNI: the sweep of K-quant tiles unpacked once per matmul (kernel_table.h, "K-quant
// tiles unpacked"), for batched decode and prefill. The unpacking is the AVX2 table's
// (kquant_unpacked_avx2.cpp, whose header gives the layout): its fields are [16 rows][4 bytes]
// units, so one 64-byte load is the 16 rows of a tile in the 16 lanes, as in the tile kernels.
//
// Why: the AVX-512 tile kernels decode a tile's codes and 6-bit scales again for every 4
// activation rows, which left the m = 16 GEMM at 42-64% of the vpdpbusd issue rate
// (bench/README.md, "What batched decode can reach with VNNI"). Here a block is loads,
// vpdpbusd and one vpmulld per sub-block and row. Each sub-block's sum (16 or 32 values) is
// one vpdpbusd chain of the codes (unsigned) against broadcast activation quads, then times
// its scale: exact int32, so every output has the scalar reference's bits (DotRowsFn's order,
// the float steps as the tile kernels in dot_avx512.cpp).
#include "kernels/avx512_target.h"  // first: the intrinsics

#include <cstdint>
#include <cstring>

#include "kernels/kernel_registry.h"
#include "kernels/quant/quant_blocks.h"

namespace spillway::kernels {

namespace {

inline __m512i load64(const uint8_t* p) { return _mm512_loadu_si512(p); }
inline __m512i broadcast_dword(const void* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm512_set1_epi32(v);
}
// The int16 row pairs (s, s) of the unpacked scales as int32 s (the high half, sign-extended).
inline __m512i pair_scale(const uint8_t* p) { return _mm512_srai_epi32(load64(p), 16); }

// ---- Q6_K (unpacked block: codes q + 32 at [16 g][4 l][16 r][4], scale pairs (sc_g, sc_g) at
// 4096, (sc_2k, sc_2k+1) at 5120, d at 5632) ------------------------------------------------
constexpr size_t kQ6Block = 5664, kQ6Scale = 4096, kQ6ScalePairs = 5120, kQ6D = 5632;

// NX (1..8) activation rows. Per group of 16 values: four vpdpbusd, times sc_g. Each block's
// sum starts from -32 * sum_g sc_g bsum_g (the codes are q + 32).
template <int NX>
void q6k_unpacked_rows(const uint8_t* u, int64_t nb, const uint8_t* x, size_t xs, float* y, size_t ys) {
  __m512 facc[NX];
#pragma GCC unroll 8
  for (int i = 0; i < NX; ++i) facc[i] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* ub = u + b * kQ6Block;
    const BlockQ8_K* xb[NX];
    __m512i isum[NX];
#pragma GCC unroll 8
    for (int i = 0; i < NX; ++i) {
      xb[i] = reinterpret_cast<const BlockQ8_K*>(x + i * xs) + b;
      __m512i offset = _mm512_setzero_si512();
#pragma GCC unroll 8
      for (int k = 0; k < 8; ++k) {
        offset = _mm512_dpwssd_epi32(offset, load64(ub + kQ6ScalePairs + 64 * k), broadcast_dword(xb[i]->bsums + 2 * k));
      }
      isum[i] = _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_slli_epi32(offset, 5));
    }
#pragma GCC unroll 2
    for (int g = 0; g < 16; ++g) {
      const __m512i scale = pair_scale(ub + kQ6Scale + 64 * g);
      const __m512i c0 = load64(ub + (4 * g) * 64), c1 = load64(ub + (4 * g + 1) * 64);
      const __m512i c2 = load64(ub + (4 * g + 2) * 64), c3 = load64(ub + (4 * g + 3) * 64);
#pragma GCC unroll 8
      for (int i = 0; i < NX; ++i) {
        const int8_t* xq = xb[i]->qs + 16 * g;
        __m512i s = _mm512_dpbusd_epi32(_mm512_setzero_si512(), c0, broadcast_dword(xq));
        s = _mm512_dpbusd_epi32(s, c1, broadcast_dword(xq + 4));
        s = _mm512_dpbusd_epi32(s, c2, broadcast_dword(xq + 8));
        s = _mm512_dpbusd_epi32(s, c3, broadcast_dword(xq + 12));
        isum[i] = _mm512_add_epi32(isum[i], _mm512_mullo_epi32(s, scale));
      }
    }
    const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(ub + kQ6D)));
#pragma GCC unroll 8
    for (int i = 0; i < NX; ++i) {
      const __m512 dx = _mm512_set1_ps(xb[i]->d);
      facc[i] = _mm512_add_ps(facc[i], _mm512_mul_ps(_mm512_mul_ps(dx, dw), _mm512_cvtepi32_ps(isum[i])));
    }
  }
#pragma GCC unroll 8
  for (int i = 0; i < NX; ++i) _mm512_storeu_ps(y + i * ys, facc[i]);
}

// ---- Q4_K / Q5_K (unpacked block: codes [8 j][8 l][16 r][4], scale pairs (sc_j, sc_j) at
// 4096, min pairs (m_a, m_b) for (a, b) = (0,2) (1,3) (4,6) (5,7) at 4608, d at 4864, dmin at
// 4896) -------------------------------------------------------------------------------------
constexpr size_t kQ45Block = 4928, kQ45Scale = 4096, kQ45Mins = 4608, kQ45D = 4864, kQ45DMin = 4896;

// sum_j m_j s_j of one activation block (s_j its 32-value sums), per row lane: the 32-value
// sums paired as the min pairs, (s0, s2) (s1, s3) (s4, s6) (s5, s7), against them.
inline __m512i sum_mins(const __m512i mins[4], const int16_t bsums16[16]) {
  const __m128i pair_order = _mm_setr_epi8(0, 1, 4, 5, 2, 3, 6, 7, 8, 9, 12, 13, 10, 11, 14, 15);
  const __m128i sums = _mm_shuffle_epi8(_mm_hadd_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(bsums16)),
                                                       _mm_loadu_si128(reinterpret_cast<const __m128i*>(bsums16 + 8))),
                                        pair_order);
  __m512i smin = _mm512_dpwssd_epi32(_mm512_setzero_si512(), mins[0], _mm512_broadcastd_epi32(sums));
  smin = _mm512_dpwssd_epi32(smin, mins[1], _mm512_broadcastd_epi32(_mm_shuffle_epi32(sums, 0x55)));
  smin = _mm512_dpwssd_epi32(smin, mins[2], _mm512_broadcastd_epi32(_mm_shuffle_epi32(sums, 0xAA)));
  return _mm512_dpwssd_epi32(smin, mins[3], _mm512_broadcastd_epi32(_mm_shuffle_epi32(sums, 0xFF)));
}

// NX (1..8) activation rows. Per sub-block of 32 values: eight vpdpbusd, times sc_j; then the
// mins' term as the tile kernels.
template <int NX>
void q45k_unpacked_rows(const uint8_t* u, int64_t nb, const uint8_t* x, size_t xs, float* y, size_t ys) {
  __m512 facc[NX];
#pragma GCC unroll 8
  for (int i = 0; i < NX; ++i) facc[i] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* ub = u + b * kQ45Block;
    const BlockQ8_K* xb[NX];
    __m512i isum[NX];
#pragma GCC unroll 8
    for (int i = 0; i < NX; ++i) {
      xb[i] = reinterpret_cast<const BlockQ8_K*>(x + i * xs) + b;
      isum[i] = _mm512_setzero_si512();
    }
#pragma GCC unroll 1
    for (int j = 0; j < 8; ++j) {
      const __m512i scale = pair_scale(ub + kQ45Scale + 64 * j);
      __m512i s[NX];
#pragma GCC unroll 8
      for (int i = 0; i < NX; ++i) s[i] = _mm512_setzero_si512();
#pragma GCC unroll 8
      for (int l = 0; l < 8; ++l) {
        const __m512i code = load64(ub + (8 * j + l) * 64);
#pragma GCC unroll 8
        for (int i = 0; i < NX; ++i) s[i] = _mm512_dpbusd_epi32(s[i], code, broadcast_dword(xb[i]->qs + 32 * j + 4 * l));
      }
#pragma GCC unroll 8
      for (int i = 0; i < NX; ++i) isum[i] = _mm512_add_epi32(isum[i], _mm512_mullo_epi32(s[i], scale));
    }
    __m512i mins[4];
#pragma GCC unroll 4
    for (int k = 0; k < 4; ++k) mins[k] = load64(ub + kQ45Mins + 64 * k);
    const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(ub + kQ45D)));
    const __m512 dmw = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(ub + kQ45DMin)));
#pragma GCC unroll 8
    for (int i = 0; i < NX; ++i) {
      const __m512 dx = _mm512_set1_ps(xb[i]->d);
      const __m512 fmin = _mm512_mul_ps(_mm512_mul_ps(dx, dmw), _mm512_cvtepi32_ps(sum_mins(mins, xb[i]->bsums)));
      const __m512 tv = _mm512_sub_ps(_mm512_mul_ps(_mm512_mul_ps(dx, dw), _mm512_cvtepi32_ps(isum[i])), fmin);
      facc[i] = _mm512_add_ps(facc[i], tv);
    }
  }
#pragma GCC unroll 8
  for (int i = 0; i < NX; ++i) _mm512_storeu_ps(y + i * ys, facc[i]);
}

// KQuantUnpackedDotFn for kind (Q4_K 0, Q6_K 1, Q5_K 2): up to kKQuantTileActs rows a pass.
template <int kKind>
void kquant_unpacked_dot(const uint8_t* u, int64_t nb, const void* x, size_t xs, int nx, float* y, size_t ys) {
  static_assert(kKQuantTileActs == 8);
  const auto* xp = static_cast<const uint8_t*>(x);
#define SPILLWAY_UNPACKED(NX)                                              \
  if constexpr (kKind == 1) q6k_unpacked_rows<NX>(u, nb, xp, xs, y, ys);    \
  else q45k_unpacked_rows<NX>(u, nb, xp, xs, y, ys);
  switch (nx) {
    case 1: { SPILLWAY_UNPACKED(1) break; }
    case 2: { SPILLWAY_UNPACKED(2) break; }
    case 3: { SPILLWAY_UNPACKED(3) break; }
    case 4: { SPILLWAY_UNPACKED(4) break; }
    case 5: { SPILLWAY_UNPACKED(5) break; }
    case 6: { SPILLWAY_UNPACKED(6) break; }
    case 7: { SPILLWAY_UNPACKED(7) break; }
    default: { SPILLWAY_UNPACKED(8) break; }
  }
#undef SPILLWAY_UNPACKED
}

}  // namespace

void add_avx512_kquant_unpacked_kernels(KernelTable& t) {
  // t.kquant_unpack: the AVX2 table's, which this table starts from.
  t.kquant_unpacked_dot[0] = kquant_unpacked_dot<0>;
  t.kquant_unpacked_dot[1] = kquant_unpacked_dot<1>;
  t.kquant_unpacked_dot[2] = kquant_unpacked_dot<2>;
  // Unpacking pays once the sweep of the unpacked tile, which no longer reads DRAM, saves more
  // than the unpacking pass costs: AVX-512's tile kernels (two tiles a call for Q4_K / Q6_K)
  // decode far faster than AVX2's, so later. One thread, 5632x2048 (bench/README.md, "K-quant
  // tiles unpacked on AVX-512"): Q4_K even up to 128 rows, 4% faster at 256; Q5_K from 32;
  // Q6_K even at 16, 1.2x at 64.
  t.kquant_unpack_min_rows[0] = 256;
  t.kquant_unpack_min_rows[1] = 16;
  t.kquant_unpack_min_rows[2] = 32;
}

}  // namespace spillway::kernels
